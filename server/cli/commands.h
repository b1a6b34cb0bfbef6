// The `tandem` binary's subcommands. Each takes argv with argv[0] = the subcommand name and
// returns the process exit code (0 success, 1 runtime failure, 2 bad usage).
#ifndef TANDEM_SERVER_CLI_COMMANDS_H_
#define TANDEM_SERVER_CLI_COMMANDS_H_

namespace tandem::cli {

int Main(int argc, char** argv);

int RunGenerate(int argc, char** argv);
int RunPerplexity(int argc, char** argv);
int RunDevices(int argc, char** argv);
int RunBenchEngine(int argc, char** argv);
int RunServe(int argc, char** argv);
int RunChat(int argc, char** argv);
int RunBench(int argc, char** argv);
int RunRenderTemplate(int argc, char** argv);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_COMMANDS_H_
