#include "server/cli/perplexity_report.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace tandem::cli {

std::string PerplexityLine(const engine::PerplexityResult& result) {
  return absl::StrFormat("perplexity %.4f ± %.4f over %d tokens (mean NLL %.5f nats per token)",
                         result.perplexity(), result.perplexity_stderr(), result.scored_tokens,
                         result.mean_nll());
}

nlohmann::json PerplexityJson(const engine::PerplexityResult& result, bool windows) {
  nlohmann::json out;
  out["perplexity"] = result.perplexity();
  out["perplexity_stderr"] = result.perplexity_stderr();
  out["mean_nll"] = result.mean_nll();
  out["mean_nll_stderr"] = result.mean_nll_stderr();
  out["scored_tokens"] = result.scored_tokens;
  out["tokens_run"] = result.tokens_run;
  if (!windows) return out;
  nlohmann::json list = nlohmann::json::array();
  for (const engine::WindowScore& w : result.windows) {
    list.push_back({{"begin", w.begin},
                    {"text_tokens", w.text_tokens},
                    {"scored_tokens", w.scored_tokens},
                    {"perplexity", std::exp(w.nll_sum / static_cast<double>(w.scored_tokens))}});
  }
  out["windows"] = std::move(list);
  return out;
}

std::string DivergenceLine(const engine::ModelComparison& comparison) {
  const double qs[] = {0.5, 0.99, 1.0};
  const std::vector<double> at = comparison.divergence_quantiles(qs);
  return absl::StrFormat(
      "KL divergence %.3g ± %.2g nats per token (median %.3g, 99th percentile %.3g, max %.3g); "
      "the same most likely token at %.2f%% of %d positions",
      comparison.mean_divergence(), comparison.mean_divergence_stderr(), at[0], at[1], at[2],
      100 * comparison.same_top_token_rate(), comparison.divergences.size());
}

nlohmann::json DivergenceJson(const engine::ModelComparison& comparison) {
  const double qs[] = {0.5, 0.9, 0.99, 1.0};
  const std::vector<double> at = comparison.divergence_quantiles(qs);
  nlohmann::json out;
  out["kl_divergence"] = {{"mean", comparison.mean_divergence()},
                          {"stderr", comparison.mean_divergence_stderr()},
                          {"median", at[0]},
                          {"p90", at[1]},
                          {"p99", at[2]},
                          {"max", at[3]}};
  out["same_top_token_rate"] = comparison.same_top_token_rate();
  return out;
}

}  // namespace tandem::cli
