// The prompt of the end-to-end benches that run a checkpoint or a random preset: with a
// checkpoint, its tokenizer's ids for the start of a novel, repeated up to about
// `prompt_tokens` ids; with a random model (`model_dir` empty), arbitrary ids below 1004.
#ifndef TANDEM_BENCH_E2E_BENCH_PROMPT_H_
#define TANDEM_BENCH_E2E_BENCH_PROMPT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/status_macros.h"
#include "models/tokenizer.h"

namespace tandem::bench {

inline absl::StatusOr<std::vector<int32_t>> NovelPrompt(const std::string& model_dir,
                                                        int prompt_tokens) {
  std::vector<int32_t> prompt;
  if (model_dir.empty()) {
    for (int i = 0; i < prompt_tokens; ++i) prompt.push_back(4 + (i * 7919) % 1000);
    return prompt;
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tokenizer,
                          models::LoadTokenizer(model_dir));
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<int32_t> sentence,
      tokenizer->Encode("It is a truth universally acknowledged, that a single man in "
                        "possession of a good fortune, must be in want of a wife. ",
                        /*add_special_tokens=*/false));
  while (static_cast<int>(prompt.size()) < prompt_tokens) {
    prompt.insert(prompt.end(), sentence.begin(), sentence.end());
  }
  return prompt;
}

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_E2E_BENCH_PROMPT_H_
