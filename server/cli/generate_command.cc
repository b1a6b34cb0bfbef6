// `tandem generate`: load a checkpoint, run a prompt, print the continuation.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cache/arena_allocator.h"
#include "engine/generator.h"
#include "kernels/backends.h"
#include "models/model.h"
#include "models/npy.h"
#include "models/status_macros.h"
#include "models/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/cli/args.h"
#include "server/cli/bundled_model.h"
#include "server/cli/commands.h"
#include "server/cli/model_flags.h"

namespace tandem::cli {
namespace {

const std::vector<FlagSpec>& GenerateFlags() {
  static const std::vector<FlagSpec> specs = {
      {"model", true,
       "checkpoint directory (config.json, *.safetensors, tokenizer); default: the bundled "
       "model, bundled/tandem-tiny-chat"},
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
      {"page-size", true, "tokens per KV page (default 16)"},
      {"prefill-chunk", true, "prompt tokens per prefill step (default 512)"},
      {"threads", true, "compute threads (default: all cores)"},
      TensorParallelFlagSpec(),
      WeightDTypeFlagSpec(),
      DeviceFlagSpec(),
      GpuTensorCoresFlagSpec(),
      GpuGraphsFlagSpec(),
      {"backend", true, "on the CPU: cpu (default) or reference (slow plain loops)"},
      {"zamba2-dt-clamp", true,
       "none (default, the model as trained) or time_step_min (as transformers' CPU path)"},
      {"help", false, "show this help"},
  };
  return specs;
}

struct Settings {
  std::string model_dir;
  std::optional<std::string> prompt;
  std::vector<int32_t> prompt_ids;
  engine::GenerateOptions options;
  std::optional<std::string> dump_logits;
  bool json = false;
  models::LoadOptions load;
  int threads = 0;
  bool reference_backend = false;
  std::string device = "cpu";
  int32_t tensor_parallel = 1;
  bool tensor_core_matmul = false;
  bool cuda_graphs = false;
};

absl::StatusOr<Settings> ReadSettings(const Args& args) {
  Settings s;
  if (std::optional<std::string> model = args.String("model")) {
    s.model_dir = *model;
  } else {
    TANDEM_ASSIGN_OR_RETURN(s.model_dir, BundledModelDir());
  }
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

  TANDEM_ASSIGN_OR_RETURN(auto page, args.Int("page-size"));
  if (page && (*page <= 0 || *page > 65536)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--page-size must be in [1, 65536], got ", *page));
  }
  s.load.page_tokens = static_cast<int32_t>(page.value_or(16));
  TANDEM_ASSIGN_OR_RETURN(s.load.weight_storage, ReadWeightDType(args));
  TANDEM_ASSIGN_OR_RETURN(auto chunk, args.Int("prefill-chunk"));
  if (chunk && *chunk <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefill-chunk must be positive, got ", *chunk));
  }
  s.options.prefill_chunk = chunk.value_or(512);
  TANDEM_ASSIGN_OR_RETURN(auto threads, args.Int("threads"));
  if (threads && (*threads < 0 || *threads > 1024)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads must be in [0, 1024], got ", *threads));
  }
  s.threads = static_cast<int>(threads.value_or(0));
  const std::string backend = args.String("backend").value_or("cpu");
  if (backend != "cpu" && backend != "reference") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend must be cpu or reference, got '", backend, "'"));
  }
  s.reference_backend = backend == "reference";
  s.device = args.String("device").value_or("cpu");
  if (s.reference_backend && s.device != "cpu") {
    return absl::InvalidArgumentError("--backend reference runs on the CPU only (--device cpu)");
  }
  TANDEM_ASSIGN_OR_RETURN(s.tensor_core_matmul, ReadGpuTensorCores(args, s.device));
  TANDEM_ASSIGN_OR_RETURN(s.cuda_graphs, ReadGpuGraphs(args, s.device));
  TANDEM_ASSIGN_OR_RETURN(s.tensor_parallel, ReadTensorParallel(args, s.device));
  if (s.tensor_parallel > 1 && s.reference_backend) {
    return absl::InvalidArgumentError(
        "--tensor-parallel runs the fast CPU backend (--backend cpu), not the reference one");
  }
  if (s.tensor_parallel > 1) s.threads = ThreadsPerWorker(s.threads, s.tensor_parallel);
  const std::string clamp = args.String("zamba2-dt-clamp").value_or("none");
  if (clamp == "time_step_min") {
    s.load.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  } else if (clamp != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--zamba2-dt-clamp must be none or time_step_min, got '", clamp, "'"));
  }
  return s;
}

absl::Status Run(const Settings& settings) {
  // Before the model: weights loaded onto a device are freed with it.
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<engine::ComputeDevice> device,
                          OpenDevice(settings.device));
  models::LoadOptions load = settings.load;
  load.placer = device->weight_placer();
  // A terminal gets a progress line rewritten in place; logs get one line when loading ends.
  if (isatty(fileno(stderr))) {
    load.progress = [](const std::string& step) {
      std::fprintf(stderr, "\rloading model: %-24s", step.c_str());
      if (step == "done") std::fprintf(stderr, "\n");
    };
  }
  const auto load_start = std::chrono::steady_clock::now();
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<const models::Model> model,
                          models::LoadModel(settings.model_dir, load, settings.tensor_parallel,
                                            CpuWorkerOps(settings.threads, false)));
  std::fprintf(
      stderr, "loaded %s: %s, %d layers, %.1f MB of weights (%s) on %s in %.2f s\n",
      settings.model_dir.c_str(), model->config().architecture.c_str(), model->config().num_layers,
      model->weight_bytes() / 1e6,
      std::string(models::WeightStorageName(settings.load.weight_storage)).c_str(),
      device->name().c_str(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  std::unique_ptr<models::Tokenizer> tokenizer;
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> loaded =
      models::LoadTokenizer(settings.model_dir);
  if (loaded.ok()) {
    tokenizer = *std::move(loaded);
  } else if (settings.prompt) {
    return loaded.status();  // text needs the tokenizer; token ids do not
  }

  std::vector<int32_t> prompt = settings.prompt_ids;
  if (settings.prompt) {
    TANDEM_ASSIGN_OR_RETURN(prompt, tokenizer->Encode(*settings.prompt, true));
    if (prompt.empty()) return absl::InvalidArgumentError("--prompt encodes to no tokens");
  }

  const models::StateLayout& layout = model->layout();
  const int64_t positions = static_cast<int64_t>(prompt.size()) + settings.options.max_new_tokens;
  cache::ArenaConfig arena;
  arena.kv_page_bytes = layout.kv_page_bytes();
  arena.kv_pages = model->config().num_attention_layers > 0 ? layout.PagesFor(positions) : 0;
  arena.ssm_block_bytes = layout.ssm_block_bytes();
  arena.ssm_blocks = model->config().num_ssm_layers > 0 ? 1 : 0;
  cache::BackingFactory state_memory;
  if (!device->on_host()) {
    state_memory = [&device](size_t bytes) { return device->CreateStateBacking(bytes); };
  }
  TANDEM_ASSIGN_OR_RETURN(auto allocator, cache::ArenaAllocator::Create(arena, state_memory));

  std::unique_ptr<kernels::Ops> ops;
  if (settings.reference_backend) {
    ops = kernels::MakeReferenceOps();
  } else {
    TANDEM_ASSIGN_OR_RETURN(ops,
                            device->CreateOps({.threads = settings.threads,
                                               .tensor_core_matmul = settings.tensor_core_matmul,
                                               .cuda_graphs = settings.cuda_graphs}));
  }
  engine::GenerateOptions options = settings.options;
  options.stop_token_ids = model->config().eos_token_ids;
  TANDEM_ASSIGN_OR_RETURN(engine::GenerateResult result,
                          engine::Generate(*model, *ops, *allocator, prompt, options));

  if (settings.dump_logits) {
    const int64_t rows = static_cast<int64_t>(result.output_ids.size());
    const int64_t shape[2] = {rows, int64_t{model->config().vocab_size}};
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
  absl::StatusOr<Args> args = Args::Parse(argc, argv, GenerateFlags());
  if (args.ok() && args->Has("help")) {
    std::cout << Usage("generate", synopsis, GenerateFlags());
    return 0;
  }
  absl::StatusOr<Settings> settings =
      args.ok() ? ReadSettings(*args) : absl::StatusOr<Settings>(args.status());
  if (!settings.ok()) {
    std::cerr << "tandem generate: " << settings.status().message() << "\n\n"
              << Usage("generate", synopsis, GenerateFlags());
    return 2;
  }
  if (absl::Status status = Run(*settings); !status.ok()) {
    std::cerr << "tandem generate: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tandem::cli
