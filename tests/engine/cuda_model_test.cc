// A whole model on a GPU: weights placed in device memory (engine/cuda_tensor_placer.h), KV
// pages, SSM block, activations and logits in device memory, CudaOps computing, the layer
// graph's tables in a host scratch. Prefill and decode logits must match the CPU backend's on
// every family's fixture. Built with CUDA only; skips without a device.
#ifdef TANDEM_HAVE_CUDA

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/cuda_tensor_placer.h"
#include "kernels/backends.h"
#include "kernels/cuda/cuda_ops.h"
#include "models/model.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

using kernels::cuda::DeviceBuffer;

std::string ModelDir(const std::string& name) { return testing::Fixture("models/" + name); }

// One sequence's state with its pages and SSM block in device memory.
struct DeviceSequence {
  DeviceBuffer<float> pages, ssm;
  models::SequenceState state;

  DeviceSequence(const models::Model& model, int64_t tokens) {
    const models::StateLayout& layout = model.layout();
    const int64_t count = model.config().num_attention_layers > 0 ? layout.PagesFor(tokens) : 0;
    EXPECT_EQ(pages.Allocate(std::max<int64_t>(count * layout.kv_page_floats(), 1)), cudaSuccess);
    EXPECT_EQ(ssm.Allocate(std::max<int64_t>(layout.ssm_block_floats(), 1)), cudaSuccess);
    EXPECT_EQ(cudaMemset(ssm.get(), 0, ssm.size() * sizeof(float)), cudaSuccess);
    for (int64_t p = 0; p < count; ++p) {
      state.kv_pages.push_back(pages.get() + p * layout.kv_page_floats());
    }
    state.ssm = ssm.get();
  }
};

// The same sequence on the host.
struct HostSequence {
  std::vector<float> pages, ssm;
  models::SequenceState state;

  HostSequence(const models::Model& model, int64_t tokens) {
    const models::StateLayout& layout = model.layout();
    const int64_t count = model.config().num_attention_layers > 0 ? layout.PagesFor(tokens) : 0;
    pages.assign(std::max<int64_t>(count * layout.kv_page_floats(), 1), 0.0f);
    ssm.assign(std::max<int64_t>(layout.ssm_block_floats(), 1), 0.0f);
    for (int64_t p = 0; p < count; ++p) {
      state.kv_pages.push_back(pages.data() + p * layout.kv_page_floats());
    }
    state.ssm = ssm.data();
  }
};

class CudaModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaModelTest, PrefillAndDecodeMatchTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto placer = CreateCudaTensorPlacer(0);
  ASSERT_TRUE(placer.ok()) << placer.status();
  models::LoadOptions on_device;
  on_device.placer = placer->get();
  auto gpu_model = models::Model::Load(ModelDir(GetParam()), on_device);
  auto cpu_model = models::Model::Load(ModelDir(GetParam()));
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.status();
  ASSERT_TRUE(cpu_model.ok()) << cpu_model.status();
  std::string error;
  auto gpu = kernels::cuda::CudaOps::Create(0, &error);
  ASSERT_NE(gpu, nullptr) << error;
  auto cpu = kernels::MakeCpuOps(2);

  const int64_t vocab = (*cpu_model)->config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 21; ++i) prompt.push_back(3 + (i * 37) % static_cast<int>(vocab - 3));
  const int64_t total = static_cast<int64_t>(prompt.size()) + 4;
  DeviceSequence dseq(**gpu_model, total);
  HostSequence hseq(**cpu_model, total);
  kernels::Workspace device_ws(1 << 20, &gpu->activation_memory()), host_ws, cpu_ws;
  models::ForwardOptions device_options;
  device_options.host_scratch = &host_ws;
  DeviceBuffer<float> device_logits;
  ASSERT_EQ(device_logits.Allocate(vocab), cudaSuccess);

  std::vector<int32_t> tokens = prompt;
  for (int step = 0; step < 5; ++step) {
    const models::SequenceInput gin{&dseq.state, tokens, {}, false};
    const models::SequenceInput cin{&hseq.state, tokens, {}, false};
    ASSERT_TRUE((*gpu_model)->Forward(*gpu, device_ws, {&gin, 1}, device_logits.get(),
                                      device_options).ok());
    ASSERT_EQ(gpu->Synchronize(), "") << "step " << step;
    std::vector<float> want(vocab), got;
    ASSERT_TRUE((*cpu_model)->Forward(*cpu, cpu_ws, {&cin, 1}, want.data()).ok());
    ASSERT_EQ(device_logits.Download(&got), cudaSuccess);
    // fp32 on both sides in different summation orders: ~1e-6 relative per op, carried through
    // a few layers; a wrong op moves the logits by their own size.
    EXPECT_TRUE(testing::LogitsNear(got, want, 1e-3f)) << "step " << step;
    const int32_t next =
        static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
    tokens = {next};
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaModelTest,
                         ::testing::ValuesIn(tandem::testing::kFamilyFixtures),
                         testing::FixtureTestName);

}  // namespace
}  // namespace tandem::engine

#endif  // TANDEM_HAVE_CUDA
