// Hot paths allocate nothing per token: once a sequence has warmed up, a decode step through
// Model::Forward performs no heap allocation. Counted by replacing the global operator new in
// this test binary.
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backends.h"
#include "models/model.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
// The nothrow forms too (std::stable_sort's buffer uses them): left to the sanitizer's runtime,
// their memory would be freed by the replaced delete above, an alloc-dealloc mismatch.
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace tandem {
namespace {

TEST(DecodeAllocationTest, SteadyStateDecodeStepsDoNotAllocate) {
  for (const char* name : {"jamba-tiny", "zamba2-tiny", "mamba2-tiny"}) {
    SCOPED_TRACE(name);
    auto model = models::Model::Load(std::string(TANDEM_TEST_DATA) + "/models/" + name);
    ASSERT_TRUE(model.ok()) << model.status();
    const models::Model& m = **model;
    auto ops = kernels::MakeCpuOps();
    kernels::Workspace ws;
    std::vector<float> ssm(m.layout().ssm_block_floats(), 0.0f);
    std::vector<std::vector<float>> pages(
        m.config().num_attention_layers > 0 ? m.layout().PagesFor(64) : 0,
        std::vector<float>(m.layout().kv_page_floats()));
    models::SequenceState state;
    state.ssm = ssm.data();
    for (auto& p : pages) state.kv_pages.push_back(p.data());
    std::vector<float> logits(m.config().vocab_size);
    const std::vector<int32_t> prompt = {5, 17, 99, 250, 3, 8, 41};
    const models::SequenceInput prefill{&state, prompt, {}, false};
    ASSERT_TRUE(m.Forward(*ops, ws, {&prefill, 1}, logits.data()).ok());

    auto step = [&](int32_t token) {
      const models::SequenceInput in{&state, {&token, 1}, {}, false};
      return m.Forward(*ops, ws, {&in, 1}, logits.data());
    };
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(step(100 + i).ok());  // warm-up
    const int64_t before = g_allocations.load();
    for (int i = 0; i < 32; ++i) ASSERT_TRUE(step(200 + i).ok());
    EXPECT_EQ(g_allocations.load() - before, 0);
  }
}

}  // namespace
}  // namespace tandem
