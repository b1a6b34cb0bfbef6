// The BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE", ...}): vocabulary,
// ranked merges, byte fallback and unknown-token handling, and the merge loop of `tokenizers`
// (lowest rank first, leftmost first among equal ranks) over one pre-tokenized word.
#ifndef TANDEM_MODELS_TOKENIZER_BPE_MODEL_H_
#define TANDEM_MODELS_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tandem::models {

class BpeModel {
 public:
  // Parses the "model" object; errors are INVALID_ARGUMENT prefixed with `source` (the file).
  // Supports vocab, merges as "a b" strings or [a, b] lists, byte_fallback, unk_token,
  // fuse_unk, ignore_merges; dropout, continuing_subword_prefix and end_of_word_suffix are
  // rejected.
  static absl::StatusOr<BpeModel> FromJson(const nlohmann::json& model, const std::string& source);

  // Appends the ids of one word (valid UTF-8). A character outside the vocabulary becomes its
  // byte pieces with byte_fallback, else the unk id (consecutive ones fused with fuse_unk), else
  // nothing.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  // -1 when absent.
  int32_t TokenToId(std::string_view token) const;
  // id -> token; ids the vocabulary skips are "".
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }
  int32_t unk_id() const { return unk_id_; }

 private:
  static absl::Status ParseInto(const nlohmann::json& m, const std::string& source,
                                BpeModel* model);

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (a,b) -> (rank, new)
  std::array<int32_t, 256> byte_ids_{};  // id of "<0xNN>", -1 when absent
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_TOKENIZER_BPE_MODEL_H_
