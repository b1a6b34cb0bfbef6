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
#include "tests/fixture_families.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

// GCC sees the replaced delete below free() what it takes for the library's operator new and
// warns of a mismatch; here both sides are ours, malloc and free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

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
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
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
    const size_t blocks = ws.blocks_allocated();
    for (int i = 0; i < 32; ++i) ASSERT_TRUE(step(200 + i).ok());
    EXPECT_EQ(g_allocations.load() - before, 0);
    EXPECT_EQ(ws.blocks_allocated(), blocks);
  }
}

// A batch of sequences that share their prefix pages decodes through Hydragen (shared-prefix
// plan, per-node attention, then LSE merges or, batch-invariant, resumed states): still nothing
// allocated per step.
TEST(DecodeAllocationTest, SharedPrefixBatchDecodeDoesNotAllocate) {
  for (const auto& [name, batch_invariant] :
       {std::pair{"jamba-tiny", false}, std::pair{"zamba2-tiny", false},
        std::pair{"jamba-tiny", true}, std::pair{"zamba2-tiny", true}}) {
    SCOPED_TRACE(std::string(name) + (batch_invariant ? " batch-invariant" : ""));
    auto model = models::Model::Load(std::string(TANDEM_TEST_DATA) + "/models/" + name);
    ASSERT_TRUE(model.ok()) << model.status();
    const models::Model& m = **model;
    auto ops = kernels::MakeCpuOps(0, batch_invariant);
    kernels::Workspace ws;
    constexpr int kSequences = 4;
    const int64_t page_tokens = m.layout().page_tokens();
    const int64_t shared_tokens = 3 * page_tokens;  // three full pages, shared by all
    std::vector<float> prefix_ssm(m.layout().ssm_block_floats(), 0.0f);
    std::vector<std::vector<float>> prefix_pages(3,
                                                 std::vector<float>(m.layout().kv_page_floats()));
    models::SequenceState prefix;
    prefix.ssm = prefix_ssm.data();
    for (auto& p : prefix_pages) prefix.kv_pages.push_back(p.data());
    std::vector<int32_t> prompt(shared_tokens);
    for (int64_t i = 0; i < shared_tokens; ++i) prompt[i] = 4 + static_cast<int32_t>(i * 7 % 900);
    std::vector<float> logits(kSequences * m.config().vocab_size);
    const models::SequenceInput prefill{&prefix, prompt, {}, false};
    ASSERT_TRUE(m.Forward(*ops, ws, {&prefill, 1}, logits.data()).ok());

    // Each sequence: the shared pages, then private pages for 40 more positions.
    std::vector<std::vector<float>> ssm(kSequences, prefix_ssm);
    std::vector<std::vector<std::vector<float>>> own(kSequences);
    std::vector<models::SequenceState> states(kSequences);
    for (int s = 0; s < kSequences; ++s) {
      states[s].ssm = ssm[s].data();
      states[s].tokens = shared_tokens;
      for (auto& p : prefix_pages) states[s].kv_pages.push_back(p.data());
      own[s].assign(3, std::vector<float>(m.layout().kv_page_floats()));
      for (auto& p : own[s]) states[s].kv_pages.push_back(p.data());
    }
    std::vector<int32_t> next(kSequences);
    std::vector<models::SequenceInput> inputs(kSequences);
    models::ForwardStats stats;
    models::ForwardOptions options;
    options.stats = &stats;
    options.hydragen.min_shared_work = 0;  // the tiny model's 4 × 3 pages are little work
    auto step = [&](int32_t base) {
      for (int s = 0; s < kSequences; ++s) {
        next[s] = base + s;
        inputs[s] = {&states[s], {&next[s], 1}, {}, false};
      }
      return m.Forward(*ops, ws, inputs, logits.data(), options);
    };
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(step(100 + 4 * i).ok());  // warm-up
    const int64_t before = g_allocations.load();
    const size_t blocks = ws.blocks_allocated();
    for (int i = 0; i < 24; ++i) ASSERT_TRUE(step(300 + 4 * i).ok());
    EXPECT_EQ(g_allocations.load() - before, 0);
    EXPECT_EQ(ws.blocks_allocated(), blocks);  // the workspace takes no new scratch either
    EXPECT_GT(stats.hydragen_nodes, 0);        // the shared path ran
  }
}

}  // namespace
}  // namespace tandem
