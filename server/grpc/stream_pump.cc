#include "server/grpc/stream_pump.h"

#include <utility>
#include <vector>

namespace tandem::server {

StreamPump::StreamPump(std::chrono::microseconds poll_interval) : poll_interval_(poll_interval) {
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
    bool polling = false;
    std::vector<GenerateStream*> done;
    for (const auto& [stream, signals] : work) {
      if (signals.done) {
        done.push_back(stream);
      } else if (stream->Advance(signals) == GenerateStream::Waiting::kEngine) {
        polling = true;
      }
    }
    lock.lock();
    for (GenerateStream* stream : done) {
      streams_.erase(stream);
      delete stream;  // gRPC no longer touches a reactor after OnDone
    }
    if (!wake_) {
      if (polling) {
        wake_cv_.wait_for(lock, poll_interval_, [&] { return wake_; });
      } else {
        wake_cv_.wait(lock, [&] { return wake_; });
      }
    }
  }
}

}  // namespace tandem::server
