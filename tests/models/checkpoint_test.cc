// Tests of models/checkpoint: single-file and sharded checkpoint directories.
#include "models/checkpoint.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/models/safetensors_writer.h"

namespace tandem::models {
namespace {

using ::tandem::models::testing::F32Bytes;
using ::tandem::models::testing::SafetensorsBytes;
using ::tandem::models::testing::TempDir;
using ::tandem::models::testing::TestTensor;
using ::tandem::models::testing::U16Bytes;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::vector<float> Values(const FloatTensor& t) { return {t.data().begin(), t.data().end()}; }

constexpr char kConfig[] = R"({"model_type": "mamba2"})";

std::vector<TestTensor> SingleTensors() {
  return {
      {"w.f32", "F32", {2, 3}, F32Bytes({1, 2, 3, 4, 5, 6})},
      {"w.bf16", "BF16", {2, 2}, U16Bytes({0x3f80, 0xc000, 0x3ec0, 0x7f80})},
      {"w.f16", "F16", {3}, U16Bytes({0x3c00, 0x0001, 0xfc00})},
      {"w.i32", "I32", {1}, std::string("\x05\x00\x00\x00", 4)},
      {"w.empty", "F32", {0, 5}, ""},
  };
}

// A single-file checkpoint in `dir`.
void WriteSingle(const TempDir& dir, const std::vector<TestTensor>& tensors) {
  dir.Write("config.json", kConfig);
  dir.Write("model.safetensors", SafetensorsBytes(tensors));
}

std::unique_ptr<Checkpoint> MustOpen(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

TEST(CheckpointTest, OpensSingleFile) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dir(), dir.path());
  EXPECT_EQ(c->config_path(), dir.File("config.json"));
  EXPECT_THAT(c->files(), ElementsAre(dir.File("model.safetensors")));
  EXPECT_TRUE(c->Has("w.f32"));
  EXPECT_FALSE(c->Has("w.f3"));
  EXPECT_THAT(c->TensorNames(), ElementsAre("w.bf16", "w.empty", "w.f16", "w.f32", "w.i32"));
  absl::StatusOr<TensorInfo> info = c->Info("w.bf16");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->dtype, DType::kBF16);
  EXPECT_EQ(info->shape, (std::vector<int64_t>{2, 2}));
}

TEST(CheckpointTest, LoadsF32InPlace) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<FloatTensor> t = c->LoadFloat("w.f32", {2, 3});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->borrowed());
  EXPECT_THAT(t->shape(), ElementsAre(2, 3));
  EXPECT_EQ(t->rank(), 2u);
  EXPECT_EQ(t->dim(1), 3);
  EXPECT_EQ(t->num_elements(), 6);
  EXPECT_THAT(Values(*t), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(CheckpointTest, ConvertsBf16AndF16) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<FloatTensor> b = c->LoadFloat("w.bf16", {2, 2});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->borrowed());
  EXPECT_THAT(Values(*b), ElementsAre(1.0f, -2.0f, 0.375f, std::numeric_limits<float>::infinity()));
  absl::StatusOr<FloatTensor> h = c->LoadFloat("w.f16", {3});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(Values(*h),
              ElementsAre(1.0f, std::ldexp(1.0f, -24), -std::numeric_limits<float>::infinity()));
}

TEST(CheckpointTest, EmptyTensorLoads) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<FloatTensor> t = c->LoadFloat("w.empty", {0, 5});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_elements(), 0);
  EXPECT_TRUE(t->data().empty());
}

TEST(CheckpointTest, UnalignedF32IsCopied) {
  TempDir dir;
  // A 1-byte tensor first puts the F32 data at an odd offset (header padded to 8).
  WriteSingle(dir, {{"a.byte", "U8", {1}, "x"}, {"b.f32", "F32", {2}, F32Bytes({1.5f, -3.0f})}});
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<FloatTensor> t = c->LoadFloat("b.f32", {2});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->borrowed());
  EXPECT_THAT(Values(*t), ElementsAre(1.5f, -3.0f));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data().data()) % alignof(float), 0u);
}

TEST(CheckpointTest, TensorOutlivesCheckpoint) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  FloatTensor kept;
  {
    std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
    ASSERT_NE(c, nullptr);
    absl::StatusOr<FloatTensor> t = c->LoadFloat("w.f32", {2, 3});
    ASSERT_TRUE(t.ok()) << t.status();
    kept = *std::move(t);
  }
  EXPECT_TRUE(kept.borrowed());
  EXPECT_THAT(Values(kept), ElementsAre(1, 2, 3, 4, 5, 6));
  FloatTensor moved = std::move(kept);
  EXPECT_EQ(kept.num_elements(), 0);  // NOLINT(bugprone-use-after-move): documented as empty
  std::vector<float> v = std::move(moved).TakeVector();
  EXPECT_THAT(v, ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(CheckpointTest, TakeVectorMovesOwnedData) {
  FloatTensor t({2}, std::vector<float>{3, 4});
  EXPECT_FALSE(t.borrowed());
  const float* before = t.data().data();
  std::vector<float> v = std::move(t).TakeVector();
  EXPECT_EQ(v.data(), before);
  EXPECT_THAT(v, ElementsAre(3, 4));
}

TEST(CheckpointTest, ShapeMismatchNamesFileTensorAndBothShapes) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<FloatTensor> t = c->LoadFloat("w.f32", {2, 4});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(t.status()),
              AllOf(HasSubstr(dir.File("model.safetensors")), HasSubstr("\"w.f32\""),
                    HasSubstr("shape mismatch: expected [2, 4], found [2, 3]")));
  // Rank differences too.
  EXPECT_THAT(Msg(c->LoadFloat("w.f32", {6}).status()), HasSubstr("expected [6], found [2, 3]"));
  EXPECT_FALSE(c->LoadRaw("w.f32", std::vector<int64_t>{3, 2}).ok());
}

TEST(CheckpointTest, MissingTensorIsNotFoundNamingIt) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<FloatTensor> t = c->LoadFloat("model.layers.0.mixer.A_log", {4});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(t.status()),
              AllOf(HasSubstr(dir.path()), HasSubstr("\"model.layers.0.mixer.A_log\"")));
  EXPECT_EQ(c->Info("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointTest, UnsupportedDtypeNamesFileTensorAndDtype) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<FloatTensor> t = c->LoadFloat("w.i32", {1});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(Msg(t.status()), AllOf(HasSubstr(dir.File("model.safetensors")),
                                     HasSubstr("\"w.i32\""), HasSubstr("I32")));
}

TEST(CheckpointTest, LoadRawGivesStoredBytes) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<RawTensor> r = c->LoadRaw("w.bf16", {2, 2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dtype, DType::kBF16);
  ASSERT_EQ(r->bytes.size(), 8u);
  EXPECT_EQ(r->bytes[0], 0x80);
  EXPECT_EQ(r->bytes[1], 0x3f);
  EXPECT_NE(r->keep_alive, nullptr);
}

TEST(CheckpointTest, LoadFloatAnyShape) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  absl::StatusOr<FloatTensor> t = c->LoadFloatAnyShape("w.f16");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->shape(), ElementsAre(3));
}

TEST(CheckpointTest, ReportsUnusedTensors) {
  TempDir dir;
  WriteSingle(dir, SingleTensors());
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->LoadFloat("w.f32", {2, 3}).ok());
  ASSERT_TRUE(c->LoadRaw("w.i32", std::vector<int64_t>{1}).ok());
  EXPECT_FALSE(c->LoadFloat("w.bf16", {9}).ok());  // a failed load does not count as used
  EXPECT_THAT(c->UnusedTensors(), ElementsAre("w.bf16", "w.empty", "w.f16"));
  absl::Status all = c->CheckAllUsed();
  EXPECT_EQ(all.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(all), AllOf(HasSubstr("3 tensor(s)"), HasSubstr("\"w.bf16\"")));
  ASSERT_TRUE(c->LoadFloatAnyShape("w.bf16").ok());
  ASSERT_TRUE(c->LoadFloatAnyShape("w.empty").ok());
  ASSERT_TRUE(c->LoadFloatAnyShape("w.f16").ok());
  EXPECT_TRUE(c->UnusedTensors().empty());
  EXPECT_TRUE(c->CheckAllUsed().ok());
}

// ---- Directory-level errors ----------------------------------------------------------------

TEST(CheckpointTest, MissingDirectory) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.File("absent"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(c.status()), HasSubstr(dir.File("absent")));
}

TEST(CheckpointTest, PathIsAFile) {
  TempDir dir;
  const std::string file = dir.Write("model.safetensors", "x");
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(file);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Msg(c.status()), AllOf(HasSubstr(file), HasSubstr("not a directory")));
}

TEST(CheckpointTest, MissingConfig) {
  TempDir dir;
  dir.Write("model.safetensors", SafetensorsBytes(SingleTensors()));
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(c.status()), HasSubstr(dir.File("config.json")));
}

TEST(CheckpointTest, NoWeights) {
  TempDir dir;
  dir.Write("config.json", kConfig);
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(c.status()), AllOf(HasSubstr(dir.path()), HasSubstr("model.safetensors")));
}

TEST(CheckpointTest, ShardsWithoutIndexAreNamedInTheError) {
  TempDir dir;
  dir.Write("config.json", kConfig);
  dir.Write("model-00001-of-00002.safetensors", SafetensorsBytes(SingleTensors()));
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Msg(c.status()), AllOf(HasSubstr("model-00001-of-00002.safetensors"),
                                     HasSubstr("model.safetensors.index.json")));
}

TEST(CheckpointTest, CorruptSingleFileNamesIt) {
  TempDir dir;
  dir.Write("config.json", kConfig);
  std::string bytes = SafetensorsBytes(SingleTensors());
  bytes.resize(bytes.size() - 1);
  dir.Write("model.safetensors", bytes);
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Msg(c.status()),
              AllOf(HasSubstr(dir.File("model.safetensors")), HasSubstr("truncated")));
}

// ---- Sharded checkpoints -------------------------------------------------------------------

constexpr char kShard1[] = "model-00001-of-00002.safetensors";
constexpr char kShard2[] = "model-00002-of-00002.safetensors";

void WriteSharded(const TempDir& dir) {
  dir.Write("config.json", kConfig);
  dir.Write(kShard1, SafetensorsBytes({{"embed", "BF16", {2}, U16Bytes({0x3f80, 0x4000})},
                                       {"layer0", "F32", {1}, F32Bytes({5})}}));
  dir.Write(kShard2, SafetensorsBytes({{"layer1", "F16", {2}, U16Bytes({0x3c00, 0xc000})},
                                       {"stray", "F32", {1}, F32Bytes({9})}}));
}

std::string Index(const std::string& weight_map) {
  return R"({"metadata": {"total_size": 16}, "weight_map": )" + weight_map + "}";
}

const std::string kGoodMap = std::string(R"({"embed": ")") + kShard1 + R"(", "layer0": ")" +
                             kShard1 + R"(", "layer1": ")" + kShard2 + R"("})";

TEST(ShardedCheckpointTest, LoadsAcrossShards) {
  TempDir dir;
  WriteSharded(dir);
  dir.Write("model.safetensors.index.json", Index(kGoodMap));
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  EXPECT_THAT(c->files(), ElementsAre(dir.File(kShard1), dir.File(kShard2)));
  // The index decides what the checkpoint holds: "stray" is in a shard but not in weight_map.
  EXPECT_THAT(c->TensorNames(), ElementsAre("embed", "layer0", "layer1"));
  absl::StatusOr<FloatTensor> e = c->LoadFloat("embed", {2});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(Values(*e), ElementsAre(1.0f, 2.0f));
  absl::StatusOr<FloatTensor> l1 = c->LoadFloat("layer1", {2});
  ASSERT_TRUE(l1.ok()) << l1.status();
  EXPECT_THAT(Values(*l1), ElementsAre(1.0f, -2.0f));
  // Errors about a sharded tensor name its shard.
  EXPECT_THAT(Msg(c->LoadFloat("layer1", {3}).status()),
              AllOf(HasSubstr(dir.File(kShard2)), HasSubstr("\"layer1\"")));
}

TEST(ShardedCheckpointTest, SingleFileWinsOverIndex) {
  TempDir dir;
  WriteSharded(dir);
  dir.Write("model.safetensors.index.json", Index(kGoodMap));
  dir.Write("model.safetensors", SafetensorsBytes(SingleTensors()));
  std::unique_ptr<Checkpoint> c = MustOpen(dir.path());
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->Has("w.f32"));
  EXPECT_FALSE(c->Has("embed"));
}

TEST(ShardedCheckpointTest, MissingShardNamesIndexAndShard) {
  TempDir dir;
  WriteSharded(dir);
  std::filesystem::remove(dir.File(kShard2));
  dir.Write("model.safetensors.index.json", Index(kGoodMap));
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(c.status()), AllOf(HasSubstr(dir.File("model.safetensors.index.json")),
                                     HasSubstr(dir.File(kShard2)), HasSubstr("\"layer1\"")));
}

TEST(ShardedCheckpointTest, WeightMapNamingUnknownShard) {
  TempDir dir;
  WriteSharded(dir);
  dir.Write("model.safetensors.index.json",
            Index(R"({"embed": "model-00003-of-00002.safetensors"})"));
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Msg(c.status()),
              AllOf(HasSubstr("model.safetensors.index.json"),
                    HasSubstr("model-00003-of-00002.safetensors"), HasSubstr("\"embed\"")));
}

TEST(ShardedCheckpointTest, TensorAbsentFromItsShardNamesBoth) {
  TempDir dir;
  WriteSharded(dir);
  // "layer1" lives in shard 2, but the index says shard 1.
  dir.Write("model.safetensors.index.json", Index(std::string(R"({"embed": ")") + kShard1 +
                                                  R"(", "layer1": ")" + kShard1 + R"("})"));
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(c.status()), AllOf(HasSubstr(dir.File(kShard1)), HasSubstr("\"layer1\""),
                                     HasSubstr("model.safetensors.index.json")));
}

TEST(ShardedCheckpointTest, CorruptShardNamesIt) {
  TempDir dir;
  WriteSharded(dir);
  dir.Write(kShard2, "garbage!garbage!");
  dir.Write("model.safetensors.index.json", Index(kGoodMap));
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Msg(c.status()), AllOf(HasSubstr(dir.File(kShard2)), HasSubstr("header length")));
}

TEST(ShardedCheckpointTest, InvalidIndexFiles) {
  struct Case {
    std::string index;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"{not json", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"metadata": {}})", "missing \"weight_map\""},
      {R"({"weight_map": []})", "missing \"weight_map\""},
      {R"({"weight_map": {}})", "weight_map is empty"},
      {R"({"weight_map": {"embed": 3}})", "\"embed\" is not a file name"},
      {R"({"weight_map": {"embed": "../model-00001-of-00002.safetensors"}})",
       "\"embed\" is not a file name"},
      {R"({"weight_map": {"embed": ""}})", "\"embed\" is not a file name"},
      {R"({"weight_map": {"embed": ".."}})", "\"embed\" is not a file name"},
  };
  for (const Case& k : cases) {
    TempDir dir;
    WriteSharded(dir);
    dir.Write("model.safetensors.index.json", k.index);
    absl::StatusOr<std::unique_ptr<Checkpoint>> c = Checkpoint::Open(dir.path());
    ASSERT_FALSE(c.ok()) << k.index;
    EXPECT_THAT(Msg(c.status()),
                AllOf(HasSubstr(dir.File("model.safetensors.index.json")), HasSubstr(k.expected)))
        << k.index;
  }
}

}  // namespace
}  // namespace tandem::models
