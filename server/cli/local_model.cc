#include "server/cli/local_model.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "kernels/backends.h"
#include "models/status_macros.h"
#include "server/cli/bundled_model.h"
#include "server/cli/model_flags.h"

namespace tandem::cli {

std::vector<FlagSpec> LocalModelFlagSpecs() {
  return {
      {"model", true,
       "checkpoint directory (config.json, *.safetensors, tokenizer); default: the bundled "
       "model, bundled/tandem-tiny-chat"},
      {"page-size", true, "tokens per KV page (default 16)"},
      {"threads", true, "compute threads (default: all cores)"},
      TensorParallelFlagSpec(),
      WeightDTypeFlagSpec(),
      DeviceFlagSpec(),
      GpuTensorCoresFlagSpec(),
      GpuGraphsFlagSpec(),
      {"backend", true, "on the CPU: cpu (default) or reference (slow plain loops)"},
      {"zamba2-dt-clamp", true,
       "none (default, the model as trained) or time_step_min (as transformers' CPU path)"},
  };
}

std::vector<FlagSpec> WithLocalModelFlags(const std::vector<FlagSpec>& own) {
  std::vector<FlagSpec> all = LocalModelFlagSpecs();
  all.insert(all.begin() + 1, own.begin(), own.end());  // after --model
  all.push_back({"help", false, "show this help"});
  return all;
}

absl::StatusOr<LocalModelSettings> ReadLocalModelSettings(const Args& args) {
  LocalModelSettings s;
  if (std::optional<std::string> model = args.String("model")) {
    s.model_dir = *model;
  } else {
    TANDEM_ASSIGN_OR_RETURN(s.model_dir, BundledModelDir());
  }
  TANDEM_ASSIGN_OR_RETURN(auto page, args.Int("page-size"));
  if (page && (*page <= 0 || *page > 65536)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--page-size must be in [1, 65536], got ", *page));
  }
  s.load.page_tokens = static_cast<int32_t>(page.value_or(16));
  TANDEM_ASSIGN_OR_RETURN(s.load.weight_storage, ReadWeightDType(args));
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

absl::StatusOr<std::unique_ptr<cache::ArenaAllocator>> LocalModel::CreateArena(
    const cache::ArenaConfig& config) const {
  cache::BackingFactory state_memory;
  if (!device->on_host()) {
    engine::ComputeDevice* on = device.get();
    state_memory = [on](size_t bytes) { return on->CreateStateBacking(bytes); };
  }
  return cache::ArenaAllocator::Create(config, state_memory);
}

absl::StatusOr<LocalModel> OpenLocalModel(const LocalModelSettings& settings,
                                          bool batch_invariant) {
  LocalModel local;
  TANDEM_ASSIGN_OR_RETURN(local.device, OpenDevice(settings.device));
  models::LoadOptions load = settings.load;
  load.placer = local.device->weight_placer();
  // A terminal gets a progress line rewritten in place; logs get one line when loading ends.
  if (isatty(fileno(stderr))) {
    load.progress = [](const std::string& step) {
      std::fprintf(stderr, "\rloading model: %-24s", step.c_str());
      if (step == "done") std::fprintf(stderr, "\n");
    };
  }
  const auto load_start = std::chrono::steady_clock::now();
  TANDEM_ASSIGN_OR_RETURN(local.model,
                          models::LoadModel(settings.model_dir, load, settings.tensor_parallel,
                                            CpuWorkerOps(settings.threads, batch_invariant)));
  std::fprintf(
      stderr, "loaded %s: %s, %d layers, %.1f MB of weights (%s) on %s in %.2f s\n",
      settings.model_dir.c_str(), local.model->config().architecture.c_str(),
      local.model->config().num_layers, local.model->weight_bytes() / 1e6,
      std::string(models::WeightStorageName(settings.load.weight_storage)).c_str(),
      local.device->name().c_str(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer =
      models::LoadTokenizer(settings.model_dir);
  if (tokenizer.ok()) {
    local.tokenizer = *std::move(tokenizer);
  } else {
    local.tokenizer_status = tokenizer.status();
  }

  if (settings.reference_backend) {
    local.ops = kernels::MakeReferenceOps();
  } else {
    TANDEM_ASSIGN_OR_RETURN(
        local.ops, local.device->CreateOps({.threads = settings.threads,
                                            .batch_invariant = batch_invariant,
                                            .tensor_core_matmul = settings.tensor_core_matmul,
                                            .cuda_graphs = settings.cuda_graphs}));
  }
  return local;
}

}  // namespace tandem::cli
