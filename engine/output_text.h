// A sequence's streamed text: the incremental detokenizer followed by the stop-string matcher.
// Each sampled token yields the text that is now certain (complete UTF-8, and no longer
// possibly the start of a stop string); a completed stop string ends the text right before it.
#ifndef TANDEM_ENGINE_OUTPUT_TEXT_H_
#define TANDEM_ENGINE_OUTPUT_TEXT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/detokenizer.h"
#include "engine/stop_strings.h"

namespace tandem::engine {

class OutputText {
 public:
  // The output continues the text of `prompt` (a sentencepiece leading space is kept).
  OutputText(std::shared_ptr<const DetokenizerVocab> vocab, bool skip_special_tokens,
             std::span<const int32_t> prompt, std::vector<std::string> stop_strings,
             std::vector<int32_t> shown_special_tokens = {});

  // The text `token` makes certain. True once a stop string has been completed.
  bool Add(int32_t token, std::string* text);
  // The sequence ended for another reason: the held-back rest (which may still complete a stop
  // string: then true, and the text ends before it).
  bool Finish(std::string* text);
  // The stop string that ended the text, or empty.
  std::string matched_stop() const;

 private:
  Detokenizer detokenizer_;
  std::optional<StopStringMatcher> stops_;
  std::string scratch_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_OUTPUT_TEXT_H_
