// `flashlab info`: what this build contains and what this machine can run.
#include <omp.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "flashlab/flashlab.h"
#include "flashlab_build_config.h"

namespace flashlab {
namespace cli {
namespace {

// Instruction-set extensions of the CPU we are running on (the build may use fewer: cpu flags).
std::string runtime_cpu_features() {
  struct Feature {
    const char* name;
    bool present;
  };
  __builtin_cpu_init();
  const Feature features[] = {
      {"sse4.2", __builtin_cpu_supports("sse4.2") != 0},
      {"avx", __builtin_cpu_supports("avx") != 0},
      {"avx2", __builtin_cpu_supports("avx2") != 0},
      {"fma", __builtin_cpu_supports("fma") != 0},
      {"avx512f", __builtin_cpu_supports("avx512f") != 0},
      {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
      {"avx512vl", __builtin_cpu_supports("avx512vl") != 0},
      {"avx512bf16", __builtin_cpu_supports("avx512bf16") != 0},
  };
  std::string s;
  for (const Feature& f : features)
    if (f.present) s += (s.empty() ? "" : " ") + std::string(f.name);
  return s.empty() ? "(none detected)" : s;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

}  // namespace

int info_main(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("usage: flashlab info\n\nPrints the version, build configuration, "
                  "implementations and CUDA devices.\n");
      return 0;
    }
    std::fprintf(stderr, "error: invalid_argument: unknown option '%s' (flashlab info takes none)\n",
                 a.c_str());
    return 2;
  }
  const BuildInfo b = build_info();
  std::printf("flashlab %s\n", b.version.c_str());
  std::printf("  build type     %s\n", or_dash(FLASHLAB_BUILD_TYPE).c_str());
  std::printf("  compiler       %s\n", or_dash(b.compiler).c_str());
  std::printf("  cpu flags      %s (build)\n", or_dash(b.cpu_flags).c_str());
  std::printf("  cpu features   %s (this machine)\n", runtime_cpu_features().c_str());
  std::printf("  cpu threads    %d (OpenMP default)\n", omp_get_max_threads());
  std::printf("  cuda           %s\n", b.cuda_compiled ? "compiled" : "not compiled (CPU only)");
  if (b.cuda_compiled) {
    std::printf("  cuda version   %s\n", or_dash(b.cuda_version).c_str());
    std::printf("  cuda archs     %s\n", or_dash(b.cuda_archs).c_str());
    std::printf("  head dims      %s (CUDA instantiations)\n", FLASHLAB_BUILD_HEAD_DIMS);
    std::printf("  dtypes         %s (CUDA instantiations)\n", FLASHLAB_BUILD_DTYPES);
  }
  std::printf("  cuda devices   %d\n", b.cuda_device_count);
  for (size_t i = 0; i < b.cuda_devices.size(); ++i)
    std::printf("    [%zu] %s\n", i, b.cuda_devices[i].c_str());

  std::printf("\nimplementations:\n");
  const std::vector<ImplInfo> impls = list_implementations();
  size_t w = 4;
  for (const ImplInfo& i : impls) w = std::max(w, std::string(i.name).size());
  std::printf("  %-*s  %-6s  %-9s  %s\n", static_cast<int>(w), "name", "device", "available",
              "description");
  for (const ImplInfo& i : impls)
    std::printf("  %-*s  %-6s  %-9s  %s\n", static_cast<int>(w), i.name, to_string(i.device),
                i.available ? "yes" : "no", i.description ? i.description : "");
  return 0;
}

}  // namespace cli
}  // namespace flashlab
