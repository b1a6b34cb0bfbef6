#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model_runner.h"
#include "engine/sequence_memory.h"
#include "kernels/logprobs.h"
#include "models/status_macros.h"

namespace tandem::engine {
namespace {

constexpr int32_t kMaxBatch = 1024;

// A window being scored: its tokens (prefix, then text) and how many have been run.
struct LiveWindow {
  std::vector<int32_t> tokens;
  SequenceMemory memory;
  int64_t fed = 0;
  WindowScore score;
};

void Add(PerplexityResult& result, const WindowScore& window, double square_sum) {
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

absl::StatusOr<PerplexityResult> MeasurePerplexity(const models::Model& model, kernels::Ops& ops,
                                                   cache::BlockAllocator& allocator,
                                                   std::span<const int32_t> text,
                                                   const PerplexityOptions& options,
                                                   const PerplexityProgress& progress) {
  const int32_t vocab = model.config().vocab_size;
  for (std::span<const int32_t> ids : {std::span<const int32_t>(options.prefix), text}) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat(ids.data() == text.data() ? "text" : "prefix", " token ", i, " is ",
                         ids[i], ", outside the vocabulary [0, ", vocab, ")"));
      }
    }
  }
  TANDEM_ASSIGN_OR_RETURN(const PerplexityWindows plan,
                          PlanPerplexityWindows(static_cast<int64_t>(text.size()), options));
  TANDEM_RETURN_IF_ERROR(CheckWeightsReachable(model, ops));

  PerplexityResult result;
  result.context = plan.context;
  result.score_from = plan.score_from;
  const int64_t text_per_window = plan.context - static_cast<int64_t>(options.prefix.size());
  ModelRunner runner(model, ops);
  std::vector<absl::Status> errors;

  for (int64_t first = 0; first < plan.count; first += options.batch) {
    const int64_t last = std::min(plan.count, first + options.batch);
    std::vector<LiveWindow> windows;
    windows.reserve(static_cast<size_t>(last - first));
    std::vector<double> square_sums(static_cast<size_t>(last - first), 0.0);
    for (int64_t w = first; w < last; ++w) {
      TANDEM_ASSIGN_OR_RETURN(SequenceMemory memory, SequenceMemory::Create(allocator, model));
      LiveWindow& window = windows.emplace_back(LiveWindow{{}, std::move(memory), 0, {}});
      window.score.begin = w * text_per_window;
      window.score.text_tokens =
          std::min(text_per_window, static_cast<int64_t>(text.size()) - window.score.begin);
      window.tokens = options.prefix;
      window.tokens.insert(window.tokens.end(), text.begin() + window.score.begin,
                           text.begin() + window.score.begin + window.score.text_tokens);
    }

    // Every token but the last is run (the last is only predicted). Passes stop at the first
    // scored row, so the context before it is run without rows of logits.
    const int64_t first_row = plan.score_from - 1;
    std::vector<models::SequenceInput> inputs;
    std::vector<LogitsUse> uses;
    std::vector<size_t> running;
    while (true) {
      inputs.clear();
      uses.clear();
      running.clear();
      for (size_t i = 0; i < windows.size(); ++i) {
        LiveWindow& window = windows[i];
        const int64_t limit = static_cast<int64_t>(window.tokens.size()) - 1;
        if (window.fed >= limit) continue;
        int64_t end = std::min(limit, window.fed + options.chunk);
        if (window.fed < first_row) end = std::min(end, first_row);
        const bool scored = window.fed >= first_row;
        TANDEM_RETURN_IF_ERROR(window.memory.Reserve(end));
        inputs.push_back(models::SequenceInput{
            &window.memory.state(),
            std::span<const int32_t>(window.tokens).subspan(window.fed, end - window.fed),
            {},
            scored});
        uses.push_back(scored ? LogitsUse::kRow : LogitsUse::kNone);
        running.push_back(i);
      }
      if (inputs.empty()) break;
      const absl::Status run = runner.Run(inputs, &errors, uses);
      for (size_t k = 0; k < running.size(); ++k) {
        LiveWindow& window = windows[running[k]];
        if (!errors[k].ok()) {
          return absl::Status(errors[k].code(),
                              absl::StrCat("window ", first + running[k], " (text tokens from ",
                                           window.score.begin, "): ", errors[k].message()));
        }
        const int64_t fed = window.fed;
        window.fed += static_cast<int64_t>(inputs[k].tokens.size());
        result.tokens_run += static_cast<int64_t>(inputs[k].tokens.size());
        if (uses[k] != LogitsUse::kRow) continue;
        for (size_t j = 0; j < runner.rows(k); ++j) {
          const int64_t target = fed + static_cast<int64_t>(j) + 1;
          const float logprob =
              kernels::ComputeLogprobs(std::span(runner.logits_row(k, j), vocab),
                                       window.tokens[static_cast<size_t>(target)], {});
          if (!std::isfinite(logprob)) {
            return absl::InternalError(absl::StrCat(
                "window ", first + running[k], ": the log-probability of text token ",
                window.score.begin + target - static_cast<int64_t>(options.prefix.size()), " (id ",
                window.tokens[static_cast<size_t>(target)], ") is ", logprob,
                "; the model's logits are not finite"));
          }
          window.score.scored_tokens += 1;
          window.score.nll_sum -= logprob;
          square_sums[running[k]] += static_cast<double>(logprob) * logprob;
        }
      }
      TANDEM_RETURN_IF_ERROR(run);
    }
    for (size_t i = 0; i < windows.size(); ++i) Add(result, windows[i].score, square_sums[i]);
    if (progress) progress(static_cast<size_t>(last), static_cast<size_t>(plan.count), result);
  }
  return result;
}

}  // namespace tandem::engine
