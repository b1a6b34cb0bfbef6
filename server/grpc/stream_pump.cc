#include "server/grpc/stream_pump.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

namespace tandem::server {

StreamPump::StreamPump() {
  thread_ = std::thread([this] { Run(); });
}

StreamPump::~StreamPump() { Stop(); }

void StreamPump::Add(GenerateStream* stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.emplace(stream, StreamSignals{});
    wake_ = true;
  }
  wake_cv_.notify_one();
}

void StreamPump::Signal(GenerateStream* stream, const StreamSignals& signals) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    StreamSignals& s = it->second;
    // Signals accumulate until the pump takes them; a failed write stays failed.
    if (signals.write_done) {
      s.write_done = true;
      s.write_ok = s.write_ok && signals.write_ok;
    }
    s.cancelled |= signals.cancelled;
    s.done |= signals.done;
    wake_ = true;
  }
  wake_cv_.notify_one();
}

void StreamPump::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    wake_ = true;
  }
  wake_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void StreamPump::Run() {
  std::vector<std::pair<GenerateStream*, StreamSignals>> work;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (stopping_ && streams_.empty()) return;
    work.clear();
    for (auto& [stream, signals] : streams_) {
      work.emplace_back(stream, signals);
      signals.write_done = false;
      signals.write_ok = true;
    }
    wake_ = false;
    lock.unlock();

    // Outside the lock: Advance calls into gRPC, which may run a stream's callbacks inline,
    // and those call Signal().
    std::vector<GenerateStream*> done;
    // The earliest moment a pending write counts as stalled: the pump must look again then even
    // if nothing signals it.
    std::optional<std::chrono::steady_clock::time_point> next_check;
    for (const auto& [stream, signals] : work) {
      if (signals.done) {
        done.push_back(stream);
        continue;
      }
      stream->Advance(signals);
      if (auto deadline = stream->stall_deadline()) {
        next_check = next_check ? std::min(*next_check, *deadline) : *deadline;
      }
    }
    lock.lock();
    for (GenerateStream* stream : done) streams_.erase(stream);
    if (!done.empty()) {
      // Deleted outside the lock: a stream's destructor cancels its request, and the engine's
      // push of the finished event runs the listener, which takes this lock (until the
      // destructor has removed the listener, which it does first).
      lock.unlock();
      for (GenerateStream* stream : done) delete stream;  // gRPC is done with these reactors
      lock.lock();
    }
    // Stop's wake-up may have been consumed by this pass (whose last stream then finished), so
    // an empty pump that is stopping must not wait for another.
    auto woken = [&] { return wake_ || (stopping_ && streams_.empty()); };
    if (next_check) {
      wake_cv_.wait_until(lock, *next_check, woken);
    } else {
      wake_cv_.wait(lock, woken);
    }
  }
}

}  // namespace tandem::server
