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
#include "engine/perplexity.h"
#include "engine/sequence_memory.h"
#include "models/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/cli/args.h"
#include "server/cli/commands.h"
#include "server/cli/local_model.h"

namespace tandem::cli {
namespace {

const std::vector<FlagSpec>& PerplexityFlags() {
  static const std::vector<FlagSpec> specs = [] {
    std::vector<FlagSpec> all = LocalModelFlagSpecs();
    const std::vector<FlagSpec> own = {
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
        {"json", false, "print one JSON object with the result and every window's perplexity"},
    };
    all.insert(all.begin() + 1, own.begin(), own.end());  // after --model
    all.push_back({"help", false, "show this help"});
    return all;
  }();
  return specs;
}

struct Settings {
  LocalModelSettings local;
  std::optional<std::string> text_file;
  std::optional<std::string> ids_file;
  engine::PerplexityOptions options;
  bool bos = true;
  bool json = false;
};

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
  return s;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot open '", path, "'"));
  std::stringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(flag, ": cannot read '", path, "'"));
  return contents.str();
}

// "1, 2 3\n4" -> {1, 2, 3, 4}; anything but digits, commas and whitespace is named.
absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& path, const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c) || c == ',') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end == i || end - i > 10 ||
        (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) &&
         text[end] != ',')) {
      size_t word_end = i;
      while (word_end < text.size() && word_end - i < 20 &&
             !std::isspace(static_cast<unsigned char>(text[word_end])) && text[word_end] != ',') {
        ++word_end;
      }
      return absl::InvalidArgumentError(absl::StrCat("--ids-file '", path, "': entry ", ids.size(),
                                                     " ('", text.substr(i, word_end - i),
                                                     "' at byte ", i, ") is not a token id"));
    }
    const int64_t id = std::stoll(text.substr(i, end - i));
    if (id > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ids-file '", path, "': entry ", ids.size(), " (", id, ") is too large"));
    }
    ids.push_back(static_cast<int32_t>(id));
    i = end;
  }
  return ids;
}

// What the tokenizer puts before plain text (usually just BOS): the ids Encode adds in front of
// a short text's own (a tokenizer that also appends an EOS keeps it to itself). Without a
// tokenizer, the checkpoint's BOS if it names one.
absl::StatusOr<std::vector<int32_t>> PlainTextPrefix(const models::Tokenizer* tokenizer,
                                                     const models::Model& model) {
  if (tokenizer == nullptr) {
    const int32_t bos = model.config().bos_token_id;
    if (bos >= 0 && bos < model.config().vocab_size) return std::vector<int32_t>{bos};
    return std::vector<int32_t>{};
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<int32_t> with, tokenizer->Encode("a", true));
  TANDEM_ASSIGN_OR_RETURN(const std::vector<int32_t> plain, tokenizer->Encode("a", false));
  const auto text = std::search(with.begin(), with.end(), plain.begin(), plain.end());
  if (plain.empty() || text == with.end()) return std::vector<int32_t>{};
  return std::vector<int32_t>(with.begin(), text);
}

// "[1, 2]", "[]": how the prefix is reported.
std::string IdList(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) absl::StrAppend(&out, i > 0 ? ", " : "", ids[i]);
  return out + "]";
}

// A pass holds batch × rows × vocab floats of logits: past this the command refuses to start
// rather than fail (or be killed) allocating them.
constexpr double kMaxLogitsBytes = 8.0 * (int64_t{1} << 30);

absl::Status Run(const Settings& settings) {
  TANDEM_ASSIGN_OR_RETURN(LocalModel local,
                          OpenLocalModel(settings.local, /*batch_invariant=*/true));
  const models::Model& model = *local.model;
  if (settings.text_file && local.tokenizer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--text-file needs the checkpoint's tokenizer (",
                     local.tokenizer_status.message(), "); give the text as --ids-file instead"));
  }

  std::vector<int32_t> text;
  if (settings.text_file) {
    TANDEM_ASSIGN_OR_RETURN(const std::string contents,
                            ReadWholeFile("--text-file", *settings.text_file));
    absl::StatusOr<std::vector<int32_t>> encoded = local.tokenizer->Encode(contents, false);
    if (!encoded.ok()) {
      return absl::Status(
          encoded.status().code(),
          absl::StrCat("--text-file '", *settings.text_file, "': ", encoded.status().message()));
    }
    text = *std::move(encoded);
  } else {
    TANDEM_ASSIGN_OR_RETURN(const std::string contents,
                            ReadWholeFile("--ids-file", *settings.ids_file));
    TANDEM_ASSIGN_OR_RETURN(text, ParseIds(*settings.ids_file, contents));
  }
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
  const double logits_bytes = static_cast<double>(options.batch) * static_cast<double>(rows) *
                              model.config().vocab_size * sizeof(float);
  if (logits_bytes > kMaxLogitsBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a pass of ", options.batch, " windows of ", rows, " tokens would hold ",
        absl::SixDigits(logits_bytes / (int64_t{1} << 30)), " GiB of logits (vocabulary ",
        model.config().vocab_size, "); lower --chunk or --batch"));
  }
  TANDEM_ASSIGN_OR_RETURN(auto allocator, local.CreateArena(engine::ArenaForSequences(
                                              model, options.batch, positions)));
  const auto start = std::chrono::steady_clock::now();
  // The running figure, rewritten in place on a terminal; a log gets about ten lines.
  const bool terminal = isatty(fileno(stderr));
  size_t reported_tenths = 0;
  const auto progress = [&](size_t done, size_t total, const engine::PerplexityResult& so_far) {
    const size_t tenths = done * 10 / total;
    if (!terminal && tenths == reported_tenths && done != total) return;
    reported_tenths = tenths;
    std::fprintf(
        stderr,
        terminal && done != total ? "\r[%zu/%zu] perplexity %.4f" : "\r[%zu/%zu] perplexity %.4f\n",
        done, total, so_far.perplexity());
  };
  TANDEM_ASSIGN_OR_RETURN(
      const engine::PerplexityResult result,
      engine::MeasurePerplexity(model, *local.ops, *allocator, text, options, progress));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (settings.json) {
    nlohmann::json out;
    out["perplexity"] = result.perplexity();
    out["perplexity_stderr"] = result.perplexity_stderr();
    out["mean_nll"] = result.mean_nll();
    out["mean_nll_stderr"] = result.mean_nll_stderr();
    out["scored_tokens"] = result.scored_tokens;
    out["text_tokens"] = text.size();
    out["context"] = result.context;
    out["score_from"] = result.score_from;
    out["prefix"] = options.prefix;
    out["weight_dtype"] = models::WeightStorageName(settings.local.load.weight_storage);
    out["seconds"] = seconds;
    out["tokens_run"] = result.tokens_run;
    nlohmann::json windows = nlohmann::json::array();
    for (const engine::WindowScore& w : result.windows) {
      windows.push_back(
          {{"begin", w.begin},
           {"text_tokens", w.text_tokens},
           {"scored_tokens", w.scored_tokens},
           {"perplexity", std::exp(w.nll_sum / static_cast<double>(w.scored_tokens))}});
    }
    out["windows"] = std::move(windows);
    std::cout << out.dump() << "\n";
  } else {
    std::printf("perplexity %.4f ± %.4f over %lld tokens (mean NLL %.5f nats per token)\n",
                result.perplexity(), result.perplexity_stderr(),
                static_cast<long long>(result.scored_tokens), result.mean_nll());
  }
  std::fprintf(stderr, "ran %lld tokens (%lld scored) in %.2f s: %.1f tokens/s\n",
               static_cast<long long>(result.tokens_run),
               static_cast<long long>(result.scored_tokens), seconds,
               result.tokens_run / std::max(seconds, 1e-9));
  return absl::OkStatus();
}

}  // namespace

int RunPerplexity(int argc, char** argv) {
  const std::string synopsis =
      "[--model DIR] (--text-file FILE | --ids-file FILE) [--context N] [--score-from K] "
      "[--batch B] [--chunk C] [--no-bos] [--weight-dtype D] [--json]";
  absl::StatusOr<Args> args = Args::Parse(argc, argv, PerplexityFlags());
  if (args.ok() && args->Has("help")) {
    std::cout << Usage("perplexity", synopsis, PerplexityFlags());
    return 0;
  }
  absl::StatusOr<Settings> settings =
      args.ok() ? ReadSettings(*args) : absl::StatusOr<Settings>(args.status());
  if (!settings.ok()) {
    std::cerr << "tandem perplexity: " << settings.status().message() << "\n\n"
              << Usage("perplexity", synopsis, PerplexityFlags());
    return 2;
  }
  if (absl::Status status = Run(*settings); !status.ok()) {
    std::cerr << "tandem perplexity: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tandem::cli
