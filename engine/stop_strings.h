// Stop strings over streamed text. Text arrives in deltas (from the Detokenizer); the matcher
// passes on at once whatever can no longer be part of a stop string, holds back a suffix that is
// the beginning of one, and when a stop string is completed ends the text right before it.
//
// Which stop string wins: the first to be completed as the text grows (generation would have
// stopped there), and among those completed at the same byte the one that starts first. So with
// stop strings {"abc", "b"}, "xabc" stops at "xa" ("b" completes first).
//
// Stop token ids are not handled here: the caller checks the sampled id. At the end of a
// sequence for any other reason, feed the detokenizer's Flush() text through Add() (it can still
// complete a stop string), then call Flush() for the held-back rest.
#ifndef TANDEM_ENGINE_STOP_STRINGS_H_
#define TANDEM_ENGINE_STOP_STRINGS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tandem::engine {

inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;

// INVALID_ARGUMENT naming the entry: "stop_strings[1] is empty", not valid UTF-8, longer than
// kMaxStopStringBytes, or more than kMaxStopStrings entries.
absl::Status ValidateStopStrings(const std::vector<std::string>& stop_strings);

class StopStringMatcher {
 public:
  // Empty strings are ignored (ValidateStopStrings rejects them at the API).
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // Appends to *out the text that is now certain. Returns true when a stop string was completed
  // (now or earlier): *out then ends right before it, and later calls append nothing. The held
  // suffix never splits a UTF-8 sequence when the deltas and the stop strings are valid UTF-8.
  bool Add(std::string_view delta, std::string* out);
  // Appends the held-back text (nothing after a stop).
  void Flush(std::string* out);

  bool stopped() const { return matched_ >= 0; }
  int matched_index() const { return matched_; }  // into the constructor's list; -1 when none
  const std::string& matched() const;
  size_t held_back() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string held_;  // never contains a complete stop string
  int matched_ = -1;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_STOP_STRINGS_H_
