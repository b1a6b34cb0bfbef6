#include "engine/scored_windows.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model_runner.h"
#include "engine/sequence_memory.h"
#include "models/status_macros.h"

namespace tandem::engine {
namespace {

// A window's tokens (prefix, then text) and how many of them have been run.
struct Window {
  std::vector<int32_t> tokens;
  int64_t begin = 0;  // its first text token's place in the text
  int64_t fed = 0;
};

// One model's side of the passes: its runner and each window's state in its memory.
struct Side {
  const ScoringModel* model;
  std::unique_ptr<ModelRunner> runner;
  std::vector<SequenceMemory> memories;
};

// "the int8 model: " before a model's errors, when it has a name.
std::string Named(const ScoringModel& model) { return model.name.empty() ? "" : model.name + ": "; }

}  // namespace

absl::Status CheckScoringInput(std::span<const int32_t> text, std::span<const int32_t> prefix,
                               int32_t vocab) {
  for (const auto& [ids, name] : {std::pair{prefix, "prefix"}, std::pair{text, "text"}}) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, " token ", i, " is ", ids[i], ", outside the vocabulary [0, ", vocab, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ScoreWindows(
    std::span<const ScoringModel> models, std::span<const int32_t> text,
    const PerplexityOptions& options, const PerplexityWindows& plan,
    const std::function<absl::Status(const ScoredRow&)>& on_row,
    const std::function<void(int64_t windows_done, int64_t tokens_run)>& on_group) {
  if (models.empty()) return absl::InvalidArgumentError("no model to score with");
  const int32_t vocab = models.front().model->config().vocab_size;
  std::vector<Side> sides;
  for (const ScoringModel& model : models) {
    if (model.model->config().vocab_size != vocab) {
      return absl::InvalidArgumentError(absl::StrCat("the models' vocabularies differ: ", vocab,
                                                     " and ", model.model->config().vocab_size,
                                                     " tokens"));
    }
    TANDEM_RETURN_IF_ERROR(CheckWeightsReachable(*model.model, *model.ops));
    sides.push_back({&model, std::make_unique<ModelRunner>(*model.model, *model.ops), {}});
  }
  const int64_t text_per_window = plan.context - static_cast<int64_t>(options.prefix.size());
  // Every token but the last is run (the last is only predicted). Passes stop at the first
  // scored row, so the context before it is run without rows of logits.
  const int64_t first_row = plan.score_from - 1;
  int64_t tokens_run = 0;
  std::vector<absl::Status> errors;
  std::vector<const float*> rows(sides.size());

  for (int64_t first = 0; first < plan.count; first += options.batch) {
    const int64_t last = std::min(plan.count, first + options.batch);
    std::vector<Window> windows;
    for (int64_t w = first; w < last; ++w) {
      Window& window = windows.emplace_back();
      window.begin = w * text_per_window;
      const int64_t length =
          std::min(text_per_window, static_cast<int64_t>(text.size()) - window.begin);
      window.tokens = options.prefix;
      window.tokens.insert(window.tokens.end(), text.begin() + window.begin,
                           text.begin() + window.begin + length);
    }
    for (Side& side : sides) {
      side.memories.clear();
      side.memories.reserve(windows.size());
      for (size_t i = 0; i < windows.size(); ++i) {
        absl::StatusOr<SequenceMemory> memory =
            SequenceMemory::Create(*side.model->allocator, *side.model->model);
        if (!memory.ok()) {
          return absl::Status(memory.status().code(),
                              absl::StrCat(Named(*side.model), memory.status().message()));
        }
        side.memories.push_back(*std::move(memory));
      }
    }

    std::vector<models::SequenceInput> inputs;
    std::vector<LogitsUse> uses;
    std::vector<size_t> running;
    std::vector<int64_t> ends;
    while (true) {
      uses.clear();
      running.clear();
      ends.clear();
      for (size_t i = 0; i < windows.size(); ++i) {
        const Window& window = windows[i];
        const int64_t limit = static_cast<int64_t>(window.tokens.size()) - 1;
        if (window.fed >= limit) continue;
        int64_t end = std::min(limit, window.fed + options.chunk);
        if (window.fed < first_row) end = std::min(end, first_row);
        running.push_back(i);
        ends.push_back(end);
        uses.push_back(window.fed >= first_row ? LogitsUse::kRow : LogitsUse::kNone);
      }
      if (running.empty()) break;
      // The same pass through each model.
      for (Side& side : sides) {
        inputs.clear();
        for (size_t k = 0; k < running.size(); ++k) {
          Window& window = windows[running[k]];
          SequenceMemory& memory = side.memories[running[k]];
          if (absl::Status reserved = memory.Reserve(ends[k]); !reserved.ok()) {
            return absl::Status(reserved.code(),
                                absl::StrCat(Named(*side.model), reserved.message()));
          }
          inputs.push_back(models::SequenceInput{
              &memory.state(),
              std::span<const int32_t>(window.tokens).subspan(window.fed, ends[k] - window.fed),
              {},
              uses[k] == LogitsUse::kRow});
        }
        const absl::Status run = side.runner->Run(inputs, &errors, uses);
        for (size_t k = 0; k < running.size(); ++k) {
          if (errors[k].ok()) continue;
          return absl::Status(
              errors[k].code(),
              absl::StrCat(Named(*side.model), "window ", first + running[k], " (text tokens from ",
                           windows[running[k]].begin, "): ", errors[k].message()));
        }
        TANDEM_RETURN_IF_ERROR(run);
      }
      for (size_t k = 0; k < running.size(); ++k) {
        Window& window = windows[running[k]];
        const int64_t fed = window.fed;
        tokens_run += ends[k] - fed;
        window.fed = ends[k];
        if (uses[k] != LogitsUse::kRow) continue;
        for (int64_t j = 0; j < ends[k] - fed; ++j) {
          for (size_t s = 0; s < sides.size(); ++s) {
            rows[s] = sides[s].runner->logits_row(k, static_cast<size_t>(j));
          }
          const int64_t position = fed + j + 1;
          TANDEM_RETURN_IF_ERROR(on_row({first + static_cast<int64_t>(running[k]), position,
                                         window.tokens[static_cast<size_t>(position)], rows}));
        }
      }
    }
    if (on_group) on_group(last, tokens_run);
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine
