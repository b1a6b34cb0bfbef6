// Shared by the tokenizer tests: the fixture tokenizers of tests/data/tokenizers, their
// Python-recorded encodings, and a scratch directory for variants built on the fly.
#ifndef TANDEM_TESTS_MODELS_TOKENIZER_FIXTURES_H_
#define TANDEM_TESTS_MODELS_TOKENIZER_FIXTURES_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/tokenizer.h"
#include "models/tokenizer_config.h"
#include "models/tokenizer_sentencepiece.h"
#include "nlohmann/json.hpp"

namespace tandem::models::tokenizer_fixtures {

inline const std::string kData = std::string(TANDEM_TEST_DATA) + "/tokenizers";
inline const std::string kSpmDir = kData + "/tiny-spm";
inline const std::string kLegacyDir = kData + "/tiny-spm-legacy";
inline const std::string kVariantsDir = kData + "/tiny-spm-variants";

inline std::vector<nlohmann::json> ReadFixtures() {
  std::vector<nlohmann::json> rows;
  std::ifstream in(kData + "/tiny-spm-fixtures.jsonl");
  std::string line;
  while (std::getline(in, line)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

inline const std::vector<nlohmann::json>& Fixtures() {
  static const std::vector<nlohmann::json>* rows = new std::vector<nlohmann::json>(ReadFixtures());
  return *rows;
}

// "sp": tokenizer.model through libsentencepiece; "hf", "legacy", "var": tokenizer.json files.
inline TokenizerConfig Config(const std::string& dir) {
  auto config = ReadTokenizerConfig(dir + "/tokenizer_config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : TokenizerConfig();
}

inline std::unique_ptr<Tokenizer> Load(const std::string& which) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t;
  if (which == "sp") {
    t = LoadSentencePieceTokenizer(kSpmDir + "/tokenizer.model", Config(kSpmDir));
  } else {
    t = LoadTokenizer(which == "hf" ? kSpmDir : which == "legacy" ? kLegacyDir : kVariantsDir);
  }
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("tok_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }
  std::string Write(const std::string& name, const std::string& bytes) const {
    std::ofstream((path_ / name).string(), std::ios::binary) << bytes;
    return (path_ / name).string();
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace tandem::models::tokenizer_fixtures

#endif  // TANDEM_TESTS_MODELS_TOKENIZER_FIXTURES_H_
