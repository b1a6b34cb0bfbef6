#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/scored_windows.h"
#include "kernels/logprobs.h"
#include "models/status_macros.h"

namespace tandem::engine {
namespace {

constexpr int32_t kMaxBatch = 1024;

void AddWindow(PerplexityResult& result, const WindowScore& window, double square_sum) {
  result.windows.push_back(window);
  result.scored_tokens += window.scored_tokens;
  result.nll_sum += window.nll_sum;
  result.nll_square_sum += square_sum;
}

}  // namespace

double PerplexityResult::mean_nll() const {
  return scored_tokens > 0 ? nll_sum / static_cast<double>(scored_tokens) : 0;
}

double PerplexityResult::perplexity() const { return std::exp(mean_nll()); }

double PerplexityResult::mean_nll_stderr() const {
  if (scored_tokens < 2) return 0;
  const double n = static_cast<double>(scored_tokens);
  const double mean = mean_nll();
  const double variance = std::max(0.0, (nll_square_sum / n - mean * mean) * n / (n - 1));
  return std::sqrt(variance / n);
}

double PerplexityResult::perplexity_stderr() const { return perplexity() * mean_nll_stderr(); }

absl::StatusOr<PerplexityWindows> PlanPerplexityWindows(int64_t text_tokens,
                                                        const PerplexityOptions& options) {
  const int64_t prefix = static_cast<int64_t>(options.prefix.size());
  if (text_tokens <= 0) return absl::InvalidArgumentError("the text has no tokens");
  if (options.context < 0 || (options.context > 0 && options.context < prefix + 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("context must be 0 (the whole text) or at least ", prefix + 2,
                     " (the prefix's ", prefix, " tokens and two of text), got ", options.context));
  }
  if (options.batch < 1 || options.batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch must be in [1, ", kMaxBatch, "], got ", options.batch));
  }
  if (options.score_from < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("score_from must be a position of the window, or -1 for the default, got ",
                     options.score_from));
  }
  if (options.chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat("chunk must be positive, got ", options.chunk));
  }
  PerplexityWindows plan;
  const bool whole = options.context == 0;
  plan.context = whole ? prefix + text_tokens : options.context;
  // A prefix token is never scored: it is not the text's.
  const int64_t lowest = std::max<int64_t>(1, prefix);
  plan.score_from = options.score_from >= 0
                        ? options.score_from
                        : std::max(lowest, whole ? int64_t{1} : plan.context / 2);
  if (plan.score_from < lowest || plan.score_from >= plan.context) {
    return absl::InvalidArgumentError(absl::StrCat("score_from must be in [", lowest, ", ",
                                                   plan.context - 1,
                                                   "] (a position of the window, past its ", prefix,
                                                   " prefix tokens), got ", plan.score_from));
  }
  const int64_t text_per_window = plan.context - prefix;
  const int64_t full = text_tokens / text_per_window;
  const int64_t rest = text_tokens % text_per_window;
  plan.count = full + (rest > 0 && prefix + rest > plan.score_from ? 1 : 0);
  if (plan.count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the text's ", text_tokens, " tokens leave nothing to score: a window scores its ",
        "positions from ", plan.score_from, " on, and its first ", prefix,
        " hold the prefix; a longer text or an earlier score_from would do"));
  }
  return plan;
}

PerplexityTally::PerplexityTally(const PerplexityWindows& plan, const PerplexityOptions& options,
                                 int64_t text_tokens)
    : prefix_(static_cast<int64_t>(options.prefix.size())),
      windows_(static_cast<size_t>(plan.count)),
      square_sums_(windows_.size(), 0.0) {
  result_.context = plan.context;
  result_.score_from = plan.score_from;
  const int64_t text_per_window = plan.context - prefix_;
  for (size_t w = 0; w < windows_.size(); ++w) {
    windows_[w].begin = static_cast<int64_t>(w) * text_per_window;
    windows_[w].text_tokens = std::min(text_per_window, text_tokens - windows_[w].begin);
  }
}

absl::Status PerplexityTally::Add(int64_t window, int64_t position, int32_t token,
                                  std::span<const float> logits) {
  const float logprob = kernels::ComputeLogprobs(logits, token, {});
  WindowScore& score = windows_[static_cast<size_t>(window)];
  if (!std::isfinite(logprob)) {
    return absl::InternalError(absl::StrCat(
        "window ", window, ": the log-probability of text token ", score.begin + position - prefix_,
        " (id ", token, ") is ", logprob, "; the model's logits are not finite"));
  }
  score.scored_tokens += 1;
  score.nll_sum -= logprob;
  square_sums_[static_cast<size_t>(window)] += static_cast<double>(logprob) * logprob;
  return absl::OkStatus();
}

void PerplexityTally::CompleteWindows(int64_t windows_done, int64_t tokens_run) {
  for (; added_ < windows_done; ++added_) {
    AddWindow(result_, windows_[static_cast<size_t>(added_)],
              square_sums_[static_cast<size_t>(added_)]);
  }
  result_.tokens_run = tokens_run;
}

absl::StatusOr<PerplexityResult> MeasurePerplexity(const models::Model& model, kernels::Ops& ops,
                                                   cache::BlockAllocator& allocator,
                                                   std::span<const int32_t> text,
                                                   const PerplexityOptions& options,
                                                   const PerplexityProgress& progress) {
  const int32_t vocab = model.config().vocab_size;
  TANDEM_RETURN_IF_ERROR(CheckScoringInput(text, options.prefix, vocab));
  TANDEM_ASSIGN_OR_RETURN(const PerplexityWindows plan,
                          PlanPerplexityWindows(static_cast<int64_t>(text.size()), options));
  PerplexityTally tally(plan, options, static_cast<int64_t>(text.size()));
  const ScoringModel scoring{&model, &ops, &allocator, ""};
  TANDEM_RETURN_IF_ERROR(ScoreWindows(
      {&scoring, 1}, text, options, plan,
      [&](const ScoredRow& row) {
        return tally.Add(row.window, row.position, row.token, std::span(row.logits[0], vocab));
      },
      [&](int64_t windows_done, int64_t tokens_run) {
        tally.CompleteWindows(windows_done, tokens_run);
        if (progress) {
          progress(static_cast<size_t>(windows_done), static_cast<size_t>(plan.count),
                   tally.result());
        }
      }));
  return tally.result();
}

}  // namespace tandem::engine
