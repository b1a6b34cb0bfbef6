// `tandem perplexity`: load a checkpoint and measure its perplexity on a text (engine/
// perplexity.h says how windows are cut and scored).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model_comparison.h"
#include "engine/perplexity.h"
#include "engine/sequence_memory.h"
#include "models/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/cli/args.h"
#include "server/cli/command_main.h"
#include "server/cli/commands.h"
#include "server/cli/local_model.h"
#include "server/cli/perplexity_input.h"
#include "server/cli/perplexity_report.h"

namespace tandem::cli {
namespace {

const std::vector<FlagSpec>& PerplexityFlags() {
  static const std::vector<FlagSpec> specs = WithLocalModelFlags({
      {"text-file", true, "the text to score (UTF-8), tokenized with the checkpoint's tokenizer"},
      {"ids-file", true, "the text as token ids, separated by commas or whitespace"},
      {"context", true,
       "tokens per window, its BOS included (default 512); 0: the whole text as one window"},
      {"score-from", true,
       "the first scored position of each window; the ones before are context only "
       "(default: half the window, much as llama.cpp's perplexity; 1 for the whole text)"},
      {"batch", true, "windows run side by side (default 1); the result does not change"},
      {"chunk", true,
       "tokens of each window per forward pass (default 512): a pass holds batch × chunk rows "
       "of logits"},
      {"no-bos", false,
       "do not start each window with what the tokenizer puts before plain text (its BOS; "
       "without a tokenizer, config.json's bos_token_id)"},
      {"compare-weight-dtype", true,
       "also run the checkpoint with these weights (bf16, f16, int8, f32) on the same windows "
       "and report how far its predictions are from --weight-dtype's: KL divergence per "
       "token and how often the most likely token agrees"},
      {"compare-model", true,
       "compare with this checkpoint instead (the same vocabulary and tokenizer: the text is "
       "tokenized once, by --model's), in --compare-weight-dtype or --weight-dtype"},
      {"compare-device", true,
       "compare with the checkpoint run on this device (cpu, cuda, cuda:N): how far a GPU's "
       "predictions are from the CPU's"},
      {"compare-backend", true,
       "compare with the checkpoint run by this CPU backend: cpu (the fast kernels) or "
       "reference (plain loops)"},
      {"json", false, "print one JSON object with the result and every window's perplexity"},
  });
  return specs;
}

struct Settings {
  LocalModelSettings local;
  std::optional<std::string> text_file;
  std::optional<std::string> ids_file;
  engine::PerplexityOptions options;
  bool bos = true;
  bool json = false;
  // --compare-weight-dtype / --compare-model: the second model, and how each is named.
  std::optional<LocalModelSettings> compared;
  std::string reference_label;
  std::string compared_label;
};

std::string WeightsName(models::WeightStorage storage) {
  return std::string(models::WeightStorageName(storage));
}

// The second model of --compare-weight-dtype, --compare-model, --compare-device and
// --compare-backend: --model's settings with those changed; nullopt when none is given.
absl::StatusOr<std::optional<LocalModelSettings>> ReadComparedModel(
    const Args& args, const LocalModelSettings& reference) {
  const std::optional<std::string> weights = args.String("compare-weight-dtype");
  const std::optional<std::string> model = args.String("compare-model");
  const std::optional<std::string> device = args.String("compare-device");
  const std::optional<std::string> backend = args.String("compare-backend");
  if (!weights && !model && !device && !backend) return std::nullopt;
  LocalModelSettings compared = reference;
  if (weights) {
    absl::StatusOr<models::WeightStorage> storage = models::ParseWeightStorage(*weights);
    if (!storage.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--compare-weight-dtype: ", storage.status().message()));
    }
    compared.load.weight_storage = *storage;
  }
  if (model) compared.model_dir = *model;
  if (device) compared.device = *device;
  if (backend) {
    if (*backend != "cpu" && *backend != "reference") {
      return absl::InvalidArgumentError(
          absl::StrCat("--compare-backend must be cpu or reference, got '", *backend, "'"));
    }
    compared.reference_backend = *backend == "reference";
  }
  if (compared.reference_backend && compared.device != "cpu") {
    return absl::InvalidArgumentError(
        "--compare-backend reference runs on the CPU only (--compare-device cpu)");
  }
  // GPU switches given for --device do not apply to a compared CPU.
  if (compared.device == "cpu") {
    compared.tensor_core_matmul = false;
    compared.cuda_graphs = false;
  }
  return compared;
}

absl::StatusOr<Settings> ReadSettings(const Args& args) {
  Settings s;
  TANDEM_ASSIGN_OR_RETURN(s.local, ReadLocalModelSettings(args));
  s.text_file = args.String("text-file");
  s.ids_file = args.String("ids-file");
  if (s.text_file.has_value() == s.ids_file.has_value()) {
    return absl::InvalidArgumentError("give exactly one of --text-file and --ids-file");
  }
  TANDEM_ASSIGN_OR_RETURN(s.options.context, args.IntIn("context", 0, int64_t{1} << 30, 512));
  if (s.options.context == 1) {
    return absl::InvalidArgumentError("--context must be 0 (the whole text) or at least 2, got 1");
  }
  TANDEM_ASSIGN_OR_RETURN(s.options.score_from, args.IntIn("score-from", 1, int64_t{1} << 30, -1));
  if (s.options.context > 0 && s.options.score_from >= s.options.context) {
    return absl::InvalidArgumentError(absl::StrCat("--score-from must be below --context (",
                                                   s.options.context, "), got ",
                                                   s.options.score_from));
  }
  TANDEM_ASSIGN_OR_RETURN(const int64_t batch, args.IntIn("batch", 1, 1024, 1));
  s.options.batch = static_cast<int32_t>(batch);
  TANDEM_ASSIGN_OR_RETURN(s.options.chunk, args.IntIn("chunk", 1, 1 << 20, 512));
  s.bos = !args.Has("no-bos");
  s.json = args.Has("json");
  TANDEM_ASSIGN_OR_RETURN(s.compared, ReadComparedModel(args, s.local));
  s.reference_label = WeightsName(s.local.load.weight_storage);
  if (s.compared) {
    s.compared_label = WeightsName(s.compared->load.weight_storage);
    // Each side named by its weights and by whatever else differs.
    const auto add = [&](const std::string& mine, const std::string& theirs) {
      if (mine == theirs) return;
      absl::StrAppend(&s.reference_label, ", ", mine);
      absl::StrAppend(&s.compared_label, ", ", theirs);
    };
    add(s.local.model_dir, s.compared->model_dir);
    add(s.local.device, s.compared->device);
    add(s.local.reference_backend ? "reference backend" : "cpu backend",
        s.compared->reference_backend ? "reference backend" : "cpu backend");
  }
  return s;
}

// A pass holds batch × rows × vocab floats of logits: past this the command refuses to start
// rather than fail (or be killed) allocating them.
constexpr double kMaxLogitsBytes = 8.0 * (int64_t{1} << 30);

// The model a comparison runs beside --model's, with its memory.
struct ComparedModel {
  LocalModel local;
  std::unique_ptr<cache::ArenaAllocator> allocator;  // goes before the model's device
};

absl::StatusOr<ComparedModel> OpenComparedModel(const Settings& settings, int32_t batch,
                                                int64_t positions) {
  // Errors name the second model: they could be either's.
  const auto named = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("the compared model, ", settings.compared_label,
                                                    ": ", status.message()));
  };
  absl::StatusOr<LocalModel> opened = OpenLocalModel(*settings.compared, /*batch_invariant=*/true);
  if (!opened.ok()) return named(opened.status());
  ComparedModel other{*std::move(opened), nullptr};
  absl::StatusOr<std::unique_ptr<cache::ArenaAllocator>> arena =
      other.local.CreateArena(engine::ArenaForSequences(*other.local.model, batch, positions));
  if (!arena.ok()) return named(arena.status());
  other.allocator = *std::move(arena);
  return other;
}

absl::Status Run(const Settings& settings) {
  TANDEM_ASSIGN_OR_RETURN(LocalModel local,
                          OpenLocalModel(settings.local, /*batch_invariant=*/true));
  const models::Model& model = *local.model;
  if (settings.text_file && local.tokenizer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--text-file needs the checkpoint's tokenizer (",
                     local.tokenizer_status.message(), "); give the text as --ids-file instead"));
  }

  TANDEM_ASSIGN_OR_RETURN(
      const std::vector<int32_t> text,
      ReadScoredText(settings.text_file, settings.ids_file, local.tokenizer.get()));
  engine::PerplexityOptions options = settings.options;
  if (settings.bos) {
    TANDEM_ASSIGN_OR_RETURN(options.prefix, PlainTextPrefix(local.tokenizer.get(), model));
  }
  TANDEM_ASSIGN_OR_RETURN(
      const engine::PerplexityWindows plan,
      engine::PlanPerplexityWindows(static_cast<int64_t>(text.size()), options));
  std::fprintf(
      stderr, "%zu tokens: %lld windows of %lld behind the prefix %s, scored from position %lld\n",
      text.size(), static_cast<long long>(plan.count), static_cast<long long>(plan.context),
      IdList(options.prefix).c_str(), static_cast<long long>(plan.score_from));
  // No more sequences than windows, none longer than the text makes them.
  options.batch = static_cast<int32_t>(std::min<int64_t>(options.batch, plan.count));
  const int64_t positions =
      std::min<int64_t>(plan.context, static_cast<int64_t>(options.prefix.size() + text.size()));
  const int64_t rows = std::min(options.chunk, positions);
  // A comparison holds a pass of logits for each model.
  const double logits_bytes = (settings.compared ? 2.0 : 1.0) * static_cast<double>(options.batch) *
                              static_cast<double>(rows) * model.config().vocab_size * sizeof(float);
  if (logits_bytes > kMaxLogitsBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a pass of ", options.batch, " windows of ", rows, " tokens would hold ",
        absl::SixDigits(logits_bytes / (int64_t{1} << 30)), " GiB of logits (vocabulary ",
        model.config().vocab_size, "); lower --chunk or --batch"));
  }
  TANDEM_ASSIGN_OR_RETURN(auto allocator, local.CreateArena(engine::ArenaForSequences(
                                              model, options.batch, positions)));
  const engine::ScoringModel scoring{&model, local.ops.get(), allocator.get(),
                                     settings.reference_label};
  // The second model, loaded before the clock starts.
  std::optional<ComparedModel> other;
  if (settings.compared) {
    TANDEM_ASSIGN_OR_RETURN(other, OpenComparedModel(settings, options.batch, positions));
  }
  // The running figure, rewritten in place on a terminal; a log gets about ten lines.
  const bool terminal = isatty(fileno(stderr));
  size_t reported_tenths = 0;
  const auto report_progress = [&](size_t done, size_t total, const std::string& figures) {
    const size_t tenths = done * 10 / total;
    if (!terminal && tenths == reported_tenths && done != total) return;
    reported_tenths = tenths;
    std::fprintf(stderr, terminal && done != total ? "\r[%zu/%zu] %s" : "\r[%zu/%zu] %s\n", done,
                 total, figures.c_str());
  };

  const engine::PerplexityResult* result = nullptr;
  std::optional<engine::PerplexityResult> alone;
  std::optional<engine::ModelComparison> comparison;
  const auto start = std::chrono::steady_clock::now();
  if (!other) {
    TANDEM_ASSIGN_OR_RETURN(
        alone, engine::MeasurePerplexity(
                   model, *local.ops, *allocator, text, options,
                   [&](size_t done, size_t total, const engine::PerplexityResult& so_far) {
                     report_progress(done, total,
                                     absl::StrFormat("perplexity %.4f", so_far.perplexity()));
                   }));
    result = &*alone;
  } else {
    const engine::ScoringModel compared{other->local.model.get(), other->local.ops.get(),
                                        other->allocator.get(), settings.compared_label};
    TANDEM_ASSIGN_OR_RETURN(
        comparison,
        engine::CompareModels(scoring, compared, text, options,
                              [&](size_t done, size_t total, double reference,
                                  double other_perplexity, const engine::ModelComparison& so_far) {
                                report_progress(
                                    done, total,
                                    absl::StrFormat("perplexity %.4f and %.4f, KL divergence %.3g",
                                                    reference, other_perplexity,
                                                    so_far.mean_divergence()));
                              }));
    result = &comparison->reference;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (settings.json) {
    nlohmann::json out = PerplexityJson(*result, /*windows=*/true);
    out["text_tokens"] = text.size();
    out["context"] = result->context;
    out["score_from"] = result->score_from;
    out["prefix"] = options.prefix;
    out["weight_dtype"] = WeightsName(settings.local.load.weight_storage);
    out["seconds"] = seconds;
    if (comparison) {
      nlohmann::json compared = PerplexityJson(comparison->compared, /*windows=*/false);
      compared["model"] = settings.compared->model_dir;
      compared["weight_dtype"] = WeightsName(settings.compared->load.weight_storage);
      compared["device"] = settings.compared->device;
      compared["backend"] = settings.compared->reference_backend ? "reference" : "cpu";
      compared["label"] = settings.compared_label;
      compared.update(DivergenceJson(*comparison));
      out["compared"] = std::move(compared);
    }
    std::cout << out.dump() << "\n";
  } else if (!comparison) {
    std::cout << PerplexityLine(*result) << "\n";
  } else {
    std::cout << settings.reference_label << ": " << PerplexityLine(*result) << "\n"
              << settings.compared_label << ": " << PerplexityLine(comparison->compared) << "\n"
              << DivergenceLine(*comparison) << "\n";
  }
  std::fprintf(stderr, "ran %lld tokens (%lld scored)%s in %.2f s: %.1f tokens/s\n",
               static_cast<long long>(result->tokens_run),
               static_cast<long long>(result->scored_tokens),
               comparison ? " through each model" : "", seconds,
               result->tokens_run / std::max(seconds, 1e-9));
  return absl::OkStatus();
}

}  // namespace

int RunPerplexity(int argc, char** argv) {
  const std::string synopsis =
      "[--model DIR] (--text-file FILE | --ids-file FILE) [--context N] [--score-from K] "
      "[--batch B] [--chunk C] [--no-bos] [--weight-dtype D] [--compare-weight-dtype D] "
      "[--compare-model DIR] [--compare-device DEV] [--compare-backend B] [--json]";
  return RunCommand<Settings>("perplexity", synopsis, PerplexityFlags(), argc, argv, ReadSettings,
                              Run);
}

}  // namespace tandem::cli
