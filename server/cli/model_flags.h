// Flags that choose how a model's weights are kept, shared by serve, generate and bench-engine.
#ifndef TANDEM_SERVER_CLI_MODEL_FLAGS_H_
#define TANDEM_SERVER_CLI_MODEL_FLAGS_H_

#include "absl/status/statusor.h"
#include "models/weight_store.h"
#include "server/cli/args.h"

namespace tandem::cli {

// --weight-dtype: auto (the checkpoint's bf16/f16 as stored, else fp32), f32, bf16, f16 or int8.
FlagSpec WeightDTypeFlagSpec();
// The flag's value (kAuto when absent); InvalidArgument naming the flag and the choices.
absl::StatusOr<models::WeightStorage> ReadWeightDType(const Args& args);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_MODEL_FLAGS_H_
