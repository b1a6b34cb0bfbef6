// `tandem devices`: the CUDA devices this build can use and whether cuBLAS loads, optionally with
// a kernel self-test.
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "server/cli/args.h"
#include "server/cli/commands.h"
#ifdef TANDEM_HAVE_CUDA
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/device_info.h"
#endif

namespace tandem::cli {

int RunDevices(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"self-test", false, "run a small kernel on every device and check its result"},
      {"help", false, "show this help"}};
  auto args = Args::Parse(argc, argv, specs);
  if (!args.ok() || args->Has("help")) {
    if (!args.ok()) std::cerr << "tandem devices: " << args.status().message() << "\n\n";
    std::cout << Usage("devices", "[--self-test]", specs);
    return args.ok() ? 0 : 2;
  }
  std::printf("cpu: %u hardware threads\n", std::thread::hardware_concurrency());
#ifdef TANDEM_HAVE_CUDA
  std::string error;
  // Whether prefill products can go through cuBLAS (kernels/cuda/cublas_linear.h), or run on
  // tandem's own kernels: the first thing to know when prefill on a GPU is slow.
  std::string cublas_error;
  const auto cublas = kernels::cuda::CublasLibrary::Default(&cublas_error);
  if (cublas != nullptr) {
    std::printf("cublas: %s\n", cublas->description().c_str());
  } else {
    std::printf("cublas: not loaded (%s); prefill products run on tandem's own kernels\n",
                cublas_error.c_str());
  }
  const auto devices = kernels::cuda::ListDevices(&error);
  if (devices.empty()) {
    std::printf("cuda: no devices (%s)\n", error.empty() ? "none visible" : error.c_str());
    return 0;
  }
  int failures = 0;
  for (const auto& d : devices) {
    std::printf("cuda:%d %s, compute %d.%d, %.1f GiB, %d SMs", d.index, d.name.c_str(),
                d.compute_major, d.compute_minor, d.total_memory_bytes / double(1 << 30),
                d.multiprocessors);
    if (args->Has("self-test")) {
      const bool ok = kernels::cuda::SelfTest(d.index, &error);
      std::printf(", self-test %s%s", ok ? "passed" : "FAILED: ", ok ? "" : error.c_str());
      failures += ok ? 0 : 1;
    }
    std::printf("\n");
  }
  return failures == 0 ? 0 : 1;
#else
  std::printf("cuda: this build has no CUDA support (configured with TANDEM_CUDA=OFF)\n");
  return 0;
#endif
}

}  // namespace tandem::cli
