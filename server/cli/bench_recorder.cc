#include "server/cli/bench_recorder.h"

#include "server/client/status_names.h"

namespace tandem::cli {

void BenchRecorder::Add(const CallRecord& record) {
  if (!record.status.ok() || !record.has_complete) {
    const std::string code = client::StatusCodeName(record.status.error_code());
    ++errors_by_code_[code];
    first_error_messages_.emplace(code, record.status.ok()
                                            ? "the stream ended without a Complete message"
                                            : record.status.error_message());
    return;
  }
  ++ok_;
  if (record.ttft_seconds >= 0) ttft_.push_back(record.ttft_seconds);
  inter_token_.insert(inter_token_.end(), record.inter_token_seconds.begin(),
                      record.inter_token_seconds.end());
  e2e_.push_back(record.e2e_seconds);
  output_tokens_ += record.output_tokens;
  prompt_tokens_ += record.prompt_tokens;
  cached_tokens_ += record.cached_tokens;
}

int64_t BenchRecorder::errors() const {
  int64_t n = 0;
  for (const auto& [code, count] : errors_by_code_) n += count;
  return n;
}

}  // namespace tandem::cli
