#include "server/grpc/reset_flood_guard.h"

#include <vector>

#include "server/logging/structured_log.h"

namespace tandem::server {

bool ResetFloodGuard::Blocked(const std::string& connection, Clock::time_point now) {
  if (limits_.max_resets <= 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = connections_.find(connection);
  return it != connections_.end() && now < it->second.blocked_until;
}

void ResetFloodGuard::RecordClientReset(const std::string& connection, Clock::time_point now) {
  if (limits_.max_resets <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (connections_.size() >= kMaxTracked && !connections_.contains(connection)) Prune(now);
  Entry& entry = connections_[connection];
  if (now - entry.window_start > limits_.window) {
    entry.window_start = now;
    entry.resets = 0;
  }
  if (++entry.resets <= limits_.max_resets || now < entry.blocked_until) return;
  entry.blocked_until = now + limits_.penalty;
  ++blocks_;
  if (on_block_) on_block_();
  LogLine(LogLevel::kWarning, "connection blocked for resetting calls")
      .Field("peer", connection)
      .Field("resets", static_cast<int64_t>(entry.resets))
      .Field("window_s", std::chrono::duration<double>(limits_.window).count())
      .Field("blocked_s", std::chrono::duration<double>(limits_.penalty).count());
}

int64_t ResetFloodGuard::blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_;
}

void ResetFloodGuard::Prune(Clock::time_point now) {
  std::vector<std::string> idle;
  for (const auto& [connection, entry] : connections_) {
    if (now - entry.window_start > limits_.window && now >= entry.blocked_until) {
      idle.push_back(connection);
    }
  }
  for (const std::string& connection : idle) connections_.erase(connection);
  if (connections_.size() < kMaxTracked) return;
  // Still full (every entry active): forget one that is not blocked rather than grow.
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    if (now >= it->second.blocked_until) {
      connections_.erase(it);
      return;
    }
  }
  connections_.erase(connections_.begin());
}

}  // namespace tandem::server
