// `tandem generate`: load a checkpoint, run a prompt, print the continuation.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/generator.h"
#include "engine/sequence_memory.h"
#include "models/model.h"
#include "models/npy.h"
#include "models/status_macros.h"
#include "models/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/cli/args.h"
#include "server/cli/command_main.h"
#include "server/cli/commands.h"
#include "server/cli/local_model.h"

namespace tandem::cli {
namespace {

const std::vector<FlagSpec>& GenerateFlags() {
  static const std::vector<FlagSpec> specs = WithLocalModelFlags({
      {"prompt", true, "prompt text (encoded with the checkpoint's tokenizer)"},
      {"prompt-ids", true, "prompt as comma-separated token ids, e.g. 1,2,3"},
      {"max-new-tokens", true, "tokens to generate (default 16)"},
      {"greedy", false, "always pick the most likely token (the default)"},
      {"temperature", true, "sample at this temperature (> 0)"},
      {"top-p", true, "nucleus sampling: keep the smallest set with this probability"},
      {"top-k", true, "sample among the k most likely tokens (0 = all)"},
      {"seed", true, "sampling seed (default 0): same seed, same output"},
      {"dump-logits", true, "write float32 .npy [N, vocab]: row i = logits of output token i"},
      {"json", false, "print one JSON object with prompt_ids, output_ids and text"},
      {"prefill-chunk", true, "prompt tokens per prefill step (default 512)"},
  });
  return specs;
}

struct Settings {
  LocalModelSettings local;
  std::optional<std::string> prompt;
  std::vector<int32_t> prompt_ids;
  engine::GenerateOptions options;
  std::optional<std::string> dump_logits;
  bool json = false;
};

absl::StatusOr<Settings> ReadSettings(const Args& args) {
  Settings s;
  TANDEM_ASSIGN_OR_RETURN(s.local, ReadLocalModelSettings(args));
  s.prompt = args.String("prompt");
  TANDEM_ASSIGN_OR_RETURN(auto ids, args.IntList("prompt-ids"));
  if (s.prompt.has_value() == ids.has_value()) {
    return absl::InvalidArgumentError("give exactly one of --prompt and --prompt-ids");
  }
  if (ids) {
    for (int64_t id : *ids) {
      if (id < 0 || id > INT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat("--prompt-ids: ", id, " is not a valid token id"));
      }
      s.prompt_ids.push_back(static_cast<int32_t>(id));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(auto max_new, args.Int("max-new-tokens"));
  if (max_new && (*max_new < 0 || *max_new > 1'000'000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-new-tokens must be in [0, 1000000], got ", *max_new));
  }
  s.options.max_new_tokens = static_cast<int32_t>(max_new.value_or(16));

  const bool sampling =
      args.Has("temperature") || args.Has("top-p") || args.Has("top-k") || args.Has("seed");
  if (args.Has("greedy") && sampling) {
    return absl::InvalidArgumentError(
        "--greedy cannot be combined with --temperature, --top-p, --top-k or --seed");
  }
  engine::SamplingParams& p = s.options.sampling;
  p.greedy = !sampling;
  TANDEM_ASSIGN_OR_RETURN(auto temperature, args.Double("temperature"));
  TANDEM_ASSIGN_OR_RETURN(auto top_p, args.Double("top-p"));
  TANDEM_ASSIGN_OR_RETURN(auto top_k, args.Int("top-k"));
  TANDEM_ASSIGN_OR_RETURN(auto seed, args.Int("seed"));
  p.temperature = static_cast<float>(temperature.value_or(1.0));
  p.top_p = static_cast<float>(top_p.value_or(1.0));
  if (top_k && (*top_k < 0 || *top_k > INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("--top-k must be >= 0, got ", *top_k));
  }
  p.top_k = static_cast<int32_t>(top_k.value_or(0));
  p.seed = static_cast<uint64_t>(seed.value_or(0));
  if (auto status = engine::ValidateSamplingParams(p); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: ", status.message()));
  }

  s.dump_logits = args.String("dump-logits");
  s.options.record_logits = s.dump_logits.has_value();
  s.json = args.Has("json");

  TANDEM_ASSIGN_OR_RETURN(auto chunk, args.Int("prefill-chunk"));
  if (chunk && *chunk <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefill-chunk must be positive, got ", *chunk));
  }
  s.options.prefill_chunk = chunk.value_or(512);
  return s;
}

absl::Status Run(const Settings& settings) {
  TANDEM_ASSIGN_OR_RETURN(LocalModel local, OpenLocalModel(settings.local));
  const models::Model& model = *local.model;
  // Text needs the tokenizer; token ids do not.
  if (settings.prompt && local.tokenizer == nullptr) return local.tokenizer_status;
  const models::Tokenizer* tokenizer = local.tokenizer.get();

  std::vector<int32_t> prompt = settings.prompt_ids;
  if (settings.prompt) {
    TANDEM_ASSIGN_OR_RETURN(prompt, tokenizer->Encode(*settings.prompt, true));
    if (prompt.empty()) return absl::InvalidArgumentError("--prompt encodes to no tokens");
  }

  const int64_t positions = static_cast<int64_t>(prompt.size()) + settings.options.max_new_tokens;
  TANDEM_ASSIGN_OR_RETURN(auto allocator,
                          local.CreateArena(engine::ArenaForSequences(model, 1, positions)));
  engine::GenerateOptions options = settings.options;
  options.stop_token_ids = model.config().eos_token_ids;
  TANDEM_ASSIGN_OR_RETURN(engine::GenerateResult result,
                          engine::Generate(model, *local.ops, *allocator, prompt, options));

  if (settings.dump_logits) {
    const int64_t rows = static_cast<int64_t>(result.output_ids.size());
    const int64_t shape[2] = {rows, int64_t{model.config().vocab_size}};
    TANDEM_RETURN_IF_ERROR(models::WriteNpy(*settings.dump_logits, shape, result.logits));
  }
  const std::string text = tokenizer ? tokenizer->Decode(result.output_ids, true) : "";
  if (settings.json) {
    nlohmann::json out;
    out["prompt_ids"] = prompt;
    out["output_ids"] = result.output_ids;
    out["text"] = text;
    out["finish_reason"] =
        result.finish == engine::GenerateResult::Finish::kStop ? "stop" : "length";
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << text << "\n";
  }
  const double decode_tokens = result.output_ids.empty() ? 0 : result.output_ids.size() - 1;
  std::fprintf(stderr, "prompt %zu tokens in %.3f s (%.1f tok/s), %zu new tokens (%.1f tok/s)\n",
               prompt.size(), result.prefill_seconds,
               prompt.size() / std::max(result.prefill_seconds, 1e-9), result.output_ids.size(),
               decode_tokens / std::max(result.decode_seconds, 1e-9));
  return absl::OkStatus();
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  const std::string synopsis =
      "[--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) --max-new-tokens N "
      "[--greedy | --temperature T --top-p P --top-k K --seed S] [--dump-logits FILE.npy] "
      "[--json]";
  return RunCommand<Settings>("generate", synopsis, GenerateFlags(), argc, argv, ReadSettings, Run);
}

}  // namespace tandem::cli
