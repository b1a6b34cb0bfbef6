#include "server/cli/bench_report.h"

#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/cli/quantile.h"

namespace tandem::cli {
namespace {

struct Distribution {
  double p50 = 0, p95 = 0, p99 = 0, mean = 0;
};

Distribution Describe(const std::vector<double>& values) {
  Distribution d;
  if (values.empty()) return d;
  d.p50 = Quantile(values, 0.50);
  d.p95 = Quantile(values, 0.95);
  d.p99 = Quantile(values, 0.99);
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return d;
}

nlohmann::json ToJson(const Distribution& d) {
  return {{"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99}, {"mean", d.mean}};
}

double PerSecond(double count, double seconds) { return seconds > 0 ? count / seconds : 0; }

double HitRate(const BenchRecorder& r) {
  return r.prompt_tokens() > 0
             ? static_cast<double>(r.cached_tokens()) / static_cast<double>(r.prompt_tokens())
             : 0;
}

std::string Milliseconds(double seconds) { return absl::StrFormat("%10.2f ms", seconds * 1000); }

std::string Row(const char* name, const Distribution& d) {
  return absl::StrCat(absl::StrFormat("%-14s", name), Milliseconds(d.p50), Milliseconds(d.p95),
                      Milliseconds(d.p99), Milliseconds(d.mean), "\n");
}

}  // namespace

nlohmann::json BenchReportJson(const BenchSetup& setup, const BenchRecorder& recorder,
                               const LoadResult& load) {
  return {
      {"address", setup.address},
      {"model", setup.model},
      {"workload", setup.workload},
      {"load", setup.load},
      {"requests", load.sent},
      {"ok", recorder.ok()},
      {"errors", recorder.errors()},
      {"errors_by_code", recorder.errors_by_code()},
      {"error_examples", recorder.first_error_messages()},
      {"ttft_s", ToJson(Describe(recorder.ttft_seconds()))},
      {"inter_token_s", ToJson(Describe(recorder.inter_token_seconds()))},
      {"e2e_s", ToJson(Describe(recorder.e2e_seconds()))},
      {"output_tokens", recorder.output_tokens()},
      {"output_tokens_per_s", PerSecond(recorder.output_tokens(), load.wall_seconds)},
      {"requests_per_s", PerSecond(recorder.ok(), load.wall_seconds)},
      {"prompt_tokens", recorder.prompt_tokens()},
      {"cached_tokens", recorder.cached_tokens()},
      {"token_hit_rate", HitRate(recorder)},
      {"max_in_flight", load.max_in_flight},
      {"wall_seconds", load.wall_seconds},
  };
}

std::string BenchReportText(const BenchSetup& setup, const BenchRecorder& recorder,
                            const LoadResult& load) {
  std::string out;
  absl::StrAppend(&out, "server     ", setup.address, " (", setup.model, ")\n");
  absl::StrAppend(&out, "workload   ", setup.workload, "\n");
  absl::StrAppend(&out, "load       ", setup.load, "\n");
  absl::StrAppendFormat(&out, "requests   %d sent, %d ok, %d failed; at most %d in flight\n",
                        load.sent, recorder.ok(), recorder.errors(), load.max_in_flight);
  absl::StrAppendFormat(&out, "throughput %.2f requests/s, %.1f output tokens/s over %.2f s\n",
                        PerSecond(recorder.ok(), load.wall_seconds),
                        PerSecond(recorder.output_tokens(), load.wall_seconds), load.wall_seconds);
  absl::StrAppendFormat(&out, "prefix     %d of %d prompt tokens cached: token hit rate %.3f\n",
                        recorder.cached_tokens(), recorder.prompt_tokens(), HitRate(recorder));
  absl::StrAppend(
      &out, "\n",
      absl::StrFormat("%-14s%13s%13s%13s%13s\n", "latency", "p50", "p95", "p99", "mean"));
  absl::StrAppend(&out, Row("TTFT", Describe(recorder.ttft_seconds())));
  absl::StrAppend(&out, Row("inter-token", Describe(recorder.inter_token_seconds())));
  absl::StrAppend(&out, Row("end-to-end", Describe(recorder.e2e_seconds())));
  absl::StrAppend(&out,
                  "(client-measured; inter-token = gap between chunks / tokens in the chunk, one "
                  "sample per token)\n");
  if (recorder.errors() > 0) {
    absl::StrAppend(&out, "\nerrors\n");
    for (const auto& [code, count] : recorder.errors_by_code()) {
      absl::StrAppendFormat(&out, "  %-20s %6d  first: %s\n", code, count,
                            recorder.first_error_messages().at(code));
    }
  }
  return out;
}

}  // namespace tandem::cli
