// What every RPC of the service shares: the model, the engine, the caps, and the registry of
// live streamed requests that Abort looks ids up in. Thread-safe.
#ifndef TANDEM_SERVER_GRPC_SERVICE_STATE_H_
#define TANDEM_SERVER_GRPC_SERVICE_STATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/engine.h"
#include "server/grpc/pinned_prefixes.h"
#include "server/grpc/request_validation.h"
#include "server/grpc/reset_flood_guard.h"
#include "server/grpc/served_model.h"
#include "server/grpc/server_config.h"
#include "server/metrics/request_metrics.h"
#include "server/reasoning/reasoning_support.h"
#include "server/tools/tool_call_support.h"

namespace tandem::server {

class ServiceState {
 public:
  ServiceState(const ServedModel& model, engine::Engine& engine, const ServerConfig& config)
      : model_(model),
        engine_(engine),
        config_(config),
        tool_calls_(model.tokenizer.get(), config.tool_call_format),
        reasoning_(model.tokenizer.get(), config.reasoning_format),
        reset_guard_(config.limits.reset_flood, [this] { metrics_.CountConnectionBlocked(); }),
        pins_(engine, config.limits.max_pinned_prefixes) {
    validation_.model = &model_;
    validation_.limits = config.limits;
    validation_.max_new_tokens_limit = config.engine.scheduler.max_new_tokens_limit;
    validation_.grammars = &grammars_;
  }

  const ServedModel& model() const { return model_; }
  engine::Engine& engine() { return engine_; }
  const ServerConfig& config() const { return config_; }
  const ValidationContext& validation() const { return validation_; }
  RequestMetrics& metrics() { return metrics_; }
  // Structured output's and forced tool calls' compiled grammars, by their source.
  engine::GrammarCache& grammars() { return grammars_; }
  ResetFloodGuard& reset_guard() { return reset_guard_; }
  // The tool-call format and what requests that use tools need of it.
  const ToolCallSupport& tool_calls() const { return tool_calls_; }
  // The reasoning format and what a chat whose answer is split needs of it.
  const ReasoningSupport& reasoning() const { return reasoning_; }
  // The callers' pinned prefixes (PinPrefix).
  PinnedPrefixes& pins() { return pins_; }
  double uptime_seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }

  // Once set, new Generate and Chat calls get UNAVAILABLE.
  void set_draining() { draining_ = true; }
  bool draining() const { return draining_; }

  // Counts `n` open streams at once (an OpenAI call's choices); false (and nothing counted)
  // when they would pass the cap.
  bool AcquireStream(int64_t n = 1) {
    if (active_streams_.fetch_add(n) + n > config_.limits.max_concurrent_streams) {
      active_streams_.fetch_sub(n);
      return false;
    }
    return true;
  }
  void ReleaseStream(int64_t n = 1) { active_streams_.fetch_sub(n); }
  int64_t active_streams() const { return active_streams_.load(); }

  // Request ids are unique per caller (caller_identity.h), not server-wide: a client's ids
  // are its own business, and nobody else can abort, or learn of, a request by guessing its id.
  //
  // Reserves `request_id` for `caller` before the request reaches the engine; false when a live
  // request of that caller already uses it. An empty id gets a fresh "req-N" (written back).
  bool ReserveId(const std::string& caller, std::string* request_id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (request_id->empty()) {
      do {
        *request_id = "req-" + std::to_string(next_id_++);
      } while (live_.contains({caller, *request_id}));
    }
    return live_.emplace(LiveKey{caller, *request_id}, std::vector<engine::RequestId>{}).second;
  }
  // Adds an engine request to a reserved id (a call's choices all stand under its one id); an id
  // no longer reserved stays free.
  void BindId(const std::string& caller, const std::string& request_id, engine::RequestId id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(LiveKey{caller, request_id});
    if (it != live_.end()) it->second.push_back(id);
  }
  void ReleaseId(const std::string& caller, const std::string& request_id) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(LiveKey{caller, request_id});
  }
  // The engine ids of one of `caller`'s live requests (empty when unknown, or not yet submitted).
  std::vector<engine::RequestId> Lookup(const std::string& caller,
                                        const std::string& request_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(LiveKey{caller, request_id});
    return it == live_.end() ? std::vector<engine::RequestId>{} : it->second;
  }

 private:
  const ServedModel& model_;
  engine::Engine& engine_;
  const ServerConfig config_;
  engine::GrammarCache grammars_;
  ValidationContext validation_;
  RequestMetrics metrics_;
  const ToolCallSupport tool_calls_;
  const ReasoningSupport reasoning_;
  ResetFloodGuard reset_guard_;
  PinnedPrefixes pins_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> active_streams_{0};
  mutable std::mutex mu_;
  using LiveKey = std::pair<std::string, std::string>;  // caller, request id
  absl::flat_hash_map<LiveKey, std::vector<engine::RequestId>> live_;
  uint64_t next_id_ = 1;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_SERVICE_STATE_H_
