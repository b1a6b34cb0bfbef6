// The `tandem` binary: a thin dispatcher over subcommands (server/cli/).
#include "server/cli/commands.h"

int main(int argc, char** argv) { return tandem::cli::Main(argc, argv); }
