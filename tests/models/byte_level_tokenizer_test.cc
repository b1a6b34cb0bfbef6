// Byte-level BPE tokenizers (GPT-2, GPT-NeoX, Llama 3, Granite 4, Qwen2 pipelines) against the
// ids and decodes `tokenizers` recorded for them
// (tools/tokenizer_fixtures/make_byte_level_fixtures.py), and the pieces underneath: the regex
// split patterns, GPT-2's byte alphabet, the Unicode classes and lossy UTF-8.
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/byte_level.h"
#include "models/split_patterns.h"
#include "models/tokenizer.h"
#include "models/unicode_classes.h"
#include "models/unicode_nfc.h"
#include "models/unicode_utf8.h"
#include "nlohmann/json.hpp"
#include "tests/models/tokenizer_fixtures.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tokenizer_fixtures::kData;
using tokenizer_fixtures::TempDir;

const std::vector<json>& Rows() {
  static const std::vector<json>* rows = [] {
    auto* out = new std::vector<json>;
    std::ifstream in(kData + "/bytelevel-fixtures.jsonl");
    std::string line;
    while (std::getline(in, line)) out->push_back(json::parse(line));
    return out;
  }();
  return *rows;
}

std::unique_ptr<Tokenizer> LoadByteLevel(const std::string& which) {
  auto t = LoadTokenizer(kData + "/tiny-bytelevel-" + which);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "[") << ids[i];
  out << "]";
  return out.str();
}

class ByteLevelFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ByteLevelFixtureTest, EncodeAndDecodeMatchPython) {
  const std::string which = GetParam();
  std::unique_ptr<Tokenizer> tok = LoadByteLevel(which);
  ASSERT_NE(tok, nullptr);
  int encode_rows = 0, decode_rows = 0, failures = 0;
  const auto fail = [&](const std::string& what) {
    if (++failures <= 15) ADD_FAILURE() << which << ": " << what;
  };
  for (const json& row : Rows()) {
    if (row.contains("text")) {
      ++encode_rows;
      const std::string text = row["text"].get<std::string>();
      const std::vector<int32_t> want = row[which].get<std::vector<int32_t>>();
      const std::vector<int32_t> want_special =
          row.contains(which + "_sp") ? row[which + "_sp"].get<std::vector<int32_t>>() : want;
      const std::string want_dec =
          row.contains(which + "_dec") ? row[which + "_dec"].get<std::string>() : text;
      const std::string want_skip =
          row.contains(which + "_skip") ? row[which + "_skip"].get<std::string>() : want_dec;
      auto ids = tok->Encode(text, /*add_special_tokens=*/false);
      if (!ids.ok() || *ids != want) {
        fail("Encode(" + json(text).dump() +
             ") = " + (ids.ok() ? Show(*ids) : ids.status().ToString()) + ", want " + Show(want));
      }
      auto special = tok->Encode(text, /*add_special_tokens=*/true);
      if (!special.ok() || *special != want_special) {
        fail("Encode(" + json(text).dump() +
             ", special) = " + (special.ok() ? Show(*special) : special.status().ToString()) +
             ", want " + Show(want_special));
      }
      if (const std::string got = tok->Decode(want, false); got != want_dec) {
        fail("Decode(" + Show(want) + ") = " + json(got).dump() + ", want " +
             json(want_dec).dump());
      }
      if (const std::string got = tok->Decode(want, true); got != want_skip) {
        fail("Decode(" + Show(want) + ", skip) = " + json(got).dump() + ", want " +
             json(want_skip).dump());
      }
    } else if (row["tokenizer"] == which) {
      ++decode_rows;
      const std::vector<int32_t> ids = row["ids"].get<std::vector<int32_t>>();
      for (bool skip : {false, true}) {
        const std::string want = row[skip ? "skip" : "dec"].get<std::string>();
        if (const std::string got = tok->Decode(ids, skip); got != want) {
          fail("Decode(" + Show(ids) + (skip ? ", skip" : "") + ") = " + json(got).dump() +
               ", want " + json(want).dump());
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GE(encode_rows, 3000);
  EXPECT_GE(decode_rows, 150);
}

// The streaming detokenizer's contract: a token's bytes, concatenated (a character may span
// tokens), are the decode of the whole.
TEST_P(ByteLevelFixtureTest, TokenBytesReassembleDecode) {
  const std::string which = GetParam();
  std::unique_ptr<Tokenizer> tok = LoadByteLevel(which);
  ASSERT_NE(tok, nullptr);
  EXPECT_FALSE(tok->strips_leading_space());
  int checked = 0, failures = 0;
  for (const json& row : Rows()) {
    if (!row.contains("text")) continue;
    const std::vector<int32_t> ids = row[which].get<std::vector<int32_t>>();
    std::string bytes;
    for (int32_t id : ids) bytes += tok->TokenBytes(id);
    ++checked;
    const std::string want = tok->Decode(ids, false);
    if (bytes != want && ++failures <= 10) {
      ADD_FAILURE() << which << ": " << json(bytes).dump() << " vs " << json(want).dump();
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 3000);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ByteLevelFixtureTest,
                         ::testing::Values("gpt2", "llama3", "qwen", "neox"));

// NFC against the `tokenizers` library's NFC of every fixture text: hundreds of them with
// marks to reorder, compose, or leave blocked.
TEST(UnicodeNfcTest, MatchesTheTokenizersLibrary) {
  int changed = 0, failures = 0;
  for (const json& row : Rows()) {
    if (!row.contains("text")) continue;
    const std::string text = row["text"].get<std::string>();
    const std::string want = row.contains("nfc") ? row["nfc"].get<std::string>() : text;
    changed += want != text;
    const std::string got = NfcNormalize(text);
    if (got != want && ++failures <= 10) {
      ADD_FAILURE() << json(text).dump() << " -> " << json(got).dump() << ", want "
                    << json(want).dump();
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(changed, 250);
}

TEST(UnicodeNfcTest, AlignmentTracesComposedCharactersToAllTheirBytes) {
  const std::string text = "xe\u0301y";  // e + combining acute: 1 + 2 bytes -> é (2 bytes)
  std::vector<TextRange> align;
  for (size_t i = 0; i < text.size(); ++i) align.push_back({i, i + 1});
  const std::string nfc = NfcNormalize(text, &align);
  EXPECT_EQ(nfc, "x\u00E9y");
  ASSERT_EQ(align.size(), nfc.size());
  EXPECT_EQ(align[1].begin, 1u);
  EXPECT_EQ(align[2].end, 4u);  // é stands for bytes [1, 4)
  EXPECT_EQ(align[3].begin, 4u);
}

std::vector<std::string> Split(SplitPattern pattern, std::string_view text) {
  std::vector<std::string_view> pieces;
  SplitWithPattern(pattern, text, &pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(SplitPatternTest, Gpt2KeepsOneSpaceForTheNextWord) {
  EXPECT_THAT(Split(SplitPattern::kGpt2, "Hello  world's 123x!!\n\n"),
              ElementsAre("Hello", " ", " world", "'s", " 123", "x", "!!", "\n\n"));
  EXPECT_THAT(Split(SplitPattern::kGpt2, "it'S \tgo"),
              ElementsAre("it", "'", "S", " ", "\t", "go"));
}

TEST(SplitPatternTest, Llama3GroupsDigitsInThreesAndNewlinesWithSpaces) {
  EXPECT_THAT(Split(SplitPattern::kLlama3, "I'M 1234567 ok.\n\n  x"),
              ElementsAre("I", "'M", " ", "123", "456", "7", " ok", ".\n\n", " ", " x"));
  EXPECT_THAT(Split(SplitPattern::kLlama3SingleDigits, "v12"), ElementsAre("v", "1", "2"));
  // \s*[\r\n]+ ends at the run's last newline; a tab may prefix a word, a newline may not.
  EXPECT_THAT(Split(SplitPattern::kLlama3, "a \n \tb\nc"),
              ElementsAre("a", " \n", " ", "\tb", "\n", "c"));
  // (?i:'s) also takes U+017F LONG S, which case-folds to s.
  EXPECT_THAT(Split(SplitPattern::kLlama3, "it'\u017F"), ElementsAre("it", "'\u017F"));
}

TEST(SplitPatternTest, OnlyTheKnownPatternsAreRecognised) {
  EXPECT_EQ(RecognizeSplitPattern(R"( ?[^\s\p{L}\p{N}]+\r*)"), std::nullopt);
  EXPECT_EQ(RecognizeSplitPattern(
                R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"),
            SplitPattern::kGpt2);
}

TEST(UnicodeClassesTest, LettersAndNumbersAsTheRegexEngineSeesThem) {
  EXPECT_TRUE(IsUnicodeLetter(U'é'));
  EXPECT_TRUE(IsUnicodeLetter(U'中'));
  EXPECT_TRUE(IsUnicodeLetter(0x11F04));  // Kawi, new in Unicode 15
  EXPECT_FALSE(IsUnicodeLetter(0x0301));  // a combining mark is neither
  EXPECT_FALSE(IsUnicodeNumber(0x0301));
  EXPECT_TRUE(IsUnicodeNumber(U'½'));
  EXPECT_TRUE(IsUnicodeNumber(0x2167));  // Roman numeral eight (Nl)
  EXPECT_TRUE(IsUnicodeNumber(0x0663));  // Arabic-Indic three
  EXPECT_FALSE(IsUnicodeLetter(U'_'));
  EXPECT_FALSE(IsUnicodeNumber(0x10FFFF));
}

TEST(ByteLevelTest, EveryByteRoundTripsThroughItsCharacter) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string mapped = ByteLevelEncode(all);
  std::string back;
  ASSERT_TRUE(ByteLevelDecode(mapped, &back));
  EXPECT_EQ(back, all);
  EXPECT_EQ(ByteLevelEncode(" "), "\u0120");   // GPT-2's Ġ
  EXPECT_EQ(ByteLevelEncode("\n"), "\u010A");  // Ċ
  EXPECT_EQ(ByteLevelEncode("a"), "a");
  std::string untouched = "x";
  EXPECT_FALSE(ByteLevelDecode("\u4E2D", &untouched));  // outside the alphabet
  EXPECT_EQ(untouched, "x");
}

TEST(ByteLevelTest, LossyUtf8ReplacesMaximalSubparts) {
  // The expectations are Python's bytes.decode("utf-8", "replace"), which follows the same
  // practice as Rust's from_utf8_lossy.
  EXPECT_EQ(Utf8Lossy("\xE2\x82"), "\uFFFD");
  EXPECT_EQ(Utf8Lossy("\xF0\x80"
                      "abc"),
            "\uFFFD\uFFFD"
            "abc");
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(Utf8Lossy("a\xFF\xFE"
                      "b"),
            "a\uFFFD\uFFFD"
            "b");
  EXPECT_EQ(Utf8Lossy("\xF4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(Utf8Lossy("\xE2\x82\xE2\x82\xAC"), "\uFFFD\u20AC");
}

TEST(ByteLevelLoadTest, AnUnknownSplitPatternOrBehaviourIsRefusedByName) {
  std::ifstream in(kData + "/tiny-bytelevel-llama3/tokenizer.json");
  json j = json::parse(in);
  TempDir dir;
  json pattern = j;
  pattern["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+";
  dir.Write("tokenizer.json", pattern.dump());
  auto refused = LoadTokenizer(dir.path());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("\\p{L}+|\\s+"));
  json behavior = j;
  behavior["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious";
  dir.Write("tokenizer.json", behavior.dump());
  refused = LoadTokenizer(dir.path());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("MergedWithPrevious"));
}

}  // namespace
}  // namespace tandem::models
