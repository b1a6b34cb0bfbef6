// Tokenizers against the fixtures tools/tokenizer_fixtures/make_tokenizer_fixtures.py recorded
// from Python's `sentencepiece` and `tokenizers` (tests/data/tokenizers/tiny-spm-fixtures.jsonl).
#include "models/tokenizer.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/hf_bpe_tokenizer.h"
#include "models/tokenizer_config.h"
#include "models/tokenizer_sentencepiece.h"
#include "models/unicode_utf8.h"
#include "nlohmann/json.hpp"
#include "tests/models/tokenizer_fixtures.h"

namespace tandem::models {
namespace {

using namespace ::tandem::models::tokenizer_fixtures;  // NOLINT: the fixture helpers

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kBos = 1;

std::vector<int32_t> Ids(const json& j) { return j.get<std::vector<int32_t>>(); }

std::string Show(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  out << "]";
  return out.str();
}

// What one tokenizer should produce for one fixture row, with the row's defaults resolved.
struct Expected {
  std::vector<int32_t> ids, ids_special;
  std::string decoded, decoded_skip;
};

// Encode rows. `which` is "sp", "hf", "legacy" or "var". hf ids are present only where they
// differ from sp's; legacy and var fields only where they differ from hf's (null meaning "the
// default" where hf's is not).
Expected ExpectedFor(const json& row, const std::string& which) {
  const std::string text = row["text"].get<std::string>();
  Expected e;
  if (which == "sp") {
    e.ids = Ids(row["sp"]);
    e.ids_special = e.ids;
    e.ids_special.insert(e.ids_special.begin(), kBos);
    e.decoded = row.contains("sp_dec") ? row["sp_dec"].get<std::string>() : text;
    e.decoded_skip = e.decoded;  // not recorded for encode rows
    return e;
  }
  const auto field = [&](const std::string& name) -> const json* {
    if (which != "hf" && row.contains(which + "_" + name)) return &row[which + "_" + name];
    if (row.contains("hf_" + name)) return &row["hf_" + name];
    return nullptr;
  };
  if (which != "hf" && row.contains(which)) {
    e.ids = Ids(row[which]);
  } else {
    e.ids = Ids(row.contains("hf") ? row["hf"] : row["sp"]);
  }
  const json* sp = field("sp");
  if (sp != nullptr && !sp->is_null()) {
    e.ids_special = Ids(*sp);
  } else {
    e.ids_special = e.ids;
    e.ids_special.insert(e.ids_special.begin(), kBos);
  }
  const json* dec = field("dec");
  e.decoded = dec != nullptr ? dec->get<std::string>() : text;
  const json* skip = field("skip");
  e.decoded_skip = (skip != nullptr && !skip->is_null()) ? skip->get<std::string>() : e.decoded;
  return e;
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, EncodeAndDecodeMatchPython) {
  const std::string which = GetParam();
  std::unique_ptr<Tokenizer> tok = Load(which);
  ASSERT_NE(tok, nullptr);
  ASSERT_GE(Fixtures().size(), 3000u);
  int encode_rows = 0, decode_rows = 0, failures = 0;
  const auto fail = [&](const std::string& what) {
    if (++failures <= 15) ADD_FAILURE() << which << ": " << what;
  };
  for (const json& row : Fixtures()) {
    if (row.contains("text")) {
      ++encode_rows;
      const std::string text = row["text"].get<std::string>();
      const Expected e = ExpectedFor(row, which);
      auto ids = tok->Encode(text, /*add_special_tokens=*/false);
      if (!ids.ok() || *ids != e.ids) {
        fail("Encode(" + json(text).dump() +
             ") = " + (ids.ok() ? Show(*ids) : ids.status().ToString()) + ", want " + Show(e.ids));
      }
      auto with_special = tok->Encode(text, /*add_special_tokens=*/true);
      if (!with_special.ok() || *with_special != e.ids_special) {
        fail("Encode(" + json(text).dump() + ", special) = " +
             (with_special.ok() ? Show(*with_special) : with_special.status().ToString()) +
             ", want " + Show(e.ids_special));
      }
      const std::string decoded = tok->Decode(e.ids, /*skip_special_tokens=*/false);
      if (decoded != e.decoded) {
        fail("Decode(" + Show(e.ids) + ") = " + json(decoded).dump() + ", want " +
             json(e.decoded).dump());
      }
      if (which != "sp") {
        const std::string skipped = tok->Decode(e.ids, /*skip_special_tokens=*/true);
        if (skipped != e.decoded_skip) {
          fail("Decode(" + Show(e.ids) + ", skip) = " + json(skipped).dump() + ", want " +
               json(e.decoded_skip).dump());
        }
      }
    } else {
      ++decode_rows;
      const std::vector<int32_t> ids = Ids(row["ids"]);
      for (bool skip : {false, true}) {
        const std::string want = row[which + (skip ? "_skip" : "_dec")].get<std::string>();
        const std::string got = tok->Decode(ids, skip);
        if (got != want) {
          fail("Decode(" + Show(ids) + (skip ? ", skip" : "") + ") = " + json(got).dump() +
               ", want " + json(want).dump());
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GE(encode_rows, 3000);
  EXPECT_GE(decode_rows, 400);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, FixtureTest, ::testing::Values("sp", "hf", "legacy", "var"));

// The incremental-detokenizer contract: TokenBytes of the ids, concatenated, minus one leading
// space when strips_leading_space(), equals Decode for text without special tokens.
TEST_P(FixtureTest, TokenBytesReassembleDecode) {
  const std::string which = GetParam();
  std::unique_ptr<Tokenizer> tok = Load(which);
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->strips_leading_space());
  int checked = 0, failures = 0;
  for (const json& row : Fixtures()) {
    if (!row.contains("text")) continue;
    const Expected e = ExpectedFor(row, which);
    bool has_special = false;
    for (int32_t id : e.ids) has_special = has_special || tok->IsSpecial(id);
    if (has_special) continue;
    std::string bytes;
    for (int32_t id : e.ids) bytes += tok->TokenBytes(id);
    if (!bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    if (!IsValidUtf8(bytes)) continue;  // Decode would substitute U+FFFD
    ++checked;
    if (bytes != e.decoded && ++failures <= 10) {
      ADD_FAILURE() << which << ": " << json(bytes).dump() << " vs " << json(e.decoded).dump();
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 2000);
}

TEST(TokenizerTest, SpecialTokens) {
  for (const std::string which : {"sp", "hf", "legacy"}) {
    SCOPED_TRACE(which);
    std::unique_ptr<Tokenizer> tok = Load(which);
    ASSERT_NE(tok, nullptr);
    EXPECT_EQ(tok->vocab_size(), 1024);
    EXPECT_EQ(tok->pad_id(), 0);
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    EXPECT_EQ(tok->unk_id(), 3);
    for (int32_t id = 0; id < 6; ++id) EXPECT_TRUE(tok->IsSpecial(id)) << id;
    EXPECT_FALSE(tok->IsSpecial(6));
    EXPECT_FALSE(tok->IsSpecial(-1));
    EXPECT_FALSE(tok->IsSpecial(5000));
    EXPECT_EQ(tok->TokenToPiece(4), "<|im_start|>");
    EXPECT_EQ(tok->PieceToId("<|im_end|>"), 5);
    EXPECT_EQ(tok->PieceToId("no such piece"), -1);
    EXPECT_EQ(tok->TokenToPiece(-3), "");
    EXPECT_EQ(tok->TokenToPiece(1024), "");
    const int32_t byte_e4 = tok->PieceToId("<0xE4>");
    ASSERT_GE(byte_e4, 0);
    EXPECT_EQ(tok->TokenBytes(byte_e4), "\xE4");
    EXPECT_EQ(tok->TokenBytes(tok->PieceToId("\xE2\x96\x81"
                                             "the")),
              " the");
    // Chat markers inside text become their ids in every tokenizer.
    auto ids = tok->Encode("<|im_start|>user\nhi<|im_end|>", false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_THAT(*ids, ::testing::Contains(4));
    EXPECT_THAT(*ids, ::testing::Contains(5));
    EXPECT_EQ(tok->Decode(*ids, /*skip_special_tokens=*/true), "user\nhi");
    // Out-of-range ids are ignored.
    EXPECT_EQ(tok->Decode({-1, 99999}, false), "");
    auto empty = tok->Encode("", true);
    ASSERT_TRUE(empty.ok());
    EXPECT_THAT(*empty, ElementsAre(1));
  }
}

TEST(TokenizerTest, ControlTokensInTextDifferByBackend) {
  // tokenizer.json splits every added token out of the text; SentencePiece matches only
  // user-defined pieces and spells control pieces out.
  std::unique_ptr<Tokenizer> hf = Load("hf");
  std::unique_ptr<Tokenizer> sp = Load("sp");
  ASSERT_NE(hf, nullptr);
  ASSERT_NE(sp, nullptr);
  EXPECT_THAT(*hf->Encode("<|endoftext|>", false), ElementsAre(2));
  EXPECT_GT(sp->Encode("<|endoftext|>", false)->size(), 1u);
}

TEST(TokenizerTest, InvalidUtf8IsAnError) {
  for (const std::string which : {"sp", "hf"}) {
    std::unique_ptr<Tokenizer> tok = Load(which);
    ASSERT_NE(tok, nullptr);
    auto ids = tok->Encode("ok \xC3 then \xFF", false);
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument) << which;
  }
}

// Tokenizers are immutable after loading: concurrent use gives the single-threaded results.
TEST(TokenizerTest, ConcurrentEncodeDecode) {
  for (const std::string which : {"sp", "hf"}) {
    std::unique_ptr<Tokenizer> tok = Load(which);
    ASSERT_NE(tok, nullptr);
    std::vector<std::string> texts;
    std::vector<std::vector<int32_t>> want;
    for (const json& row : Fixtures()) {
      if (!row.contains("text")) continue;
      texts.push_back(row["text"].get<std::string>());
      want.push_back(*tok->Encode(texts.back(), true));
      if (texts.size() == 600) break;
    }
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (size_t i = t; i < texts.size() * 2; i += 3) {
          const size_t k = i % texts.size();
          auto ids = tok->Encode(texts[k], true);
          if (!ids.ok() || *ids != want[k]) ++mismatches;
          tok->Decode(want[k], t % 2 == 0);
        }
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0) << which;
  }
}

TEST(TokenizerTest, LongInput) {
  std::unique_ptr<Tokenizer> tok = Load("hf");
  ASSERT_NE(tok, nullptr);
  std::string text;
  for (const json& row : Fixtures()) {
    if (row.contains("text")) text += row["text"].get<std::string>();
    if (text.size() > 200000) break;
  }
  auto ids = tok->Encode(text, false);
  ASSERT_TRUE(ids.ok());
  EXPECT_GT(ids->size(), text.size() / 8);
}

// ---- Loading and errors ---------------------------------------------------------------------

TEST(TokenizerLoadTest, PicksSentencePieceWhenNoJson) {
  TempDir dir;
  dir.Write("tokenizer.model", ReadAll(kSpmDir + "/tokenizer.model"));
  auto tok = LoadTokenizer(dir.path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  // SentencePiece puts its dummy-prefix piece before a leading user-defined piece; the
  // tokenizer.json (prepend_scheme "first") does not.
  auto ids = (*tok)->Encode("<|im_start|>hi", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_NE(ids->front(), 4);
  // Without tokenizer_config.json, BOS still comes from the model.
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*(*tok)->Encode("hi", true))[0], 1);
}

TEST(TokenizerLoadTest, ConfigDecidesBosAndEos) {
  TempDir dir;
  dir.Write("tokenizer.json", ReadAll(kSpmDir + "/tokenizer.json"));
  dir.Write(
      "tokenizer_config.json",
      R"({"add_bos_token": false, "add_eos_token": true, "eos_token": {"content": "<|im_end|>"}})");
  auto tok = LoadTokenizer(dir.path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_id(), 5);
  auto ids = (*tok)->Encode("hi", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_NE(ids->front(), 1);
  EXPECT_EQ(ids->back(), 5);
  EXPECT_EQ((*tok)->config().add_eos_token, true);
}

TEST(TokenizerLoadTest, MissingFilesNameThePath) {
  TempDir dir;
  auto tok = LoadTokenizer(dir.path());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tok.status().message(), HasSubstr(dir.path()));
  auto hf = LoadHfBpeTokenizer(dir.path() + "/tokenizer.json", {});
  EXPECT_FALSE(hf.ok());
  EXPECT_THAT(hf.status().message(), HasSubstr(dir.path() + "/tokenizer.json"));
  auto sp = LoadSentencePieceTokenizer(dir.path() + "/tokenizer.model", {});
  EXPECT_FALSE(sp.ok());
  EXPECT_THAT(sp.status().message(), HasSubstr(dir.path() + "/tokenizer.model"));
}

void ExpectErrorNaming(const absl::StatusOr<std::unique_ptr<Tokenizer>>& t,
                       const std::string& file) {
  ASSERT_FALSE(t.ok()) << file << " loaded";
  EXPECT_THAT(t.status().message(), HasSubstr(file));
}

TEST(TokenizerLoadTest, TruncatedOrCorruptSentencePieceModel) {
  const std::string model = ReadAll(kSpmDir + "/tokenizer.model");
  ASSERT_GT(model.size(), 1000u);
  TempDir dir;
  for (const std::string& bytes :
       {std::string(), model.substr(0, model.size() / 2), model.substr(0, 7),
        std::string("this is not a protobuf \xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF"),
        std::string(4096, '\xFF')}) {
    const std::string path = dir.Write("tokenizer.model", bytes);
    ExpectErrorNaming(LoadSentencePieceTokenizer(path, {}), path);
    ExpectErrorNaming(LoadTokenizer(dir.path()), path);
  }
}

TEST(TokenizerLoadTest, TruncatedOrCorruptTokenizerJson) {
  const std::string good = ReadAll(kSpmDir + "/tokenizer.json");
  json parsed = json::parse(good);
  std::vector<std::string> bad = {std::string(), good.substr(0, good.size() / 2), "[1, 2, 3]",
                                  "{\"model\": 7}"};
  json j = parsed;
  j["model"]["merges"][0] = json::array({"no-such-token", "x"});
  bad.push_back(j.dump());
  j = parsed;
  j["model"]["merges"][0] = "a b c";
  bad.push_back(j.dump());
  j = parsed;
  j["model"]["vocab"]
   ["\xE2\x96\x81"
    "the"] = "seven";
  bad.push_back(j.dump());
  j = parsed;
  j["added_tokens"][0]["id"] = "zero";
  bad.push_back(j.dump());
  j = parsed;
  j["model"]["byte_fallback"] = "yes";
  bad.push_back(j.dump());
  j = parsed;
  j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}};
  bad.push_back(j.dump());
  j = parsed;
  j["decoder"]["decoders"][3]["start"] = -1;
  bad.push_back(j.dump());
  TempDir dir;
  for (const std::string& bytes : bad) {
    SCOPED_TRACE(bytes.substr(0, 80));
    const std::string path = dir.Write("tokenizer.json", bytes);
    ExpectErrorNaming(LoadHfBpeTokenizer(path, {}), path);
  }
}

TEST(TokenizerLoadTest, CorruptConfigNamesTheFile) {
  TempDir dir;
  dir.Write("tokenizer.json", ReadAll(kSpmDir + "/tokenizer.json"));
  for (const std::string& bytes :
       {std::string("{\"add_bos_token\": "), std::string("{\"add_bos_token\": 1}"),
        std::string("{\"bos_token\": [1]}"),
        std::string("{\"added_tokens_decoder\": {\"x\": {}}}")}) {
    const std::string path = dir.Write("tokenizer_config.json", bytes);
    auto tok = LoadTokenizer(dir.path());
    ASSERT_FALSE(tok.ok()) << bytes;
    EXPECT_THAT(tok.status().message(), HasSubstr(path));
  }
}

// Flipped bytes anywhere in either file: loading either fails with a status or gives a
// tokenizer that encodes and decodes without crashing.
TEST(TokenizerLoadTest, RandomCorruptionNeverCrashes) {
  std::mt19937 rng(1234);
  TempDir dir;
  for (const std::string name : {"tokenizer.model", "tokenizer.json"}) {
    const std::string good = ReadAll(kSpmDir + "/" + name);
    ASSERT_FALSE(good.empty());
    int loaded = 0;
    for (int trial = 0; trial < 150; ++trial) {
      std::string bytes = good;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
      if (trial % 10 == 0) bytes.resize(rng() % bytes.size());
      const std::string path = dir.Write(name, bytes);
      auto tok = name == "tokenizer.model" ? LoadSentencePieceTokenizer(path, {})
                                           : LoadHfBpeTokenizer(path, {});
      if (!tok.ok()) {
        EXPECT_THAT(tok.status().message(), HasSubstr(path));
        continue;
      }
      ++loaded;
      auto ids = (*tok)->Encode("Hello, world! \xE4\xB8\xAD <|im_start|> 123", true);
      if (ids.ok()) (*tok)->Decode(*ids, false);
      (*tok)->Decode({0, 1, 5, 100, 500, 1023, 7, 200}, true);
    }
    RecordProperty(name + "_loaded", loaded);
  }
}

TEST(TokenizerTest, RandomInputNeverCrashes) {
  std::mt19937 rng(99);
  for (const std::string which : {"sp", "hf", "var"}) {
    std::unique_ptr<Tokenizer> tok = Load(which);
    ASSERT_NE(tok, nullptr);
    for (int trial = 0; trial < 300; ++trial) {
      std::string text(rng() % 64, '\0');
      for (char& c : text) c = static_cast<char>(rng());
      auto ids = tok->Encode(text, true);
      if (IsValidUtf8(text)) {
        EXPECT_TRUE(ids.ok()) << ids.status();
      } else {
        EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
      }
      std::vector<int32_t> random_ids(rng() % 32);
      for (int32_t& id : random_ids) id = static_cast<int32_t>(rng() % 1100) - 20;
      const std::string decoded = tok->Decode(random_ids, trial % 2 == 0);
      if (which != "sp") {
        EXPECT_TRUE(IsValidUtf8(decoded));
      }
      for (int32_t id : random_ids) tok->TokenBytes(id);
    }
  }
}

TEST(TokenizerTest, CleanUpTokenizationSpacesMatchesTransformers) {
  // Expected values from transformers' clean_up_tokenization.
  EXPECT_EQ(CleanUpTokenizationSpaces(" . ? ! , x . y"), ".?!, x. y");
  EXPECT_EQ(CleanUpTokenizationSpaces("don n't"), "donn't");
  EXPECT_EQ(CleanUpTokenizationSpaces("I 'm here ' ok ' s 's 've 're"), "I'm here'ok's's've're");
  EXPECT_EQ(CleanUpTokenizationSpaces("  .. "), " .. ");
  EXPECT_EQ(CleanUpTokenizationSpaces("a ,b ,, c"), "a,b,, c");
  EXPECT_EQ(CleanUpTokenizationSpaces(" ' ' "), "'' ");
  auto config = ReadTokenizerConfig(kSpmDir + "/tokenizer_config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->clean_up_tokenization_spaces, false);
  EXPECT_THAT(config->chat_template, HasSubstr("<|im_start|>"));
  EXPECT_EQ(config->add_bos_token, true);
}

TEST(Utf8Test, CompletePrefix) {
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xE4\xB8"), 2u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xE4\xB8\xAD"), 5u);
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));      // overlong
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));
  unsigned char b;
  EXPECT_TRUE(ParseByteFallbackPiece("<0x0A>", &b));
  EXPECT_EQ(b, 0x0A);
  EXPECT_FALSE(ParseByteFallbackPiece("<0xZZ>", &b));
}

}  // namespace
}  // namespace tandem::models
