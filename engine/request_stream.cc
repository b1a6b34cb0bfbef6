#include "engine/request_stream.h"

#include <utility>

namespace tandem::engine {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

void RequestStream::Push(Event event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_pushed_) return;  // nothing follows the finished event
    if (event.kind == Event::Kind::kFinished) finished_pushed_ = true;
    events_.push_back(std::move(event));
    if (listener_) listener_();
  }
  cv_.notify_all();
}

void RequestStream::SetPushListener(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listener_ = std::move(listener);
  if (listener_ && !events_.empty()) listener_();
}

bool RequestStream::Next(Event* event) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_taken_) return false;
  cv_.wait(lock, [&] { return !events_.empty(); });
  *event = std::move(events_.front());
  events_.pop_front();
  if (event->kind == Event::Kind::kFinished) finished_taken_ = true;
  return true;
}

bool RequestStream::NextFor(std::chrono::milliseconds timeout, Event* event, bool* timed_out) {
  std::unique_lock<std::mutex> lock(mu_);
  *timed_out = false;
  if (finished_taken_) return false;
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) {
    *timed_out = true;
    return false;
  }
  *event = std::move(events_.front());
  events_.pop_front();
  if (event->kind == Event::Kind::kFinished) finished_taken_ = true;
  return true;
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_pushed_;
}

}  // namespace tandem::engine
