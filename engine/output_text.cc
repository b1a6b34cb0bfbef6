#include "engine/output_text.h"

#include <utility>

namespace tandem::engine {

OutputText::OutputText(std::shared_ptr<const DetokenizerVocab> vocab, bool skip_special_tokens,
                       std::span<const int32_t> prompt, std::vector<std::string> stop_strings,
                       std::vector<int32_t> shown_special_tokens)
    : detokenizer_(std::move(vocab), skip_special_tokens) {
  detokenizer_.ShowSpecial(std::move(shown_special_tokens));
  detokenizer_.StartAfterPrompt(absl::MakeConstSpan(prompt.data(), prompt.size()));
  if (!stop_strings.empty()) stops_.emplace(std::move(stop_strings));
}

bool OutputText::Add(int32_t token, std::string* text) {
  if (!stops_) {
    detokenizer_.Add(token, text);
    return false;
  }
  scratch_.clear();
  detokenizer_.Add(token, &scratch_);
  return stops_->Add(scratch_, text);
}

bool OutputText::Finish(std::string* text) {
  if (!stops_) {
    detokenizer_.Flush(text);
    return false;
  }
  scratch_.clear();
  detokenizer_.Flush(&scratch_);
  const bool stopped = stops_->Add(scratch_, text);
  stops_->Flush(text);
  return stopped;
}

std::string OutputText::matched_stop() const {
  return stops_ && stops_->stopped() ? stops_->matched() : std::string();
}

}  // namespace tandem::engine
