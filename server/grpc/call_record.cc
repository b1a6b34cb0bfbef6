#include "server/grpc/call_record.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "server/client/status_names.h"
#include "server/grpc/event_conversion.h"
#include "server/logging/structured_log.h"

namespace tandem::server {

using client::StatusCodeName;

namespace {

// Refusals are logged at most kBurst at once and kPerSecond on average: a client that sends
// thousands of bad calls a second must not turn the log into the bottleneck (or fill the disk).
// The first line after a quiet spell says how many were left out.
class RefusalLogBudget {
 public:
  // True when this refusal may be logged; *suppressed is then how many were not, since the last.
  bool Take(int64_t* suppressed) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    tokens_ =
        std::min(kBurst, tokens_ + kPerSecond * std::chrono::duration<double>(now - last_).count());
    last_ = now;
    if (tokens_ < 1) {
      ++suppressed_;
      return false;
    }
    tokens_ -= 1;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

 private:
  static constexpr double kBurst = 50;
  static constexpr double kPerSecond = 10;
  std::mutex mu_;
  double tokens_ = kBurst;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  int64_t suppressed_ = 0;
};

RefusalLogBudget& RefusalLogs() {
  static RefusalLogBudget* budget = new RefusalLogBudget();
  return *budget;
}

}  // namespace

void RecordRefusedCall(ServiceState& state, const char* rpc, const std::string& caller,
                       const std::string& request_id, const grpc::Status& status) {
  const std::string code = StatusCodeName(status.error_code());
  state.metrics().CountCall(rpc, code);
  int64_t suppressed = 0;
  if (!RefusalLogs().Take(&suppressed)) return;
  LogLine line(LogLevel::kWarning, "request refused");
  line.Field("rpc", rpc)
      .Field("request_id", request_id)
      .Field("caller", caller)
      .Field("code", code)
      .Field("error", status.error_message());
  if (suppressed > 0) line.Field("refusals_not_logged", suppressed);
}

void RecordAbandonedCall(ServiceState& state, const char* rpc, const grpc::Status& status) {
  state.metrics().CountCall(rpc, StatusCodeName(status.error_code()));
}

void RecordServedCall(ServiceState& state, const char* rpc, const std::string& caller,
                      const std::string& request_id, const grpc::Status& status,
                      std::span<const engine::Event> finished, size_t choices_per_prompt) {
  const std::string code = StatusCodeName(status.error_code());
  state.metrics().CountCall(rpc, code);
  for (const engine::Event& event : finished) state.metrics().ObserveFinished(event);

  LogLine line(status.ok() ? LogLevel::kInfo : LogLevel::kWarning, "request finished");
  line.Field("rpc", rpc)
      .Field("request_id", request_id)
      .Field("caller", caller)
      .Field("code", code);
  if (!status.ok()) line.Field("error", status.error_message());
  if (finished.empty()) return;
  const engine::Event& first = finished.front();
  const engine::Usage all = ChoicesUsage(finished, choices_per_prompt);
  line.Field("finish_reason", engine::FinishReasonName(first.finish_reason))
      .Field("prompt_tokens", all.prompt_tokens)
      .Field("cached_tokens", all.cached_tokens)
      .Field("completion_tokens", all.completion_tokens)
      .Field("preemptions", all.preemptions)
      .Field("accepted_draft_tokens", all.accepted_draft_tokens)
      .Field("rejected_draft_tokens", all.rejected_draft_tokens)
      .Field("queued_s", first.timings.queued)
      .Field("ttft_s", first.timings.first_token)
      .Field("e2e_s", first.timings.finished);
  if (all.reasoning_tokens && *all.reasoning_tokens > 0) {
    line.Field("reasoning_tokens", *all.reasoning_tokens);
  }
  if (finished.size() > 1) line.Field("choices", static_cast<int64_t>(finished.size()));
}

}  // namespace tandem::server
