// flashlab — the command-line tool: `flashlab bench` (check and time implementations) and
// `flashlab info` (build and machine). See docs/cli.md.
#include <cstdio>
#include <exception>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace flashlab::cli;
  if (argc < 2) {
    std::fputs(tool_usage(), stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "bench") return bench_main(argc, argv, 2);
    if (cmd == "info") return info_main(argc, argv, 2);
  } catch (const std::exception& e) {  // a bug, not user input: say so instead of aborting
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return 3;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(tool_usage(), stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("flashlab %s\n", flashlab::build_info().version.c_str());
    return 0;
  }
  std::fprintf(stderr, "error: invalid_argument: unknown command '%s'\n\n%s", cmd.c_str(),
               tool_usage());
  return 2;
}
