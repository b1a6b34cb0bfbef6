// The choices of one HTTP call (OpenAI's `n`; one choice for most calls) read as one sequence of
// events, each tagged with its choice, in the order the engine produced them. One thread, the
// connection's, reads them: it sleeps until any choice has an event (the streams' push
// listeners wake it), and looks every kPollInterval for a client that left.
#ifndef TANDEM_SERVER_OPENAI_CHOICE_STREAMS_H_
#define TANDEM_SERVER_OPENAI_CHOICE_STREAMS_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "server/grpc/service_state.h"
#include "server/openai/live_request.h"

namespace tandem::server {

class ChoiceStreams {
 public:
  // How often a reader waiting for tokens checks whether its client is still there.
  static constexpr std::chrono::milliseconds kPollInterval{50};

  // Submits `n` choices of each of `requests` (LiveRequest::AdmitChoices: request r's choice j
  // is choice r × n + j); the refusal holds nothing.
  static absl::StatusOr<std::unique_ptr<ChoiceStreams>> Admit(ServiceState& state,
                                                              const std::string& caller,
                                                              std::vector<engine::Request> requests,
                                                              int32_t n);
  ~ChoiceStreams();  // cancels the choices still running
  ChoiceStreams(const ChoiceStreams&) = delete;
  ChoiceStreams& operator=(const ChoiceStreams&) = delete;

  size_t size() const { return choices_.size(); }
  // The first choice's request id, which names the call.
  const std::string& request_id() const { return choices_.front()->request_id(); }
  bool all_finished() const { return unfinished_ == 0; }

  struct ChoiceEvent {
    size_t choice = 0;
    engine::Event event;
  };
  // The next event of any choice; nullopt once every choice has finished or `abandoned()` holds
  // (asked at most every kPollInterval, waiting or not).
  std::optional<ChoiceEvent> Next(const std::function<bool()>& abandoned);
  // Cancels every choice that has not finished, then waits for their finish events (a few
  // seconds in all: a stopping engine may send none) and puts them in `finished`, one slot per
  // choice; a choice whose event does not come keeps its slot empty.
  void Cancel(std::vector<std::optional<engine::Event>>* finished);

 private:
  explicit ChoiceStreams(std::vector<std::unique_ptr<LiveRequest>> choices);

  std::vector<std::unique_ptr<LiveRequest>> choices_;
  std::vector<bool> finished_;
  size_t unfinished_ = 0;
  size_t next_ = 0;  // where the next look for an event starts, so no choice is starved
  std::chrono::steady_clock::time_point last_check_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable pushed_cv_;
  bool pushed_ = false;  // an event came since the reader last looked
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_CHOICE_STREAMS_H_
