// What `tandem perplexity` prints: a perplexity (and a comparison of two models) as a line for
// people or as JSON fields for scripts.
#ifndef TANDEM_SERVER_CLI_PERPLEXITY_REPORT_H_
#define TANDEM_SERVER_CLI_PERPLEXITY_REPORT_H_

#include <string>

#include "engine/model_comparison.h"
#include "engine/perplexity.h"
#include "nlohmann/json.hpp"

namespace tandem::cli {

// "perplexity 43.3494 ± 1.4533 over 6656 tokens (mean NLL 3.76929 nats per token)".
std::string PerplexityLine(const engine::PerplexityResult& result);
// perplexity, perplexity_stderr, mean_nll, mean_nll_stderr, scored_tokens, tokens_run, and with
// `windows` each window's begin, text_tokens, scored_tokens and perplexity.
nlohmann::json PerplexityJson(const engine::PerplexityResult& result, bool windows);

// The divergences of a comparison: mean ± standard error, median, 99th percentile, maximum, and
// how often the most likely token agrees.
std::string DivergenceLine(const engine::ModelComparison& comparison);
// kl_divergence {mean, stderr, median, p90, p99, max} and same_top_token_rate.
nlohmann::json DivergenceJson(const engine::ModelComparison& comparison);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_PERPLEXITY_REPORT_H_
