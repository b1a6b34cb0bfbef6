#include "server/openai/choice_streams.h"

#include <utility>

#include "models/status_macros.h"

namespace tandem::server {

absl::StatusOr<std::unique_ptr<ChoiceStreams>> ChoiceStreams::Admit(
    ServiceState& state, const std::string& caller, std::vector<engine::Request> requests,
    int32_t n) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<LiveRequest>> choices,
                          LiveRequest::AdmitChoices(state, caller, std::move(requests), n));
  return std::unique_ptr<ChoiceStreams>(new ChoiceStreams(std::move(choices)));
}

ChoiceStreams::ChoiceStreams(std::vector<std::unique_ptr<LiveRequest>> choices)
    : choices_(std::move(choices)),
      finished_(choices_.size(), false),
      unfinished_(choices_.size()) {
  for (const std::unique_ptr<LiveRequest>& choice : choices_) {
    choice->SetPushListener([this] {
      std::lock_guard<std::mutex> lock(mu_);
      pushed_ = true;
      pushed_cv_.notify_one();
    });
  }
}

ChoiceStreams::~ChoiceStreams() {
  // Once removed, a listener never runs again, so `this` may go.
  for (const std::unique_ptr<LiveRequest>& choice : choices_) choice->SetPushListener(nullptr);
}

std::optional<ChoiceStreams::ChoiceEvent> ChoiceStreams::Next(
    const std::function<bool()>& abandoned) {
  while (unfinished_ > 0) {
    // Looked at between events too: a request whose tokens keep coming never waits a whole
    // interval, and its client may still have left.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check_ >= kPollInterval) {
      last_check_ = now;
      if (abandoned()) return std::nullopt;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pushed_ = false;  // what comes from here on wakes the wait below
    }
    for (size_t k = 0; k < choices_.size(); ++k) {
      const size_t i = (next_ + k) % choices_.size();
      if (finished_[i]) continue;
      std::optional<engine::Event> event = choices_[i]->TryNext();
      if (!event) continue;
      next_ = i + 1;
      if (event->kind == engine::Event::Kind::kFinished) {
        finished_[i] = true;
        --unfinished_;
      }
      return ChoiceEvent{i, *std::move(event)};
    }
    std::unique_lock<std::mutex> lock(mu_);
    pushed_cv_.wait_for(lock, kPollInterval, [&] { return pushed_; });
  }
  return std::nullopt;
}

void ChoiceStreams::Cancel(std::vector<std::optional<engine::Event>>* finished) {
  std::vector<size_t> cancelled;
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (finished_[i]) continue;
    finished_[i] = true;
    --unfinished_;
    choices_[i]->SendCancel();
    cancelled.push_back(i);
  }
  // The engine cancels them all at its next step: one deadline for all.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (const size_t i : cancelled) (*finished)[i] = choices_[i]->AwaitFinish(give_up);
}

}  // namespace tandem::server
