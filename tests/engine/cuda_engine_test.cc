// The engine on a GPU (`--device cuda`): weights placed on the device, KV pages and SSM blocks in
// AVMP-managed device memory, CudaOps computing and sampling. Its outputs
// must be the CPU engine's, a prefix-cache hit must restore inside device memory, and
// single-sequence generation must match too. Built with CUDA only; skips without a device.
#ifdef TANDEM_HAVE_CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cache/arena_allocator.h"
#include "engine/compute_device.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "models/model_presets.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fixture_families.h"

namespace tandem::engine {
namespace {

using testing::Drain;
using testing::Fixture;
using testing::GreedyWithLogprobs;
using testing::Outcome;
using testing::Tokens;
using testing::TwoTurns;

std::unique_ptr<models::Model> LoadOn(const std::string& name, ComputeDevice& device) {
  models::LoadOptions options;
  options.config.zamba2_dt_clamp = models::Zamba2DtClamp::kTimeStepMin;
  options.placer = device.weight_placer();
  auto model = models::Model::Load(Fixture("models/" + name), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

EngineConfig Config(ComputeDevice& device) {
  EngineConfig config;
  config.device = &device;
  config.memory_bytes = 64 << 20;
  config.threads = 2;
  config.scheduler.prefill_chunk = 24;
  config.scheduler.step_tokens = 96;
  config.scheduler.cache.policy = CachePolicy::kMarconi;
  return config;
}

class CudaEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEngineTest, ServesTheCpusOutputsAndRestoresOnTheDevice) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto gpu = ComputeDevice::Open("cuda");
  auto cpu = ComputeDevice::Open("cpu");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto on_gpu = LoadOn(GetParam(), **gpu);
  auto on_cpu = LoadOn(GetParam(), **cpu);
  ASSERT_NE(on_gpu, nullptr);
  ASSERT_NE(on_cpu, nullptr);
  const int32_t vocab = on_cpu->config().vocab_size;
  std::vector<Outcome> want, got;
  {
    auto engine = Engine::Create(*on_cpu, nullptr, Config(**cpu));
    ASSERT_TRUE(engine.ok()) << engine.status();
    want = TwoTurns(**engine, vocab, 6);
  }
  {
    auto engine = Engine::Create(*on_gpu, nullptr, Config(**gpu));
    ASSERT_TRUE(engine.ok()) << engine.status();
    got = TwoTurns(**engine, vocab, 6);
  }
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(got.size(), 2u);
  for (int turn = 0; turn < 2; ++turn) {
    ASSERT_EQ(got[turn].finished.finish_reason, FinishReason::kLength)
        << turn << ": " << got[turn].finished.error;
    // fp32 on both sides in different summation orders: the same greedy tokens, logprobs
    // within rounding.
    EXPECT_EQ(got[turn].tokens, want[turn].tokens) << turn;
    ASSERT_EQ(got[turn].logprobs.size(), want[turn].logprobs.size());
    for (size_t i = 0; i < got[turn].logprobs.size(); ++i) {
      EXPECT_NEAR(got[turn].logprobs[i][0].logprob, want[turn].logprobs[i][0].logprob, 1e-3)
          << "turn " << turn << ", token " << i;
    }
  }
  EXPECT_GT(got[1].finished.usage.cached_tokens, 0);
  EXPECT_EQ(got[1].finished.usage.cached_tokens, want[1].finished.usage.cached_tokens);
}

// Generate from the same prompt of `prompt_tokens` on the CPU (`want`) and on the GPU, its backend
// made with `gpu_options` (`got`); `graph_replays`, when given, receives how many passes the GPU
// replayed from CUDA graphs.
void GenerateOnBoth(const std::string& family, const ComputeOptions& gpu_options,
                    const GenerateOptions& options, int64_t prompt_tokens, GenerateResult* want,
                    GenerateResult* got, int64_t* graph_replays = nullptr) {
  auto gpu = ComputeDevice::Open("cuda");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto on_gpu = LoadOn(family, **gpu);
  auto on_cpu = testing::LoadFixtureModel(family);
  ASSERT_NE(on_gpu, nullptr);
  ASSERT_NE(on_cpu, nullptr);
  const models::StateLayout& layout = on_cpu->layout();
  const cache::ArenaConfig arena{.kv_page_bytes = layout.kv_page_bytes(),
                                 .kv_pages = on_cpu->config().num_attention_layers > 0 ? 8u : 0u,
                                 .ssm_block_bytes = layout.ssm_block_bytes(),
                                 .ssm_blocks = on_cpu->config().num_ssm_layers > 0 ? 1u : 0u};
  auto host_pools = cache::ArenaAllocator::Create(arena);
  auto device_pools = cache::ArenaAllocator::Create(
      arena, [&](size_t bytes) { return (*gpu)->CreateStateBacking(bytes); });
  ASSERT_TRUE(host_pools.ok()) << host_pools.status();
  ASSERT_TRUE(device_pools.ok()) << device_pools.status();
  auto gpu_ops = (*gpu)->CreateOps(gpu_options);
  ASSERT_TRUE(gpu_ops.ok()) << gpu_ops.status();
  auto cpu_ops = kernels::MakeCpuOps(2);
  const std::vector<int32_t> prompt = Tokens(prompt_tokens, 3, on_cpu->config().vocab_size);
  auto on_host = Generate(*on_cpu, *cpu_ops, **host_pools, prompt, options);
  auto on_device = Generate(*on_gpu, **gpu_ops, **device_pools, prompt, options);
  ASSERT_TRUE(on_host.ok()) << on_host.status();
  ASSERT_TRUE(on_device.ok()) << on_device.status();
  if (graph_replays != nullptr) {
    const auto* cuda = dynamic_cast<const kernels::cuda::CudaOps*>(gpu_ops->get());
    ASSERT_NE(cuda, nullptr);
    *graph_replays = cuda->graph_replays();
  }
  *want = *std::move(on_host);
  *got = *std::move(on_device);
}

TEST_P(CudaEngineTest, GenerateMatchesTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  GenerateOptions options;
  options.max_new_tokens = 6;
  options.prefill_chunk = 20;
  options.record_logits = true;
  GenerateResult want, got;
  ASSERT_NO_FATAL_FAILURE(GenerateOnBoth(GetParam(), {}, options, 33, &want, &got));
  EXPECT_EQ(got.output_ids, want.output_ids);
  EXPECT_TRUE(testing::LogitsNear(got.logits, want.logits, 1e-3f));
}

// --gpu-tensor-cores: the prefill's products in TF32 (cuBLAS from 16 rows, the tiled attention's
// one TF32 product): each keeps 11 significant bits of its operands, so the prefill's logits move
// by about 1e-2 of their scale. On an H200 every family stayed under 1e-2 but zamba2-tiny, at
// 1.4e-2: its shared attention block runs at several depths over the hidden state and the
// embeddings side by side (twice the head width), so its roundings reach the logits more often;
// it is held to 2e-2. Only the first token's logits are compared: a near tie may pick another
// token after it.
TEST_P(CudaEngineTest, TensorCoresStayNearTheCpu) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  GenerateOptions options;
  options.max_new_tokens = 1;
  options.prefill_chunk = 48;
  options.record_logits = true;
  GenerateResult want, got;
  ASSERT_NO_FATAL_FAILURE(
      GenerateOnBoth(GetParam(), {.tensor_core_matmul = true}, options, 96, &want, &got));
  const float tolerance = GetParam() == "zamba2-tiny" ? 2e-2f : 1e-2f;
  EXPECT_TRUE(testing::LogitsNear(got.logits, want.logits, tolerance));
}

// --gpu-graphs: the decode steps replayed from CUDA graphs compute exactly what launching their
// kernels one by one does: the same kernels with byte-equal arguments, so the same bits.
TEST_P(CudaEngineTest, GraphsReplayTheSameLogitsBitForBit) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  GenerateOptions options;
  options.max_new_tokens = 12;
  options.prefill_chunk = 20;
  options.record_logits = true;
  GenerateResult cpu, launched, replayed;
  int64_t replays = 0;
  ASSERT_NO_FATAL_FAILURE(GenerateOnBoth(GetParam(), {}, options, 33, &cpu, &launched));
  ASSERT_NO_FATAL_FAILURE(
      GenerateOnBoth(GetParam(), {.cuda_graphs = true}, options, 33, &cpu, &replayed, &replays));
  EXPECT_EQ(replayed.output_ids, launched.output_ids);
  EXPECT_EQ(replayed.logits, launched.logits);
  // Twelve decode steps of one row: the first runs, the second is captured, the rest replay.
  EXPECT_GE(replays, 8);
}

// The serving engine with --gpu-graphs: three requests at once whose batch shrinks as each
// finishes, then a turn that hits the prefix cache; the same tokens and logprobs as without.
TEST_P(CudaEngineTest, TheEngineServesTheSameWithGraphs) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto gpu = ComputeDevice::Open("cuda");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto model = LoadOn(GetParam(), **gpu);
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  std::vector<Outcome> runs[2];
  int64_t replays = 0;
  for (int graphs = 0; graphs < 2; ++graphs) {
    EngineConfig config = Config(**gpu);
    config.cuda_graphs = graphs == 1;
    auto engine = Engine::Create(*model, nullptr, config);
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int r = 0; r < 3; ++r) {
      auto stream =
          (*engine)->Submit(GreedyWithLogprobs(Tokens(20 + 9 * r, 11 + r, vocab), 6 + 5 * r));
      ASSERT_TRUE(stream.ok()) << stream.status();
      streams.push_back(*std::move(stream));
    }
    for (auto& stream : streams) runs[graphs].push_back(Drain(*stream));
    for (Outcome& turn : TwoTurns(**engine, vocab, 10)) runs[graphs].push_back(std::move(turn));
    if (graphs == 1) replays = (*engine)->stats().graph_replays;
  }
  ASSERT_EQ(runs[0].size(), 5u);
  ASSERT_EQ(runs[1].size(), 5u);
  for (size_t i = 0; i < runs[0].size(); ++i) {
    ASSERT_EQ(runs[1][i].finished.finish_reason, FinishReason::kLength)
        << i << ": " << runs[1][i].finished.error;
    EXPECT_EQ(runs[1][i].tokens, runs[0][i].tokens) << i;
    EXPECT_TRUE(testing::SameLogprobs(runs[1][i].logprobs, runs[0][i].logprobs)) << i;
  }
  EXPECT_GT(runs[1][4].finished.usage.cached_tokens, 0);
  EXPECT_GT(replays, 0);  // steady decode steps replayed
}

// Sampling runs on the device (temperature, top-p, penalties, logprobs): a seeded request gets
// the same tokens and logprobs on every run, and only tokens and logprobs cross back.
TEST_P(CudaEngineTest, SeededSamplingOnTheDeviceIsReproducible) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto gpu = ComputeDevice::Open("cuda");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto on_gpu = LoadOn(GetParam(), **gpu);
  ASSERT_NE(on_gpu, nullptr);
  const int32_t vocab = on_gpu->config().vocab_size;
  Request request = testing::Greedy(Tokens(40, 5, vocab), 12);
  request.sampling.greedy = false;
  request.sampling.temperature = 0.9f;
  request.sampling.top_p = 0.95f;
  request.sampling.presence_penalty = 0.3f;
  request.sampling.seed = 1234;
  request.sampling.top_logprobs = 3;
  std::vector<Outcome> runs;
  for (int run = 0; run < 2; ++run) {
    // A fresh engine each time, so the second run samples the same rows, not cached ones.
    auto engine = Engine::Create(*on_gpu, nullptr, Config(**gpu));
    ASSERT_TRUE(engine.ok()) << engine.status();
    auto stream = (*engine)->Submit(request);
    ASSERT_TRUE(stream.ok()) << stream.status();
    runs.push_back(Drain(**stream));
    ASSERT_EQ(runs.back().finished.finish_reason, FinishReason::kLength)
        << runs.back().finished.error;
  }
  EXPECT_EQ(runs[0].tokens, runs[1].tokens);
  EXPECT_TRUE(testing::SameLogprobs(runs[0].logprobs, runs[1].logprobs));
  ASSERT_EQ(runs[0].logprobs.size(), runs[0].tokens.size());
  for (size_t t = 0; t < runs[0].tokens.size(); ++t) {
    ASSERT_EQ(runs[0].logprobs[t].size(), 4u);
    EXPECT_EQ(runs[0].logprobs[t][0].token, runs[0].tokens[t]);
    EXPECT_LE(runs[0].logprobs[t][0].logprob, 0.0f);
    EXPECT_GE(runs[0].logprobs[t][1].logprob, runs[0].logprobs[t][2].logprob);
  }
}

// The engine's default, batch-invariant kernels on the GPU (Hydragen off, whose LSE merge
// reorders sums): a turn that hits the prefix cache gives the bits of the same prompt run cold,
// and requests served together give the bits of each served alone.
void ExpectHitIsMissAndBatchIsAlone(const models::Model& model, ComputeDevice& gpu) {
  const int32_t vocab = model.config().vocab_size;
  EngineConfig config = Config(gpu);
  config.hydragen.enabled = false;
  ASSERT_TRUE(config.batch_invariant);  // the default
  auto fresh_engine = [&] {
    auto engine = Engine::Create(model, nullptr, config);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  };
  auto run_alone = [&](const std::vector<int32_t>& prompt, int32_t new_tokens) {
    auto engine = fresh_engine();
    if (engine == nullptr) return Outcome{};  // the failure is recorded
    auto stream = engine->Submit(GreedyWithLogprobs(prompt, new_tokens));
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? Drain(**stream) : Outcome{};
  };

  // Hit against miss: TwoTurns' second turn extends the first's conversation.
  auto warm = fresh_engine();
  ASSERT_NE(warm, nullptr);
  const std::vector<Outcome> turns = TwoTurns(*warm, vocab, 6);
  ASSERT_EQ(turns.size(), 2u);
  ASSERT_EQ(turns[1].finished.finish_reason, FinishReason::kLength) << turns[1].finished.error;
  ASSERT_GT(turns[1].finished.usage.cached_tokens, 0);
  std::vector<int32_t> second = Tokens(45, 7, vocab);  // TwoTurns' prompts, rebuilt
  second.insert(second.end(), turns[0].tokens.begin(), turns[0].tokens.end());
  const std::vector<int32_t> message = Tokens(13, 8, vocab);
  second.insert(second.end(), message.begin(), message.end());
  const Outcome cold = run_alone(second, 6);
  EXPECT_EQ(cold.finished.usage.cached_tokens, 0);
  EXPECT_EQ(turns[1].tokens, cold.tokens);
  EXPECT_TRUE(testing::SameLogprobs(turns[1].logprobs, cold.logprobs));

  // Together against alone: three requests of different lengths in one batch.
  auto together = fresh_engine();
  ASSERT_NE(together, nullptr);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int r = 0; r < 3; ++r) {
    prompts.push_back(Tokens(20 + 9 * r, 31 + r, vocab));
    auto stream = together->Submit(GreedyWithLogprobs(prompts.back(), 5 + 3 * r));
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*std::move(stream));
  }
  for (int r = 0; r < 3; ++r) {
    const Outcome batched = Drain(*streams[r]);
    ASSERT_EQ(batched.finished.finish_reason, FinishReason::kLength) << batched.finished.error;
    const Outcome alone = run_alone(prompts[r], 5 + 3 * r);
    EXPECT_EQ(batched.tokens, alone.tokens) << r;
    EXPECT_TRUE(testing::SameLogprobs(batched.logprobs, alone.logprobs)) << r;
  }
}

// Speculative decoding on the GPU: a verification pass's rows are decode rows to the
// batch-invariant kernels, and a sampled draft's rows are drawn on the device with the rules
// plain decoding would use, so a prediction (wrong in one place) changes no bit of the output,
// greedy or seeded. Written without a GPU.
TEST_P(CudaEngineTest, APredictionGivesTheBitsOfPlainDecoding) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto gpu = ComputeDevice::Open("cuda");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto model = LoadOn(GetParam(), **gpu);
  ASSERT_NE(model, nullptr);
  const int32_t vocab = model->config().vocab_size;
  EngineConfig config = Config(**gpu);
  config.hydragen.enabled = false;
  for (const bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    Request request = GreedyWithLogprobs(Tokens(33, 12, vocab), 20);
    if (sampled) {
      request.sampling.greedy = false;
      request.sampling.temperature = 0.8f;
      request.sampling.frequency_penalty = 0.5f;
      request.sampling.seed = 77;
    }
    auto run = [&](int32_t draft_tokens, const Request& r) {
      EngineConfig c = config;
      c.scheduler.speculation.draft_tokens = draft_tokens;
      auto engine = Engine::Create(*model, nullptr, c);
      EXPECT_TRUE(engine.ok()) << engine.status();
      if (!engine.ok()) return Outcome{};
      auto stream = (*engine)->Submit(r);
      EXPECT_TRUE(stream.ok()) << stream.status();
      return stream.ok() ? Drain(**stream) : Outcome{};
    };
    const Outcome plain = run(0, request);
    ASSERT_EQ(plain.finished.finish_reason, FinishReason::kLength) << plain.finished.error;
    Request predicted = request;
    predicted.prediction = plain.tokens;
    predicted.prediction[8] = (predicted.prediction[8] + 1) % vocab;
    const Outcome got = run(4, predicted);
    EXPECT_EQ(got.tokens, plain.tokens);
    EXPECT_TRUE(testing::SameLogprobs(got.logprobs, plain.logprobs));
    EXPECT_GT(got.finished.usage.accepted_draft_tokens, 0);
  }
}

// The fixtures' small heads take the row kernel.
TEST_P(CudaEngineTest, BatchInvariantKernelsMakeAHitTheBitsOfAMiss) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto gpu = ComputeDevice::Open("cuda");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto model = LoadOn(GetParam(), **gpu);
  ASSERT_NE(model, nullptr);
  ExpectHitIsMissAndBatchIsAlone(*model, **gpu);
}

// The ~100M presets' heads (64 and 128 wide) take the tensor-core tiles, decode rows included.
TEST(CudaEngineTilesTest, BatchInvariantKernelsMakeAHitTheBitsOfAMiss) {
  TANDEM_SKIP_WITHOUT_CUDA_DEVICE();
  auto gpu = ComputeDevice::Open("cuda");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (const char* preset : {"jamba-100m", "zamba2-100m"}) {
    SCOPED_TRACE(preset);
    models::LoadOptions load;
    load.placer = (*gpu)->weight_placer();
    auto model = models::RandomPresetModel(preset, 1, load);
    ASSERT_TRUE(model.ok()) << model.status();
    ExpectHitIsMissAndBatchIsAlone(**model, **gpu);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CudaEngineTest,
                         ::testing::ValuesIn(tandem::testing::kFamilyFixtures),
                         testing::FixtureTestName);

}  // namespace
}  // namespace tandem::engine

#endif  // TANDEM_HAVE_CUDA
