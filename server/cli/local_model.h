// A checkpoint loaded in this process for a one-shot command (`tandem generate`,
// `tandem perplexity`): its flags, the device, the weights, the tokenizer and a backend, without
// the engine's scheduler or cache.
#ifndef TANDEM_SERVER_CLI_LOCAL_MODEL_H_
#define TANDEM_SERVER_CLI_LOCAL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/arena_allocator.h"
#include "engine/compute_device.h"
#include "kernels/ops.h"
#include "models/model.h"
#include "models/tokenizer.h"
#include "server/cli/args.h"

namespace tandem::cli {

// The flags that pick and place the model: --model, --threads, --backend, --device, the GPU
// switches, --tensor-parallel, --weight-dtype, --zamba2-dt-clamp (and --page-size).
std::vector<FlagSpec> LocalModelFlagSpecs();
// A command's flags: --model, then `own`, then the other model flags, then --help.
std::vector<FlagSpec> WithLocalModelFlags(const std::vector<FlagSpec>& own);

struct LocalModelSettings {
  std::string model_dir;
  models::LoadOptions load;
  int threads = 0;
  bool reference_backend = false;
  std::string device = "cpu";
  int32_t tensor_parallel = 1;
  bool tensor_core_matmul = false;
  bool cuda_graphs = false;
};

// Those flags' values; InvalidArgument names the flag at fault.
absl::StatusOr<LocalModelSettings> ReadLocalModelSettings(const Args& args);

struct LocalModel {
  // Declared first so it goes last: weights loaded onto a device are freed with the model.
  std::unique_ptr<engine::ComputeDevice> device;
  std::shared_ptr<const models::Model> model;
  // Null when the checkpoint has none; tokenizer_status then says why.
  std::unique_ptr<models::Tokenizer> tokenizer;
  absl::Status tokenizer_status;
  std::unique_ptr<kernels::Ops> ops;

  // The arena `config` (engine::ArenaForSequences) in the device's memory.
  absl::StatusOr<std::unique_ptr<cache::ArenaAllocator>> CreateArena(
      const cache::ArenaConfig& config) const;
};

// Loads the checkpoint (reporting progress and a summary line on stderr) and creates the
// backend; `batch_invariant` as engine::ComputeOptions.
absl::StatusOr<LocalModel> OpenLocalModel(const LocalModelSettings& settings,
                                          bool batch_invariant = false);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_LOCAL_MODEL_H_
