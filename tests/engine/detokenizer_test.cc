// The incremental detokenizer against the tokenizers' own Decode, over the fixture tokenizers
// (tests/data/tokenizers): SentencePiece, three tokenizer.json variants of it, and three
// byte-level BPEs.
#include "engine/detokenizer.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/byte_level.h"
#include "models/tokenizer.h"
#include "models/tokenizer_config.h"
#include "models/tokenizer_sentencepiece.h"
#include "models/unicode_utf8.h"
#include "nlohmann/json.hpp"

namespace tandem::engine {
namespace {

using json = nlohmann::json;
using models::Tokenizer;

const std::string kData = std::string(TANDEM_TEST_DATA) + "/tokenizers";

std::unique_ptr<Tokenizer> Load(const std::string& which) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t;
  if (which == "sp") {
    auto config = models::ReadTokenizerConfig(kData + "/tiny-spm/tokenizer_config.json");
    EXPECT_TRUE(config.ok()) << config.status();
    t = models::LoadSentencePieceTokenizer(kData + "/tiny-spm/tokenizer.model",
                                           config.ok() ? *config : models::TokenizerConfig());
  } else if (which.rfind("bytelevel-", 0) == 0) {
    t = models::LoadTokenizer(kData + "/tiny-" + which);
  } else {
    t = models::LoadTokenizer(kData + (which == "hf"       ? "/tiny-spm"
                                       : which == "legacy" ? "/tiny-spm-legacy"
                                                           : "/tiny-spm-variants"));
  }
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<std::string> FixtureTexts() {
  std::vector<std::string> texts;
  std::ifstream in(kData + "/tiny-spm-fixtures.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const json row = json::parse(line);
    if (row.contains("text")) texts.push_back(row["text"].get<std::string>());
  }
  return texts;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

// Small deterministic generator for the id sequences.
class Lcg {
 public:
  explicit Lcg(uint64_t seed) : s_(seed * 2654435761u + 1) {}
  uint32_t Next() {
    s_ = s_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(s_ >> 33);
  }
  int32_t Below(int32_t n) { return static_cast<int32_t>(Next() % static_cast<uint32_t>(n)); }

 private:
  uint64_t s_;
};

class DetokenizerPropertyTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    tok_ = Load(GetParam());
    ASSERT_NE(tok_, nullptr);
    vocab_ = std::make_shared<DetokenizerVocab>(*tok_);
    for (int b = 0; b < 256; ++b) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      // A byte's token: its byte-fallback piece, or in a byte-level BPE its alphabet character.
      byte_ids_[b] = tok_->decodes_as_byte_stream()
                         ? tok_->PieceToId(models::ByteLevelEncode(std::string(1, char(b))))
                         : tok_->PieceToId(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    }
  }

  // Streams `ids` and compares with Decode; reports at most a few failures per test.
  void Check(const std::vector<int32_t>& ids, bool skip) {
    Detokenizer detok(vocab_, skip);
    std::string text;
    for (int32_t id : ids) {
      const std::string delta = detok.Add(id);
      if (!models::IsValidUtf8(delta)) Fail(ids, skip, "a delta is not valid UTF-8");
      text += delta;
    }
    text += detok.Flush();
    const std::string want = tok_->Decode(ids, skip);
    if (text != want) Fail(ids, skip, json(text).dump() + " != Decode " + json(want).dump());
    ++checked_;
  }

  void Fail(const std::vector<int32_t>& ids, bool skip, const std::string& what) {
    if (++failures_ <= 10) {
      ADD_FAILURE() << GetParam() << (skip ? " skip " : " ") << Show(ids) << ": " << what;
    }
  }

  std::vector<int32_t> Bytes(const std::string& s) {
    std::vector<int32_t> ids;
    for (unsigned char c : s) ids.push_back(byte_ids_[c]);
    return ids;
  }

  std::unique_ptr<Tokenizer> tok_;
  std::shared_ptr<const DetokenizerVocab> vocab_;
  int32_t byte_ids_[256];
  int checked_ = 0;
  int failures_ = 0;
};

TEST_P(DetokenizerPropertyTest, FixtureTextsStreamToTheirDecode) {
  for (const std::string& text : FixtureTexts()) {
    auto ids = tok_->Encode(text, /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok());
    for (bool skip : {false, true}) Check(*ids, skip);
  }
  EXPECT_EQ(failures_, 0);
  EXPECT_GE(checked_, 6000);
}

TEST_P(DetokenizerPropertyTest, RandomIdsStreamToTheirDecode) {
  Lcg rng(17);
  const int32_t vocab = tok_->vocab_size();
  for (int n = 0; n < 4000; ++n) {
    std::vector<int32_t> ids(rng.Below(24));
    for (int32_t& id : ids) {
      switch (rng.Below(8)) {
        case 0:
          id = rng.Below(8);  // specials (and a few ordinary ids)
          break;
        case 1:
          id = rng.Below(vocab + 6) - 3;  // out of range at both ends
          break;
        case 2:
        case 3:
          id = byte_ids_[rng.Below(256)];
          break;
        default:
          id = rng.Below(vocab);
      }
    }
    for (bool skip : {false, true}) Check(ids, skip);
  }
  EXPECT_EQ(failures_, 0);
}

// Byte-fallback runs: valid code points (including U+2581, the metaspace character, and
// characters split across runs), truncated and invalid sequences, next to other tokens.
TEST_P(DetokenizerPropertyTest, ByteFallbackSequencesStreamToTheirDecode) {
  const std::vector<std::string> pieces = {"\xE2\x82\xAC",
                                           "\xC3\xA9",
                                           "\xF0\x9F\x98\x80",
                                           "\xE2\x96\x81",
                                           "A",
                                           " ",
                                           "\xE2\x82",
                                           "\xF0\x9F\x98",
                                           "\xC3",
                                           "\x82",
                                           "\xFF",
                                           "\xED\xA0\x80",
                                           "\xC0\xAF",
                                           "\xF4\x90\x80\x80",
                                           "\xE0\x9F\x80",
                                           "\n"};
  const std::vector<int32_t> others = {
      tok_->PieceToId("\xE2\x96\x81"), tok_->PieceToId("\xE2\x96\x81the"), 1, 2, 4, 300, 500};
  Lcg rng(5);
  for (int n = 0; n < 4000; ++n) {
    std::vector<int32_t> ids;
    const int parts = rng.Below(7);
    for (int p = 0; p < parts; ++p) {
      if (rng.Below(3) == 0) {
        const int32_t id = others[rng.Below(static_cast<int32_t>(others.size()))];
        if (id >= 0) ids.push_back(id);
      } else {
        for (int32_t id : Bytes(pieces[rng.Below(static_cast<int32_t>(pieces.size()))])) {
          ids.push_back(id);
        }
      }
    }
    for (bool skip : {false, true}) Check(ids, skip);
  }
  EXPECT_EQ(failures_, 0);
}

// After a prompt, the deltas are what the output adds to the prompt's text.
TEST_P(DetokenizerPropertyTest, AfterAPromptTheDeltasExtendThePromptText) {
  Lcg rng(9);
  int checked = 0;
  for (const std::string& text : FixtureTexts()) {
    auto ids = tok_->Encode(text, /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok());
    if (ids->size() < 2) continue;
    const size_t split = 1 + rng.Below(static_cast<int32_t>(ids->size() - 1));
    if (vocab_->ByteOf((*ids)[split - 1]) >= 0) continue;  // the documented exception
    const std::vector<int32_t> prompt(ids->begin(), ids->begin() + split);
    std::string prompt_bytes;  // a byte-level prompt may end inside a character: the same
    for (int32_t id : prompt) prompt_bytes += tok_->TokenBytes(id);
    if (tok_->decodes_as_byte_stream() &&
        models::SettledUtf8Prefix(prompt_bytes) != prompt_bytes.size()) {
      continue;
    }
    for (bool skip : {false, true}) {
      const std::string before = tok_->Decode(prompt, skip);
      const std::string all = tok_->Decode(*ids, skip);
      ASSERT_EQ(all.compare(0, before.size(), before), 0) << Show(*ids);
      Detokenizer detok(vocab_, skip);
      detok.StartAfterPrompt(prompt);
      std::string got;
      for (size_t i = split; i < ids->size(); ++i) got += detok.Add((*ids)[i]);
      got += detok.Flush();
      if (got != all.substr(before.size())) {
        Fail(*ids, skip, "after " + std::to_string(split) + ": " + json(got).dump());
      }
      ++checked;
    }
  }
  EXPECT_EQ(failures_, 0);
  EXPECT_GT(checked, 1000);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, DetokenizerPropertyTest,
                         ::testing::Values("sp", "hf", "legacy", "var", "bytelevel-gpt2",
                                           "bytelevel-llama3", "bytelevel-qwen",
                                           "bytelevel-neox"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(DetokenizerTest, LeadingSpaceIsDroppedOnlyAtTheStart) {
  for (const std::string which : {"sp", "hf"}) {
    SCOPED_TRACE(which);
    std::unique_ptr<Tokenizer> tok = Load(which);
    ASSERT_NE(tok, nullptr);
    auto ids = tok->Encode("Hello world", false);
    ASSERT_TRUE(ids.ok());
    Detokenizer detok(*tok, true);
    std::vector<std::string> deltas;
    for (int32_t id : *ids) deltas.push_back(detok.Add(id));
    EXPECT_EQ(deltas.front().front(), 'H');
    std::string all;
    for (const std::string& d : deltas) all += d;
    EXPECT_EQ(all + detok.Flush(), "Hello world");

    // After a prompt, the same first token keeps its space.
    auto prompt = tok->Encode("Say", false);
    auto out = tok->Encode("Say hi", false);
    ASSERT_TRUE(prompt.ok() && out.ok());
    ASSERT_EQ(out->front(), prompt->front());
    Detokenizer cont(*tok, true);
    cont.StartAfterPrompt(*prompt);
    std::string rest;
    for (size_t i = prompt->size(); i < out->size(); ++i) rest += cont.Add((*out)[i]);
    EXPECT_EQ(rest + cont.Flush(), " hi");
  }
}

TEST(DetokenizerTest, NeverEmitsHalfACodePoint) {
  for (const std::string which : {"sp", "hf"}) {
    SCOPED_TRACE(which);
    std::unique_ptr<Tokenizer> tok = Load(which);
    ASSERT_NE(tok, nullptr);
    const int32_t e2 = tok->PieceToId("<0xE2>"), x82 = tok->PieceToId("<0x82>"),
                  xac = tok->PieceToId("<0xAC>"), a = tok->PieceToId("\xE2\x96\x81the");
    ASSERT_TRUE(e2 >= 0 && x82 >= 0 && xac >= 0 && a >= 0);
    Detokenizer detok(*tok, true);
    EXPECT_EQ(detok.Add(a), "the");
    EXPECT_EQ(detok.Add(e2), "");
    EXPECT_EQ(detok.Add(x82), "");
    const std::string euro = detok.Add(xac);
    // sentencepiece renders a finished code point at once; tokenizers' ByteFallback may still
    // turn the whole run into U+FFFDs if a bad byte follows, so it waits for the run to end.
    if (which == "sp") {
      EXPECT_EQ(euro, "\xE2\x82\xAC");
      EXPECT_EQ(detok.Add(a), " the");
    } else {
      EXPECT_EQ(euro, "");
      EXPECT_EQ(detok.Add(a), "\xE2\x82\xAC the");
    }
    // A bad byte at the end: U+FFFD, as Decode renders it.
    EXPECT_EQ(detok.Add(e2), "");
    EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");

    // The same at the start of the output.
    Detokenizer head(*tok, true);
    EXPECT_EQ(head.Add(e2), "");
    EXPECT_EQ(head.Add(x82), "");
    const std::string first = head.Add(xac);
    const std::string next = head.Add(a);
    EXPECT_EQ(first, which == "sp" ? "\xE2\x82\xAC" : "");
    EXPECT_EQ(first + next, tok->Decode({e2, x82, xac, a}, true));
  }
}

TEST(DetokenizerTest, SpecialTokensAreSkippedOrKept) {
  std::unique_ptr<Tokenizer> tok = Load("hf");
  ASSERT_NE(tok, nullptr);
  auto ids = tok->Encode("<|im_start|>user\nhi<|im_end|>", false);
  ASSERT_TRUE(ids.ok());
  for (bool skip : {true, false}) {
    Detokenizer detok(*tok, skip);
    std::string text;
    for (int32_t id : *ids) text += detok.Add(id);
    text += detok.Flush();
    EXPECT_EQ(text, skip ? "user\nhi" : tok->Decode(*ids, false));
    EXPECT_EQ(text.find("<|im_start|>") != std::string::npos, !skip);
  }
  // Shown special tokens (a tool-call format's markers) stay when the others are skipped.
  Detokenizer detok(*tok, /*skip_special_tokens=*/true);
  detok.ShowSpecial({tok->PieceToId("<|im_end|>")});
  std::string text;
  for (int32_t id : *ids) text += detok.Add(id);
  text += detok.Flush();
  EXPECT_EQ(text, "user\nhi<|im_end|>");
}

// Forwards to a real tokenizer and counts the ids Decode is given.
class CountingTokenizer : public Tokenizer {
 public:
  explicit CountingTokenizer(const Tokenizer& t) : t_(t) {}
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool special) const override {
    return t_.Encode(text, special);
  }
  std::string Decode(absl::Span<const int32_t> ids, bool skip) const override {
    decoded_ids += ids.size();
    return t_.Decode(ids, skip);
  }
  std::string TokenToPiece(int32_t id) const override { return t_.TokenToPiece(id); }
  std::string TokenBytes(int32_t id) const override { return t_.TokenBytes(id); }
  bool strips_leading_space() const override { return t_.strips_leading_space(); }
  int32_t PieceToId(std::string_view piece) const override { return t_.PieceToId(piece); }
  int32_t vocab_size() const override { return t_.vocab_size(); }
  bool IsSpecial(int32_t id) const override { return t_.IsSpecial(id); }
  mutable size_t decoded_ids = 0;

 private:
  const Tokenizer& t_;
};

// O(1) work per token: Decode sees a bounded number of ids per token, however long the output.
TEST(DetokenizerTest, DecodeWorkIsLinearInTheOutput) {
  for (const std::string which : {"sp", "hf"}) {
    std::unique_ptr<Tokenizer> real = Load(which);
    ASSERT_NE(real, nullptr);
    CountingTokenizer tok(*real);
    std::string text;
    for (const std::string& t : FixtureTexts()) text += t + "\n";
    auto ids = tok.Encode(text, false);
    ASSERT_TRUE(ids.ok());
    ASSERT_GT(ids->size(), 20000u);
    Detokenizer detok(tok, true);
    tok.decoded_ids = 0;
    std::string out;
    for (int32_t id : *ids) detok.Add(id, &out);
    detok.Flush(&out);
    EXPECT_EQ(out, real->Decode(*ids, true)) << which;
    EXPECT_LE(tok.decoded_ids, 3 * ids->size()) << which;
  }
}

TEST(DetokenizerTest, ProbesTheFixtureTokenizers) {
  for (const std::string which : {"sp", "hf", "legacy", "var"}) {
    std::unique_ptr<Tokenizer> tok = Load(which);
    ASSERT_NE(tok, nullptr);
    DetokenizerVocab vocab(*tok);
    EXPECT_TRUE(vocab.has_anchor()) << which;
    EXPECT_EQ(vocab.streams_byte_runs(), which == "sp") << which;
    EXPECT_EQ(vocab.ByteOf(tok->PieceToId("<0x41>")), 0x41) << which;
    EXPECT_EQ(vocab.ByteOf(1), -1) << which;
  }
}

}  // namespace
}  // namespace tandem::engine
