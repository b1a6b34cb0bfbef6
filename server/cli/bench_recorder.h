// What `tandem bench` measured: one CallRecord per request as the client saw it, gathered into
// the distributions and totals the report prints.
//
// Inter-token latency is per token: a chunk that brings n tokens after a gap g since the previous
// chunk adds n samples of g / n (the server batches tokens into one chunk when the client reads
// slower than the engine generates). The first chunk counts toward the time to first token
// instead.
#ifndef TANDEM_SERVER_CLI_BENCH_RECORDER_H_
#define TANDEM_SERVER_CLI_BENCH_RECORDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"

namespace tandem::cli {

struct CallRecord {
  grpc::Status status;
  bool has_complete = false;
  double ttft_seconds = -1;  // to the first chunk with tokens; < 0 when none came
  double e2e_seconds = 0;    // to the end of the call
  std::vector<double> inter_token_seconds;
  int64_t output_tokens = 0;  // counted from the chunks
  // From Complete.usage.
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
};

class BenchRecorder {
 public:
  // A call succeeded when its status is OK and it ended with a Complete message.
  void Add(const CallRecord& record);

  int64_t ok() const { return ok_; }
  int64_t errors() const;
  // Failed calls by status code name; "OK" counts calls that ended without a Complete.
  const std::map<std::string, int64_t>& errors_by_code() const { return errors_by_code_; }
  // The first message seen for each failing code, to show what went wrong.
  const std::map<std::string, std::string>& first_error_messages() const {
    return first_error_messages_;
  }
  // Over successful calls.
  const std::vector<double>& ttft_seconds() const { return ttft_; }
  const std::vector<double>& inter_token_seconds() const { return inter_token_; }
  const std::vector<double>& e2e_seconds() const { return e2e_; }
  int64_t output_tokens() const { return output_tokens_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t cached_tokens() const { return cached_tokens_; }

 private:
  int64_t ok_ = 0;
  std::map<std::string, int64_t> errors_by_code_;
  std::map<std::string, std::string> first_error_messages_;
  std::vector<double> ttft_, inter_token_, e2e_;
  int64_t output_tokens_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = 0;
};

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_BENCH_RECORDER_H_
