#include "engine/model_comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::engine {
namespace {

// log Σ exp(x) in double, shifted by the largest value so that no exp overflows.
double LogSumExp(std::span<const float> x) {
  const double top = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - top);
  return top + std::log(sum);
}

}  // namespace

double KlDivergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  const double p_norm = LogSumExp(p_logits);
  const double q_norm = LogSumExp(q_logits);
  double divergence = 0;
  for (size_t i = 0; i < p_logits.size(); ++i) {
    const double log_p = p_logits[i] - p_norm;
    const double p = std::exp(log_p);
    if (p == 0) continue;  // 0 · log 0 = 0
    divergence += p * (log_p - (q_logits[i] - q_norm));
  }
  return divergence < 0 ? 0.0 : divergence;  // never below 0 but for rounding; NaN stays NaN
}

int32_t TopToken(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

double ModelComparison::mean_divergence() const {
  return divergences.empty() ? 0 : divergence_sum / static_cast<double>(divergences.size());
}

double ModelComparison::mean_divergence_stderr() const {
  const auto n = static_cast<double>(divergences.size());
  if (n < 2) return 0;
  const double mean = mean_divergence();
  const double variance = std::max(0.0, (divergence_square_sum / n - mean * mean) * n / (n - 1));
  return std::sqrt(variance / n);
}

std::vector<double> ModelComparison::divergence_quantiles(std::span<const double> qs) const {
  std::vector<double> out(qs.size(), 0.0);
  if (divergences.empty()) return out;
  std::vector<float> sorted = divergences;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < qs.size(); ++i) {
    const auto rank = static_cast<size_t>(
        std::clamp(qs[i], 0.0, 1.0) * static_cast<double>(sorted.size() - 1) + 0.5);
    out[i] = sorted[rank];
  }
  return out;
}

double ModelComparison::same_top_token_rate() const {
  return divergences.empty()
             ? 0
             : static_cast<double>(same_top_token) / static_cast<double>(divergences.size());
}

absl::StatusOr<ModelComparison> CompareModels(const ScoringModel& reference,
                                              const ScoringModel& compared,
                                              std::span<const int32_t> text,
                                              const PerplexityOptions& options,
                                              const ComparisonProgress& progress) {
  const int32_t vocab = reference.model->config().vocab_size;
  if (compared.model->config().vocab_size != vocab) {
    return absl::InvalidArgumentError(absl::StrCat("the models' vocabularies differ: ", vocab,
                                                   " and ", compared.model->config().vocab_size,
                                                   " tokens"));
  }
  TANDEM_RETURN_IF_ERROR(CheckScoringInput(text, options.prefix, vocab));
  TANDEM_ASSIGN_OR_RETURN(const PerplexityWindows plan,
                          PlanPerplexityWindows(static_cast<int64_t>(text.size()), options));
  const auto text_tokens = static_cast<int64_t>(text.size());
  PerplexityTally reference_tally(plan, options, text_tokens);
  PerplexityTally compared_tally(plan, options, text_tokens);
  ModelComparison comparison;
  const ScoringModel models[] = {reference, compared};
  // Each window's divergences, appended in window order as its group completes.
  std::vector<std::vector<float>> window_divergences(static_cast<size_t>(plan.count));
  int64_t appended = 0;
  const auto named = [](const ScoringModel& model, const absl::Status& status) {
    return model.name.empty()
               ? status
               : absl::Status(status.code(), absl::StrCat(model.name, ": ", status.message()));
  };
  TANDEM_RETURN_IF_ERROR(ScoreWindows(
      models, text, options, plan,
      [&](const ScoredRow& row) -> absl::Status {
        const std::span<const float> p(row.logits[0], vocab), q(row.logits[1], vocab);
        if (absl::Status s = reference_tally.Add(row.window, row.position, row.token, p); !s.ok()) {
          return named(reference, s);
        }
        if (absl::Status s = compared_tally.Add(row.window, row.position, row.token, q); !s.ok()) {
          return named(compared, s);
        }
        const double divergence = KlDivergence(p, q);
        if (!std::isfinite(divergence)) {
          return absl::InternalError(
              absl::StrCat("window ", row.window, ", position ", row.position,
                           ": the divergence is ", divergence,
                           "; the compared model gives no probability to a token the "
                           "reference can produce"));
        }
        window_divergences[static_cast<size_t>(row.window)].push_back(
            static_cast<float>(divergence));
        comparison.same_top_token += TopToken(p) == TopToken(q) ? 1 : 0;
        return absl::OkStatus();
      },
      [&](int64_t windows_done, int64_t tokens_run) {
        reference_tally.CompleteWindows(windows_done, tokens_run);
        compared_tally.CompleteWindows(windows_done, tokens_run);
        for (; appended < windows_done; ++appended) {
          std::vector<float>& window = window_divergences[static_cast<size_t>(appended)];
          for (float divergence : window) {
            comparison.divergences.push_back(divergence);
            comparison.divergence_sum += divergence;
            comparison.divergence_square_sum += static_cast<double>(divergence) * divergence;
          }
          std::vector<float>().swap(window);
        }
        if (progress) {
          progress(static_cast<size_t>(windows_done), static_cast<size_t>(plan.count),
                   reference_tally.result().perplexity(), compared_tally.result().perplexity(),
                   comparison);
        }
      }));
  comparison.reference = reference_tally.result();
  comparison.compared = compared_tally.result();
  return comparison;
}

}  // namespace tandem::engine
