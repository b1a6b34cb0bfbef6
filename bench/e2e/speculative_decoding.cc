// Speculative decoding through the real scheduler (engine/scheduler.h, SpeculationConfig) on a
// random-weight ~100M model: decode tokens/s with drafts from a prediction, against plain
// decoding, in one run. A prediction that is the plain output measures the best case (every
// draft accepted); one with runs of four tokens edited, a client's file that the model rewrites
// in places; one with every token wrong, the cost of verifying drafts that never pay. The
// requests sample (seeded), since a random model's greedy output soon loops, which would flatter
// prompt lookup. Every run's tokens are checked against the
// plain run's (speculation must not change the output).
//
//   build/release/bench/speculative_decoding [--preset zamba2-100m | --model DIR] [--threads N]
//                                            [--prompt 128] [--tokens 64] [--batch 1]
// Decode tokens/s is the engine's own timing: output tokens after the first over the time from
// the first token to the end, summed over the batch's requests (run together). Each scenario
// runs three times, each beside a plain run; "× plain" is the median of the three ratios. A second
// table gives the cost of one verification pass against a plain decode step (the loss when every
// draft is rejected).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/e2e/bench_model.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "engine/sequence_memory.h"
#include "kernels/backends.h"

namespace tandem {
namespace {

struct Scenario {
  const char* name;
  int32_t draft_tokens;  // 0: plain decoding
  int edit_every;        // in every `edit_every` predicted tokens (0: none), the last 4 differ
  bool predict = true;   // send the (altered) plain output as the prediction
  bool prompt_lookup = false;
};

struct Result {
  double decode_tokens_per_second = 0;
  int64_t accepted = 0, rejected = 0;
  std::vector<std::vector<int32_t>> tokens;
};

std::unique_ptr<engine::Scheduler> MakeScheduler(const models::Model& model,
                                                 engine::ModelRunner& runner,
                                                 cache::BlockAllocator& allocator,
                                                 const cache::ModelSpec& spec,
                                                 const Scenario& scenario, int batch) {
  engine::SchedulerConfig config;
  config.cache.policy = engine::CachePolicy::kNone;
  config.speculation.draft_tokens = scenario.draft_tokens;
  config.speculation.prompt_lookup = scenario.prompt_lookup;
  config.speculation.max_batch = batch;
  return std::make_unique<engine::Scheduler>(model, nullptr, &allocator, spec, &runner, config);
}

// The worst case: what one pass of a sequence's last token and k drafted tokens costs (logits
// after each, the SSM state saved after each but the last), against a plain decode step. Every
// draft rejected makes decoding this much slower.
int VerificationCost(const models::Model& model, engine::ModelRunner& runner,
                     cache::BlockAllocator& allocator, int prompt_tokens) {
  constexpr int kSteps = 24;
  std::printf("\n| pass | tokens | ms per pass | × a decode step |\n|---|---|---|---|\n");
  double decode_ms = 0;
  for (const int drafts : {0, 2, 4, 8}) {
    auto memory = engine::SequenceMemory::Create(allocator, model);
    if (!memory.ok() || !memory->Reserve(prompt_tokens + (kSteps + 1) * (drafts + 1)).ok()) {
      return 1;
    }
    std::vector<engine::SsmCheckpoint> blocks;
    std::vector<models::SsmSnapshot> snapshots;
    for (int j = 0; model.config().num_ssm_layers > 0 && j < drafts; ++j) {
      auto block = engine::SsmCheckpoint::Allocate(allocator);
      if (!block.ok()) return 1;
      snapshots.push_back({j + 1, block->data()});
      blocks.push_back(std::move(*block));
    }
    std::vector<int32_t> prompt(prompt_tokens), step(drafts + 1);
    for (int i = 0; i < prompt_tokens; ++i) prompt[i] = 4 + (i * 7919) % 1000;
    for (int i = 0; i <= drafts; ++i) step[i] = 5 + i;
    std::vector<absl::Status> errors;
    const models::SequenceInput first{&memory->state(), prompt, {}, false};
    if (!runner.Run({&first, 1}, &errors).ok()) return 1;
    const models::SequenceInput pass{&memory->state(), step, snapshots, drafts > 0};
    const engine::LogitsUse use = engine::LogitsUse::kArgmax;
    if (!runner.Run({&pass, 1}, &errors, {&use, 1}).ok()) return 1;  // warm-up
    const auto start = engine::Clock::now();
    for (int s = 0; s < kSteps; ++s) {
      if (!runner.Run({&pass, 1}, &errors, {&use, 1}).ok()) return 1;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(engine::Clock::now() - start).count() / kSteps;
    if (drafts == 0) decode_ms = ms;
    std::printf("| %s | %d | %.2f | %.2f |\n", drafts == 0 ? "decode step" : "verification",
                drafts + 1, ms, ms / decode_ms);
  }
  return 0;
}

int Run(const bench::BenchFlags& flags, int batch) {
  absl::StatusOr<bench::BenchModel> loaded = bench::LoadBenchModel(flags);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  const models::Model& model = *loaded->model;
  const std::vector<int32_t>& prompt = loaded->prompt;
  const cache::ModelSpec& spec = loaded->spec;
  const int threads = flags.threads, new_tokens = flags.tokens;
  auto allocator = bench::HostAllocator(*loaded);
  if (!allocator.ok()) return 1;
  engine::ModelRunner runner(model, kernels::MakeCpuOps(threads, /*batch_invariant=*/true));

  std::vector<engine::Request> requests(batch);
  for (int b = 0; b < batch; ++b) {
    requests[b].prompt = prompt;
    requests[b].max_new_tokens = new_tokens;
    requests[b].ignore_eos = true;
    // Seeded sampling, a seed per request: greedy output soon repeats itself, which would
    // flatter prompt lookup. (A random model's output is one token over and over anyway, so
    // only the rows where every draft is right, or none is, mean anything with one.)
    requests[b].sampling.greedy = false;
    requests[b].sampling.temperature = 1.0f;
    requests[b].sampling.seed = 17 + b;
  }
  auto run = [&](const Scenario& scenario, const Result* plain) {
    auto scheduler = MakeScheduler(model, runner, *allocator->allocator, spec, scenario, batch);
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (int b = 0; b < batch; ++b) {
      engine::Request r = requests[b];
      if (plain != nullptr && scenario.predict) {
        r.prediction = plain->tokens[b];
        // An edit: a run of tokens the output has and the prediction does not, as where a
        // client's file differs from the model's rewrite of it.
        for (size_t i = 0; scenario.edit_every > 0 && i < r.prediction.size(); ++i) {
          if (static_cast<int>(i % scenario.edit_every) >= scenario.edit_every - 4) {
            r.prediction[i] =
                (r.prediction[i] + 1 + static_cast<int32_t>(i)) % model.config().vocab_size;
          }
        }
      }
      streams.push_back(std::make_shared<engine::RequestStream>(b + 1));
      scheduler->Add(b + 1, std::move(r), streams.back(), engine::Clock::now());
    }
    while (!scheduler->idle()) scheduler->Step();
    Result result;
    double decode_seconds = 0;
    int64_t decode_tokens = 0;
    for (auto& stream : streams) {
      std::vector<int32_t>& tokens = result.tokens.emplace_back();
      engine::Event e;
      while (stream->Next(&e)) {
        tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
        if (e.kind != engine::Event::Kind::kFinished) continue;
        decode_seconds = std::max(decode_seconds, e.timings.finished - e.timings.first_token);
        decode_tokens += e.usage.completion_tokens - 1;
        result.accepted += e.usage.accepted_draft_tokens;
        result.rejected += e.usage.rejected_draft_tokens;
      }
    }
    result.decode_tokens_per_second = decode_tokens / decode_seconds;
    return result;
  };

  std::printf("%s, %.1fM parameters, batch %d, prompt %zu, %d new tokens, %d threads\n\n",
              flags.name().c_str(), model.parameters() / 1e6, batch, prompt.size(), new_tokens,
              threads);
  std::printf(
      "| decoding | drafts | accepted | rejected | decode tok/s | × plain | same output |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  run({"warm-up", 0, 0, false}, nullptr);
  const Scenario plain_scenario = {"plain", 0, 0, false};
  const Result plain = run(plain_scenario, nullptr);
  std::printf("| plain | - | - | - | %.1f | 1.00 | - |\n", plain.decode_tokens_per_second);
  const Scenario scenarios[] = {
      {"prediction, all right", 2, 0},
      {"prediction, all right", 4, 0},
      {"prediction, all right", 8, 0},
      {"prediction, 4 tokens edited in every 32", 4, 32},
      {"prediction, 4 tokens edited in every 8", 4, 8},
      {"prediction, every token wrong", 4, 4},
      {"prompt lookup", 4, 0, false, true},
      {"prediction, 4 edited in every 32, + prompt lookup", 4, 32, true, true},
  };
  // This machine's speed drifts by tens of percent within seconds: each scenario runs beside a
  // plain run kVotes times, and the median of those pairs' ratios is reported.
  constexpr int kVotes = 3;
  for (const Scenario& scenario : scenarios) {
    std::vector<double> ratios, speeds;
    Result r;
    bool same = true;
    for (int vote = 0; vote < kVotes; ++vote) {
      const Result beside = run(plain_scenario, nullptr);
      r = run(scenario, &plain);
      same &= r.tokens == plain.tokens && beside.tokens == plain.tokens;
      ratios.push_back(r.decode_tokens_per_second / beside.decode_tokens_per_second);
      speeds.push_back(r.decode_tokens_per_second);
    }
    std::sort(ratios.begin(), ratios.end());
    std::sort(speeds.begin(), speeds.end());
    std::printf("| %s | %d | %lld | %lld | %.1f | %.2f | %s |\n", scenario.name,
                scenario.draft_tokens, static_cast<long long>(r.accepted),
                static_cast<long long>(r.rejected), speeds[kVotes / 2], ratios[kVotes / 2],
                same ? "yes" : "NO");
    std::fflush(stdout);
  }
  return VerificationCost(model, runner, *allocator->allocator, static_cast<int>(prompt.size()));
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::bench::BenchFlags flags;
  int batch = 1;
  if (!tandem::bench::ReadBenchFlags(argc, argv, &flags, {{"--batch", &batch}})) return 2;
  if (flags.prompt < 1 || flags.tokens < 2 || batch < 1 || batch > 256) {
    std::fprintf(stderr, "--prompt >= 1, --tokens >= 2, --batch in [1, 256]\n");
    return 2;
  }
  return tandem::Run(flags, batch);
}
