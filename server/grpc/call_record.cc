#include "server/grpc/call_record.h"

#include "server/client/status_names.h"
#include "server/logging/structured_log.h"

namespace tandem::server {

using client::StatusCodeName;

void RecordRefusedCall(ServiceState& state, const char* rpc, const std::string& request_id,
                       const grpc::Status& status) {
  const std::string code = StatusCodeName(status.error_code());
  state.metrics().CountCall(rpc, code);
  LogLine(LogLevel::kWarning, "request refused")
      .Field("rpc", rpc)
      .Field("request_id", request_id)
      .Field("code", code)
      .Field("error", status.error_message());
}

void RecordServedCall(ServiceState& state, const char* rpc, const std::string& request_id,
                      const grpc::Status& status, const engine::Event* finished) {
  const std::string code = StatusCodeName(status.error_code());
  state.metrics().CountCall(rpc, code);
  if (finished != nullptr) state.metrics().ObserveFinished(*finished);

  LogLine line(status.ok() ? LogLevel::kInfo : LogLevel::kWarning, "request finished");
  line.Field("rpc", rpc).Field("request_id", request_id).Field("code", code);
  if (finished == nullptr) return;
  line.Field("finish_reason", engine::FinishReasonName(finished->finish_reason))
      .Field("prompt_tokens", finished->usage.prompt_tokens)
      .Field("cached_tokens", finished->usage.cached_tokens)
      .Field("completion_tokens", finished->usage.completion_tokens)
      .Field("preemptions", finished->usage.preemptions)
      .Field("queued_s", finished->timings.queued)
      .Field("ttft_s", finished->timings.first_token)
      .Field("e2e_s", finished->timings.finished);
  if (!status.ok()) line.Field("error", status.error_message());
}

}  // namespace tandem::server
