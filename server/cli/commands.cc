#include "server/cli/commands.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "server/cli/simulate_command.h"

namespace tandem::cli {
namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"serve", RunServe, "serve a checkpoint over gRPC (tandem.v1.Tandem, health, reflection)"},
    {"chat", RunChat, "chat with a tandem server: stdin lines in, streamed answers out"},
    {"bench", RunBench, "load-test a tandem server over gRPC (sessions or a trace)"},
    {"generate", RunGenerate, "run a checkpoint on a prompt and print the generated text"},
    {"perplexity", RunPerplexity, "measure a checkpoint's perplexity on a text"},
    {"simulate", RunSimulate, "replay a trace or workload through the prefix cache policies"},
    {"simulate-alloc", RunSimulateAlloc, "replay a workload through the memory allocators"},
    {"bench-engine", RunBenchEngine,
     "replay a workload through the real engine under each cache policy"},
    {"devices", RunDevices, "list the CUDA devices this build can use"},
    {"render-template", RunRenderTemplate,
     "developer tool: render a chat template with a JSON context (tools/chat_templates)"},
};

void PrintHelp(FILE* out) {
  std::fprintf(out, "Usage: tandem COMMAND [flags]   (tandem COMMAND --help for its flags)\n\n");
  std::fprintf(out, "Commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-16s %s\n", c.name, c.summary);
}

}  // namespace

int Main(int argc, char** argv) {
  if (argc < 2) {
    PrintHelp(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintHelp(stdout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "tandem: unknown command '%s'\n\n", name.c_str());
  PrintHelp(stderr);
  return 2;
}

}  // namespace tandem::cli
