// Generation through real sequence memory from an allocator: outputs, stop tokens, memory
// returned on success and on failure, and restore from a checkpoint with shared pages.
#include "engine/generator.h"

#include <string>
#include <vector>

#include "cache/arena_allocator.h"
#include "engine/sequence_memory.h"
#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "models/json_file.h"
#include "models/model.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

std::string Fixture(const std::string& path) { return std::string(TANDEM_TEST_DATA) + "/" + path; }

std::unique_ptr<models::Model> LoadModel(const std::string& name) {
  models::LoadOptions options;
  options.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  auto model = models::Model::Load(Fixture("models/" + name), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

std::unique_ptr<cache::ArenaAllocator> Arena(const models::Model& model, size_t pages,
                                             size_t blocks) {
  if (model.config().num_attention_layers == 0) pages = 0;  // pure Mamba-2 has no KV
  cache::ArenaConfig config{model.layout().kv_page_bytes(), pages, model.layout().ssm_block_bytes(),
                            blocks};
  auto arena = cache::ArenaAllocator::Create(config);
  EXPECT_TRUE(arena.ok()) << arena.status();
  return *std::move(arena);
}

TEST(GeneratorTest, GreedyOutputMatchesTheReferenceAndFreesEverything) {
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    auto model = LoadModel(name);
    ASSERT_NE(model, nullptr);
    auto manifest =
        models::ReadJsonFile(Fixture(std::string("reference/") + name + "/manifest.json"));
    ASSERT_TRUE(manifest.ok());
    const auto& c = (*manifest)["cases"][3];  // 80 tokens: several chunks and pages
    const std::vector<int32_t> prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    auto arena = Arena(*model, 16, 1);
    auto ops = kernels::MakeCpuOps();
    GenerateOptions options;
    options.max_new_tokens = 8;
    options.prefill_chunk = 24;  // prompt prefilled in four chunks
    auto result = Generate(*model, *ops, *arena, prompt, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->output_ids, c["greedy_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(arena->stats(cache::Pool::kKvPage).used_units, 0u);
    EXPECT_EQ(arena->stats(cache::Pool::kSsmBlock).used_units, 0u);
  }
}

TEST(GeneratorTest, StopsOnAStopTokenAndRecordsLogits) {
  auto model = LoadModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  auto arena = Arena(*model, 8, 1);
  auto ops = kernels::MakeCpuOps();
  const std::vector<int32_t> prompt = {5, 9, 11};
  GenerateOptions options;
  options.max_new_tokens = 6;
  options.record_logits = true;
  auto free_run = Generate(*model, *ops, *arena, prompt, options);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  ASSERT_EQ(free_run->output_ids.size(), 6u);
  EXPECT_EQ(free_run->logits.size(), 6u * model->config().vocab_size);

  options.stop_token_ids = {free_run->output_ids[2]};
  auto stopped = Generate(*model, *ops, *arena, prompt, options);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->finish, GenerateResult::Finish::kStop);
  EXPECT_LE(stopped->output_ids.size(), 3u);
  EXPECT_EQ(stopped->output_ids.back(), free_run->output_ids[2]);
}

TEST(GeneratorTest, OutOfMemoryIsAnErrorAndLeaksNothing) {
  auto model = LoadModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  auto arena = Arena(*model, 2, 1);  // 32 positions at page size 16
  auto ops = kernels::MakeCpuOps();
  std::vector<int32_t> prompt(40, 7);
  GenerateOptions options;
  auto result = Generate(*model, *ops, *arena, prompt, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(arena->stats(cache::Pool::kKvPage).used_units, 0u);
  EXPECT_EQ(arena->stats(cache::Pool::kSsmBlock).used_units, 0u);
}

TEST(GeneratorTest, RestoreSharesFullPagesAndCopiesThePartialOne) {
  auto model = LoadModel("jamba-tiny");
  ASSERT_NE(model, nullptr);
  auto arena = Arena(*model, 16, 3);
  auto ops = kernels::MakeCpuOps();
  kernels::Workspace ws;
  const int64_t vocab = model->config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 60; ++i) prompt.push_back(10 + (i * 37) % 900);
  const int64_t p = 37;  // inside the third page

  auto source = SequenceMemory::Create(*arena, *model);
  ASSERT_TRUE(source.ok());
  auto checkpoint = SsmCheckpoint::Allocate(*arena);
  ASSERT_TRUE(checkpoint.ok());
  ASSERT_TRUE(source->Reserve(60).ok());
  const models::SsmSnapshot snap[1] = {{p, checkpoint->data()}};
  const models::SequenceInput full{&source->state(), prompt, snap, true};
  std::vector<float> full_logits(60 * vocab);
  ASSERT_TRUE(model->Forward(*ops, ws, {&full, 1}, full_logits.data()).ok());

  {
    auto restored = SequenceMemory::Create(*arena, *model);
    ASSERT_TRUE(restored.ok());
    ASSERT_TRUE(restored->RestoreFrom(checkpoint->data(), source->state().kv_pages, p).ok());
    EXPECT_EQ(restored->owned_pages(), 1u);  // pages 0 and 1 shared, page 2 copied
    EXPECT_EQ(restored->state().kv_pages[0], source->state().kv_pages[0]);
    EXPECT_NE(restored->state().kv_pages[2], source->state().kv_pages[2]);
    ASSERT_TRUE(restored->Reserve(60).ok());
    const std::span<const int32_t> rest = std::span<const int32_t>(prompt).subspan(p);
    const models::SequenceInput in{&restored->state(), rest, {}, true};
    std::vector<float> logits(rest.size() * vocab);
    ASSERT_TRUE(model->Forward(*ops, ws, {&in, 1}, logits.data()).ok());
    float worst = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      worst = std::max(worst, std::fabs(logits[i] - full_logits[p * vocab + i]));
    }
    EXPECT_LE(worst, 3e-4f);
  }
  // The restored sequence freed only what it owned; the source's pages are intact and live.
  EXPECT_EQ(arena->stats(cache::Pool::kKvPage).used_units, 4u);
  EXPECT_EQ(arena->stats(cache::Pool::kSsmBlock).used_units, 2u);
}

}  // namespace
}  // namespace tandem::engine
