// The `tandem` binary: a thin dispatcher over subcommands (server/cli/).
#include "engine/cache_model_spec.h"
#include "server/cli/commands.h"
#include "server/cli/simulate_command.h"

int main(int argc, char** argv) {
  // `tandem simulate --model-spec DIR` reads the model's dimensions through engine/.
  tandem::cli::SetModelDirLoader(tandem::engine::LoadCacheModelSpec);
  return tandem::cli::Main(argc, argv);
}
