// The engine's side of one request: a queue of events that the engine loop pushes without ever
// blocking, and that a client thread pops at its own pace (gRPC writer, CLI, benchmark).
#ifndef TANDEM_ENGINE_REQUEST_STREAM_H_
#define TANDEM_ENGINE_REQUEST_STREAM_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include "engine/request.h"

namespace tandem::engine {

class RequestStream {
 public:
  explicit RequestStream(RequestId id) : id_(id) {}
  RequestId id() const { return id_; }

  // Engine side. Never blocks on the reader.
  void Push(Event event);

  // Client side: waits for the next event; false once the finished event has been taken.
  bool Next(Event* event);
  // Like Next, but gives up after `timeout` (false with `*timed_out` set).
  bool NextFor(std::chrono::milliseconds timeout, Event* event, bool* timed_out);
  // True once the finished event has been pushed (it may not have been read yet).
  bool finished() const;

  // Lets a reader that serves many streams from one thread (the gRPC pump) sleep until an event
  // arrives instead of polling: `listener` runs after every Push, on the pushing thread and
  // under this stream's lock, so once SetPushListener(nullptr) returns it never runs again and
  // whatever it refers to may go. It must be quick and must not call back into this stream or
  // the engine. If events are already waiting when it is set, it runs once at once.
  void SetPushListener(std::function<void()> listener);

 private:
  const RequestId id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool finished_pushed_ = false;
  bool finished_taken_ = false;
  std::function<void()> listener_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_REQUEST_STREAM_H_
