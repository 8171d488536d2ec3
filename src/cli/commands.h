// src/cli/commands.h — the subcommands of the `flashlab` tool. Each returns the exit status.
#pragma once

namespace flashlab {
namespace cli {

int bench_main(int argc, char** argv, int first);  // bench.cpp
int info_main(int argc, char** argv, int first);   // info.cpp

}  // namespace cli
}  // namespace flashlab
