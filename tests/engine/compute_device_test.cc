// ComputeDevice: the names --device takes, and every device path of generation and of the
// engine, run on a "device" whose memory is host memory kept apart (tests/engine/host_device.h).
// Its compute is the CPU backend's, so the results must be the CPU's bit for bit.
#include "engine/compute_device.h"

#include <string>
#include <vector>

#include "cache/arena_allocator.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/host_device.h"
#include "tests/kernels/signing_ops.h"
#include "tests/fixture_families.h"
#include "tests/models/model_test_util.h"
#ifdef TANDEM_HAVE_CUDA
#include "kernels/cuda/device_info.h"
#endif

namespace tandem::engine {
namespace {

using testing::Drain;
using testing::Fixture;
using testing::GreedyWithLogprobs;
using testing::HostDevice;
using testing::Outcome;
using testing::SameLogprobs;
using testing::Tokens;
using testing::TwoTurns;

TEST(ComputeDeviceTest, TheCpuComputesInHostMemory) {
  auto cpu = ComputeDevice::Open("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->name(), "cpu");
  EXPECT_TRUE((*cpu)->on_host());
  EXPECT_EQ((*cpu)->weight_placer(), nullptr);
  auto ops = (*cpu)->CreateOps({.threads = 1});
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_TRUE((*ops)->activations_on_host());
  auto backing = (*cpu)->CreateStateBacking(1 << 20);
  ASSERT_TRUE(backing.ok()) << backing.status();
  EXPECT_GE((*backing)->reserved_bytes(), size_t{1} << 20);
}

TEST(ComputeDeviceTest, UnknownNamesAreRefusedByName) {
  for (const char* name : {"gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda0", ""}) {
    auto device = ComputeDevice::Open(name);
    ASSERT_FALSE(device.ok()) << name;
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(std::string(device.status().message()).find(absl::StrCat("'", name, "'")),
              std::string::npos)
        << device.status();
  }
}

TEST(ComputeDeviceTest, AGpuThatCannotBeUsedIsAFailedPrecondition) {
#ifdef TANDEM_HAVE_CUDA
  std::string error;
  const size_t visible = kernels::cuda::ListDevices(&error).size();
  auto beyond = ComputeDevice::Open(absl::StrCat("cuda:", visible));
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kFailedPrecondition) << beyond.status();
  if (visible > 0) GTEST_SKIP() << "this machine has a GPU";
#endif
  auto device = ComputeDevice::Open("cuda");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << device.status();
  EXPECT_NE(std::string(device.status().message()).find("cuda"), std::string::npos)
      << device.status();
}

std::unique_ptr<models::Model> LoadOn(const std::string& name, ComputeDevice* device) {
  models::LoadOptions options;
  options.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  options.placer = device == nullptr ? nullptr : device->weight_placer();
  auto model = models::Model::Load(Fixture("models/" + name), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// Each layer hands each per-sequence op the whole pass in one call (on a GPU, one launch): a
// decode batch to the step ops, anything else as one varlen call; and the pass's tables are
// uploaded in one copy, every sequence's pages in one table. So neither the calls nor the
// uploads a pass makes grow with its batch.
TEST(ComputeDeviceTest, APassMakesAsManyOpCallsAndUploadsForSixSequencesAsForTwo) {
  HostDevice device;
  for (const std::string& name : tandem::testing::kFamilyFixtures) {
    SCOPED_TRACE(name);
    auto model = LoadOn(name, &device);
    ASSERT_NE(model, nullptr);
    auto ops = device.CreateOps({.threads = 1});
    ASSERT_TRUE(ops.ok()) << ops.status();
    kernels::Workspace ws(size_t{1} << 20, &(*ops)->activation_memory());
    const int32_t vocab = model->config().vocab_size;
    // Fresh sequences: all decoding one token, or the first decoding and the rest prefilling.
    struct Counts {
      int64_t calls, uploads;
      bool operator==(const Counts&) const = default;
    };
    auto calls_for = [&](int sequences, bool prefill) -> Counts {
      std::vector<std::unique_ptr<tandem::testing::TestSequence>> owned;
      std::vector<std::vector<int32_t>> tokens;
      std::vector<models::SequenceInput> batch;
      for (int s = 0; s < sequences; ++s) {
        owned.push_back(std::make_unique<tandem::testing::TestSequence>(*model));
        tokens.push_back(Tokens(prefill && s > 0 ? 4 + s : 1, s, vocab));
        owned.back()->Reserve(static_cast<int64_t>(tokens.back().size()));
      }
      for (int s = 0; s < sequences; ++s) {
        batch.push_back({&owned[s]->state(), tokens[s], {}, false});
      }
      std::vector<float> logits(models::Model::LogitRows(batch) * vocab);
      const int64_t calls = device.counts.sequence_op_calls, uploads = device.counts.table_uploads;
      const absl::Status status = model->Forward(**ops, ws, batch, logits.data());
      EXPECT_TRUE(status.ok()) << status;
      return Counts{device.counts.sequence_op_calls - calls, device.counts.table_uploads - uploads};
    };
    const Counts decode = calls_for(2, false), prefill = calls_for(2, true);
    EXPECT_GT(decode.calls, 0);
    // Every table of the pass (pages, rows' page tables and positions, cu_seqlens, SSM blocks,
    // snapshots) goes over in one copy, as a CUDA graph's single copy node needs.
    EXPECT_EQ(decode.uploads, 1);
    EXPECT_EQ(prefill.uploads, 1);
    EXPECT_EQ(calls_for(6, false), decode);
    EXPECT_EQ(calls_for(6, true), prefill);
  }
}

class HostDeviceGenerateTest : public ::testing::TestWithParam<std::string> {};

// Prefill in two chunks, then decode: weights through the placer, activations and logits in
// the backend's memory, the SSM block cleared and the pools in the device's backing.
TEST_P(HostDeviceGenerateTest, GivesTheCpusTokensAndLogits) {
  HostDevice device;
  auto on_cpu = LoadOn(GetParam(), nullptr);
  auto on_device = LoadOn(GetParam(), &device);
  ASSERT_NE(on_cpu, nullptr);
  ASSERT_NE(on_device, nullptr);
  EXPECT_GT(device.counts.placed_tensors, 0);
  // The placed weights keep no host copy (converted, stacked or mapped tensors are freed as
  // they are placed); on the host the store holds its conversions.
  EXPECT_EQ(on_device->host_weight_bytes(), 0u);
  EXPECT_GT(on_cpu->host_weight_bytes(), 0u);
  const models::StateLayout& layout = on_cpu->layout();
  cache::ArenaConfig arena{.kv_page_bytes = layout.kv_page_bytes(),
                           .kv_pages = on_cpu->config().num_attention_layers > 0 ? 8u : 0u,
                           .ssm_block_bytes = layout.ssm_block_bytes(),
                           .ssm_blocks = on_cpu->config().num_ssm_layers > 0 ? 1u : 0u};
  auto host_pools = cache::ArenaAllocator::Create(arena);
  auto device_pools = cache::ArenaAllocator::Create(
      arena, [&](size_t bytes) { return device.CreateStateBacking(bytes); });
  ASSERT_TRUE(host_pools.ok() && device_pools.ok());

  GenerateOptions options;
  options.max_new_tokens = 6;
  options.prefill_chunk = 20;
  options.record_logits = true;
  const std::vector<int32_t> prompt = Tokens(33, 3, on_cpu->config().vocab_size);
  auto cpu_ops = kernels::MakeCpuOps(2, true);
  auto device_ops = device.CreateOps({.threads = 2, .batch_invariant = true});
  ASSERT_TRUE(device_ops.ok());
  auto want = Generate(*on_cpu, *cpu_ops, **host_pools, prompt, options);
  auto got = Generate(*on_device, **device_ops, **device_pools, prompt, options);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->output_ids, want->output_ids);
  EXPECT_EQ(got->logits, want->logits);  // bit for bit
  EXPECT_EQ(device.counts.read_backs, 2 + 5);  // two prefill chunks, five decode steps
  EXPECT_GT(device.counts.activation_blocks, 0);
  EXPECT_EQ(device.counts.state_clears, on_cpu->config().num_ssm_layers > 0 ? 1 : 0);

  // Weights the backend cannot read are refused, not dereferenced.
  auto refused = Generate(*on_cpu, **device_ops, **device_pools, prompt, options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  refused = Generate(*on_device, *cpu_ops, **host_pools, prompt, options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
}

INSTANTIATE_TEST_SUITE_P(Families, HostDeviceGenerateTest,
                         ::testing::ValuesIn(tandem::testing::kFamilyFixtures),
                         testing::FixtureTestName);

EngineConfig SmallConfig(ComputeDevice* device) {
  EngineConfig config;
  config.device = device;
  config.memory_bytes = 32 << 20;
  config.threads = 2;
  config.scheduler.prefill_chunk = 24;
  config.scheduler.step_tokens = 96;
  config.scheduler.cache.policy = CachePolicy::kMarconi;
  return config;
}

// The host device with every op call signed as the CUDA backend signs it for CUDA graphs.
class SigningDevice final : public ComputeDevice {
 public:
  std::string name() const override { return "signing host-device"; }
  bool on_host() const override { return false; }
  models::TensorPlacer* weight_placer() override { return device_.weight_placer(); }
  absl::StatusOr<std::unique_ptr<kernels::Ops>> CreateOps(const ComputeOptions& options) override {
    absl::StatusOr<std::unique_ptr<kernels::Ops>> inner = device_.CreateOps(options);
    if (!inner.ok()) return inner.status();
    auto ops = std::make_unique<kernels::testing::SigningOps>(*std::move(inner));
    last_ = ops.get();
    return std::unique_ptr<kernels::Ops>(std::move(ops));
  }
  absl::StatusOr<std::unique_ptr<cache::MemoryBacking>> CreateStateBacking(
      size_t bytes) override {
    return device_.CreateStateBacking(bytes);
  }
  const kernels::testing::SigningOps* last_ops() const { return last_; }

 private:
  HostDevice device_;
  kernels::testing::SigningOps* last_ = nullptr;
};

// What --gpu-graphs relies on in serving: once a batch has run a decode step, its next steps
// make the same op calls (a GPU then replays them) while sequences grow, pages are added, and
// the batch shrinks as requests finish. Three requests at once, so all three batch sizes run;
// the passes that repeat none before them are the prefill chunks and the first step (or two,
// while the last prefill chunk's sequence joins) of each batch size.
TEST(HostDeviceEngineTest, DecodeStepsRepeatTheirPassesForCudaGraphs) {
  SigningDevice device;
  auto model = LoadOn("jamba-tiny", &device);
  ASSERT_NE(model, nullptr);
  auto engine = Engine::Create(*model, nullptr, SmallConfig(&device));
  ASSERT_TRUE(engine.ok()) << engine.status();
  const int32_t vocab = model->config().vocab_size;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int r = 0; r < 3; ++r) {
    auto stream =
        (*engine)->Submit(GreedyWithLogprobs(Tokens(20 + 9 * r, 31 + r, vocab), 24 + 8 * r));
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*std::move(stream));
  }
  for (auto& stream : streams) {
    const Outcome outcome = Drain(*stream);
    EXPECT_EQ(outcome.finished.finish_reason, FinishReason::kLength) << outcome.finished.error;
  }
  const kernels::testing::SigningOps* ops = device.last_ops();
  ASSERT_NE(ops, nullptr);
  const int64_t fresh = ops->passes() - ops->repeated_passes();
  // About 40 decode steps (the longest request's 40 tokens), 3 prefill chunks.
  EXPECT_GE(ops->passes(), 40);
  // 5 today: the prefill steps and the first step of each batch size. (Tables laid out as
  // they were before CUDA graphs made it 10: every added page moved the buffers after them.)
  EXPECT_LE(fresh, 6) << ops->repeated_passes() << " of " << ops->passes()
                      << " passes repeated an earlier one";
}

TEST(HostDeviceEngineTest, ServesTheCpusOutputsAndRestoresInsideTheDevice) {
  HostDevice device;
  auto on_cpu = LoadOn("jamba-tiny", nullptr);
  auto on_device = LoadOn("jamba-tiny", &device);
  ASSERT_NE(on_cpu, nullptr);
  ASSERT_NE(on_device, nullptr);
  auto cpu_engine = Engine::Create(*on_cpu, nullptr, SmallConfig(nullptr));
  auto device_engine = Engine::Create(*on_device, nullptr, SmallConfig(&device));
  ASSERT_TRUE(cpu_engine.ok()) << cpu_engine.status();
  ASSERT_TRUE(device_engine.ok()) << device_engine.status();
  const int32_t vocab = on_cpu->config().vocab_size;
  const std::vector<Outcome> want = TwoTurns(**cpu_engine, vocab, 5);
  const std::vector<Outcome> got = TwoTurns(**device_engine, vocab, 5);
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(got.size(), 2u);
  for (int turn = 0; turn < 2; ++turn) {
    EXPECT_EQ(got[turn].finished.finish_reason, FinishReason::kLength) << turn;
    EXPECT_EQ(got[turn].tokens, want[turn].tokens) << turn;
    EXPECT_TRUE(SameLogprobs(got[turn].logprobs, want[turn].logprobs)) << turn;
  }
  EXPECT_GT(got[1].finished.usage.cached_tokens, 0);
  EXPECT_EQ(got[1].finished.usage.cached_tokens, want[1].finished.usage.cached_tokens);
  EXPECT_GT(device.counts.state_copies, 0);  // the restore
  EXPECT_GE(device.counts.state_clears, 2);  // each sequence's fresh SSM block
  EXPECT_GT(device.counts.read_backs, 0);
}

// Sessions that share a cached system prompt, submitted together: their prefills (restored
// from the cache, then varlen) and their decode rows (Hydragen over the shared pages) go through
// the device's tables in one call per layer, and give what the CPU engine gives.
TEST(HostDeviceEngineTest, SessionsSharingAPromptDecodeTogetherAsOnTheCpu) {
  HostDevice device;
  auto on_cpu = LoadOn("jamba-tiny", nullptr);
  auto on_device = LoadOn("jamba-tiny", &device);
  ASSERT_NE(on_cpu, nullptr);
  ASSERT_NE(on_device, nullptr);
  const int32_t vocab = on_cpu->config().vocab_size;
  const std::vector<int32_t> system = Tokens(48, 9, vocab);
  auto run = [&](ComputeDevice* on) -> std::pair<std::vector<Outcome>, int64_t> {
    EngineConfig config = SmallConfig(on);
    config.hydragen.min_shared_work = 0;  // share every common page of this tiny model
    auto engine = Engine::Create(on == nullptr ? *on_cpu : *on_device, nullptr, config);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return {};
    auto warm = (*engine)->Submit(GreedyWithLogprobs(system, 1));  // caches the prompt
    EXPECT_TRUE(warm.ok());
    if (warm.ok()) Drain(**warm);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int s = 0; s < 4; ++s) {
      std::vector<int32_t> prompt = system;
      const std::vector<int32_t> user = Tokens(3 + 5 * s, 20 + s, vocab);
      prompt.insert(prompt.end(), user.begin(), user.end());
      auto stream = (*engine)->Submit(GreedyWithLogprobs(prompt, 6));
      EXPECT_TRUE(stream.ok());
      if (stream.ok()) streams.push_back(*stream);
    }
    std::vector<Outcome> outcomes;
    for (auto& stream : streams) outcomes.push_back(Drain(*stream));
    return {outcomes, (*engine)->stats().hydragen_nodes};
  };
  const auto [want, cpu_nodes] = run(nullptr);
  const auto [got, device_nodes] = run(&device);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_EQ(want.size(), 4u);
  // Which steps batch which sequences depends on when the engine thread picks them up; the
  // batch-invariant kernels and exact Hydragen make that change no bit.
  for (size_t s = 0; s < got.size(); ++s) {
    EXPECT_EQ(got[s].finished.finish_reason, FinishReason::kLength) << s;
    EXPECT_GT(got[s].finished.usage.cached_tokens, 0) << s;
    EXPECT_EQ(got[s].tokens, want[s].tokens) << s;
    ASSERT_EQ(got[s].logprobs.size(), want[s].logprobs.size()) << s;
    for (size_t t = 0; t < got[s].logprobs.size(); ++t) {
      EXPECT_EQ(got[s].logprobs[t][0].logprob, want[s].logprobs[t][0].logprob)
          << "sequence " << s << " token " << t;
    }
  }
  EXPECT_GT(cpu_nodes, 0);
  EXPECT_GT(device_nodes, 0);  // the decode rows went through Hydragen on the device too
}

// Greedy requests without penalties or logprobs get their tokens picked where the logits are by
// the argmax read-back: only token ids cross back, and they are the tokens the sampling read-back
// picks (which the same request with logprobs takes).
TEST(HostDeviceEngineTest, GreedyTokensArePickedOnTheDeviceAsTheSamplerPicksThem) {
  HostDevice device;
  auto on_device = LoadOn("jamba-tiny", &device);
  ASSERT_NE(on_device, nullptr);
  auto engine = Engine::Create(*on_device, nullptr, SmallConfig(&device));
  ASSERT_TRUE(engine.ok()) << engine.status();
  const int32_t vocab = on_device->config().vocab_size;
  const std::vector<int32_t> prompt = Tokens(40, 4, vocab);  // two prefill chunks
  auto sampled = (*engine)->Submit(GreedyWithLogprobs(prompt, 6));
  ASSERT_TRUE(sampled.ok());
  const Outcome want = Drain(**sampled);
  const int64_t argmax_rows = device.counts.argmax_rows;
  EXPECT_EQ(device.counts.sampled_rows, 6);  // one row per token; none for the first chunk
  EXPECT_EQ(argmax_rows, 0);

  auto picked = (*engine)->Submit(testing::Greedy(prompt, 6));
  ASSERT_TRUE(picked.ok());
  const Outcome got = Drain(**picked);
  EXPECT_EQ(got.finished.finish_reason, FinishReason::kLength);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(device.counts.read_back_floats, 0);
  EXPECT_EQ(device.counts.sampled_rows, 6);
  EXPECT_EQ(device.counts.argmax_rows, argmax_rows + 6);
}

// Requests that sample (temperature, top-k/top-p/min-p, penalties, greedy with penalties, or
// logprobs) get their tokens drawn where the logits are, with the draw their seeded generator
// makes, and their logprobs computed there: the tokens Generate's host sampler draws from whole
// rows, and the logprobs of those rows, with no logits row crossing back.
TEST(HostDeviceEngineTest, SampledTokensAreDrawnOnTheDeviceAsTheSamplerDrawsThem) {
  HostDevice device;
  auto on_cpu = LoadOn("jamba-tiny", nullptr);
  auto on_device = LoadOn("jamba-tiny", &device);
  ASSERT_NE(on_cpu, nullptr);
  ASSERT_NE(on_device, nullptr);
  auto engine = Engine::Create(*on_device, nullptr, SmallConfig(&device));
  ASSERT_TRUE(engine.ok()) << engine.status();
  const int32_t vocab = on_device->config().vocab_size;
  std::vector<SamplingParams> rules(4);
  rules[0].greedy = false;
  rules[0].temperature = 0.8f;
  rules[0].top_p = 0.9f;
  rules[0].seed = 7;
  rules[1].greedy = false;
  rules[1].temperature = 1.2f;
  rules[1].top_k = 5;
  rules[1].min_p = 0.05f;
  rules[1].repetition_penalty = 1.3f;
  rules[1].presence_penalty = 0.4f;
  rules[1].seed = 9;
  rules[1].top_logprobs = 3;
  rules[2].frequency_penalty = 0.7f;  // greedy over penalised logits
  rules[3].logprobs = true;           // greedy, with the chosen token's logprob
  const models::StateLayout& layout = on_cpu->layout();
  auto cpu_ops = kernels::MakeCpuOps(2, true);
  constexpr int32_t kTokens = 8;
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::vector<int32_t> prompt = Tokens(30, 11 + static_cast<int32_t>(i), vocab);
    auto pools = cache::ArenaAllocator::Create(
        {.kv_page_bytes = layout.kv_page_bytes(),
         .kv_pages = 8,
         .ssm_block_bytes = layout.ssm_block_bytes(),
         .ssm_blocks = 1});
    ASSERT_TRUE(pools.ok()) << pools.status();
    GenerateOptions options;
    options.max_new_tokens = kTokens;
    options.sampling = rules[i];
    options.prefill_chunk = SmallConfig(&device).scheduler.prefill_chunk;
    options.record_logits = true;
    auto want = Generate(*on_cpu, *cpu_ops, **pools, prompt, options);
    ASSERT_TRUE(want.ok()) << want.status();

    const int64_t floats = device.counts.read_back_floats, sampled = device.counts.sampled_rows;
    Request request = testing::Greedy(prompt, kTokens);
    request.sampling = rules[i];
    auto stream = (*engine)->Submit(request);
    ASSERT_TRUE(stream.ok());
    const Outcome got = Drain(**stream);
    EXPECT_EQ(got.finished.finish_reason, FinishReason::kLength) << i;
    EXPECT_EQ(got.tokens, want->output_ids) << "rule " << i;
    EXPECT_EQ(device.counts.read_back_floats, floats) << i;
    EXPECT_EQ(device.counts.sampled_rows, sampled + kTokens) << i;
    const bool logprobs = rules[i].logprobs || rules[i].top_logprobs > 0;
    ASSERT_EQ(got.logprobs.size(), logprobs ? got.tokens.size() : 0u) << i;
    for (size_t t = 0; t < got.logprobs.size() && t < want->output_ids.size(); ++t) {
      std::vector<TopLogprob> top(static_cast<size_t>(rules[i].top_logprobs));
      const float chosen = ComputeLogprobs(
          std::span<const float>(want->logits).subspan(t * vocab, static_cast<size_t>(vocab)),
          want->output_ids[t], top);
      ASSERT_EQ(got.logprobs[t].size(), 1 + top.size()) << i << " " << t;
      EXPECT_NEAR(got.logprobs[t][0].logprob, chosen, 1e-6) << i << " " << t;
      for (size_t k = 0; k < top.size(); ++k) {
        EXPECT_EQ(got.logprobs[t][1 + k].token, top[k].token) << i << " " << t << " " << k;
        EXPECT_NEAR(got.logprobs[t][1 + k].logprob, top[k].logprob, 1e-6) << i << " " << t;
      }
    }
  }
}

// A failed op (reported when the logits are read back) fails the requests of that step alone:
// their states are no longer trusted, so they are not retried; the next request is served.
TEST(HostDeviceEngineTest, AFailedOpFailsItsStepAndTheEngineGoesOn) {
  HostDevice device;
  auto on_device = LoadOn("zamba2-tiny", &device);
  ASSERT_NE(on_device, nullptr);
  auto engine = Engine::Create(*on_device, nullptr, SmallConfig(&device));
  ASSERT_TRUE(engine.ok()) << engine.status();
  const int32_t vocab = on_device->config().vocab_size;
  auto healthy = (*engine)->Submit(GreedyWithLogprobs(Tokens(20, 1, vocab), 4));
  ASSERT_TRUE(healthy.ok());
  const Outcome before = Drain(**healthy);
  ASSERT_EQ(before.finished.finish_reason, FinishReason::kLength);

  const int64_t read_backs = device.counts.read_backs;
  device.counts.fail_read_backs = 1;
  auto failing = (*engine)->Submit(GreedyWithLogprobs(Tokens(20, 2, vocab), 4));
  ASSERT_TRUE(failing.ok());
  const Outcome failed = Drain(**failing);
  EXPECT_EQ(failed.finished.finish_reason, FinishReason::kError);
  EXPECT_NE(std::string(failed.finished.error.message()).find("injected failure"),
            std::string::npos)
      << failed.finished.error;
  EXPECT_EQ(device.counts.read_backs, read_backs + 1);  // no retry

  auto again = (*engine)->Submit(GreedyWithLogprobs(Tokens(20, 1, vocab), 4));
  ASSERT_TRUE(again.ok());
  const Outcome after = Drain(**again);
  EXPECT_EQ(after.finished.finish_reason, FinishReason::kLength);
  EXPECT_EQ(after.tokens, before.tokens);
}

// Device memory too full for a pass's activations fails that step's requests with
// RESOURCE_EXHAUSTED instead of ending the process; once memory is back, requests are served.
TEST(HostDeviceEngineTest, NoMemoryForActivationsFailsTheStepNotTheProcess) {
  HostDevice device;
  auto on_device = LoadOn("jamba-tiny", &device);
  ASSERT_NE(on_device, nullptr);
  EngineConfig config = SmallConfig(&device);
  config.scheduler.prefill_chunk = config.scheduler.step_tokens = 512;
  auto engine = Engine::Create(*on_device, nullptr, config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const int32_t vocab = on_device->config().vocab_size;
  auto warm = (*engine)->Submit(GreedyWithLogprobs(Tokens(4, 1, vocab), 2));
  ASSERT_TRUE(warm.ok());
  ASSERT_EQ(Drain(**warm).finished.finish_reason, FinishReason::kLength);
  // A 400-token prefill needs more activation memory than any pass before it.
  device.counts.activations_full = true;
  auto big = (*engine)->Submit(GreedyWithLogprobs(Tokens(400, 3, vocab), 3));
  ASSERT_TRUE(big.ok());
  const Outcome failed = Drain(**big);
  EXPECT_EQ(failed.finished.finish_reason, FinishReason::kError);
  EXPECT_EQ(failed.finished.error.code(), absl::StatusCode::kResourceExhausted)
      << failed.finished.error;
  EXPECT_NE(std::string(failed.finished.error.message()).find("activations"), std::string::npos)
      << failed.finished.error;
  device.counts.activations_full = false;
  auto again = (*engine)->Submit(GreedyWithLogprobs(Tokens(400, 3, vocab), 3));
  ASSERT_TRUE(again.ok());
  const Outcome served = Drain(**again);
  EXPECT_EQ(served.finished.finish_reason, FinishReason::kLength) << served.finished.error;
  EXPECT_EQ(served.tokens.size(), 3u);
}

TEST(HostDeviceEngineTest, WeightsTheBackendCannotReadAreRefused) {
  HostDevice device;
  auto on_cpu = LoadOn("mamba2-tiny", nullptr);
  ASSERT_NE(on_cpu, nullptr);
  auto engine = Engine::Create(*on_cpu, nullptr, SmallConfig(&device));
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition) << engine.status();
  EXPECT_NE(std::string(engine.status().message()).find("host memory"), std::string::npos)
      << engine.status();
}

TEST(HostDeviceEngineTest, HostOnlyAllocatorsAreRefusedOnADevice) {
  HostDevice device;
  auto on_device = LoadOn("mamba2-tiny", &device);
  ASSERT_NE(on_device, nullptr);
  EngineConfig config = SmallConfig(&device);
  config.allocator = "fixed-dual:1";
  auto engine = Engine::Create(*on_device, nullptr, config);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument) << engine.status();
  EXPECT_NE(std::string(engine.status().message()).find("avmp-static"), std::string::npos)
      << engine.status();
  config.allocator = "avmp-static:1";
  EXPECT_TRUE(Engine::Create(*on_device, nullptr, config).ok());
}

}  // namespace
}  // namespace tandem::engine
