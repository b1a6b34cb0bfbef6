// The server's defence against HTTP/2 "rapid reset" floods (CVE-2023-44487): a client that opens
// calls and resets them at once, over and over, makes the server do a call's whole work for each
// while holding none open, so no stream limit applies. gRPC 1.51 (Debian 12's) has no mitigation
// of its own and gives the application no way to close a connection, so the guard works at the
// one place we control: the call. It counts, per connection, calls its client cancelled; a
// connection that cancels more than `max_resets` calls within `window` is blocked for `penalty`:
// each of its new calls is refused at once with RESOURCE_EXHAUSTED, before authentication,
// parsing or the engine, which is about as cheap as a call can be. Legitimate cancellation
// (a user pressing stop, a deadline) stays far below the limit.
#ifndef TANDEM_SERVER_GRPC_RESET_FLOOD_GUARD_H_
#define TANDEM_SERVER_GRPC_RESET_FLOOD_GUARD_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace tandem::server {

struct ResetFloodLimits {
  int32_t max_resets = 500;  // 0 disables the guard
  std::chrono::steady_clock::duration window = std::chrono::seconds(10);
  std::chrono::steady_clock::duration penalty = std::chrono::seconds(30);
};

class ResetFloodGuard {
 public:
  using Clock = std::chrono::steady_clock;
  // `on_block` (optional) runs, under the guard's lock, each time a connection is blocked.
  explicit ResetFloodGuard(const ResetFloodLimits& limits, std::function<void()> on_block = {})
      : limits_(limits), on_block_(std::move(on_block)) {}

  // `connection` is gRPC's peer string ("ipv4:10.0.0.7:5123"): one per TCP connection.
  // True while the connection is blocked.
  bool Blocked(const std::string& connection, Clock::time_point now = Clock::now());
  // A call of `connection` that its client cancelled (not a deadline, not the server).
  void RecordClientReset(const std::string& connection, Clock::time_point now = Clock::now());
  // Connections blocked so far (for the log and tests).
  int64_t blocks() const;

 private:
  struct Entry {
    Clock::time_point window_start;
    int32_t resets = 0;
    Clock::time_point blocked_until;
  };
  // Bounds the table whatever the number of connections: entries idle for a window are dropped
  // when it grows past this.
  static constexpr size_t kMaxTracked = 4096;
  void Prune(Clock::time_point now);

  const ResetFloodLimits limits_;
  const std::function<void()> on_block_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> connections_;
  int64_t blocks_ = 0;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_RESET_FLOOD_GUARD_H_
