// What scoring a prompt costs (Request::prompt_logprobs, OpenAI's echo with logprobs): requests
// that score their prompt and generate one token, through the real scheduler, against the same
// requests without scoring, in one run. Scoring adds the LM head on every prompt token instead of
// the last one, a log-softmax and top-n over the vocabulary per token on the host, and shares
// SchedulerConfig::prompt_logprob_rows prompt tokens per step among the scoring requests. The
// generated tokens must be equal, which is checked.
//
//   build/release/bench/prompt_scoring [--preset zamba2-100m | --model DIR] [--threads N]
//                                      [--prompt 1024] [--requests 4] [--rows 256] [--top 1]
// Reported: prompt tokens scored per second, and the time of the scoring run over the plain one
// (median of three pairs run side by side: this machine's speed drifts within seconds).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/e2e/bench_model.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "kernels/backends.h"

namespace tandem {
namespace {

struct Result {
  double seconds = 0;
  uint64_t steps = 0;
  size_t scored = 0;  // prompt tokens with a score
  std::vector<std::vector<int32_t>> tokens;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int Run(const bench::BenchFlags& flags, int requests, int rows, int top) {
  absl::StatusOr<bench::BenchModel> loaded = bench::LoadBenchModel(flags);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  const models::Model& model = *loaded->model;
  engine::ModelRunner runner(model, kernels::MakeCpuOps(flags.threads, /*batch_invariant=*/true));

  // Each request its own text (a rotation of the prompt), so none restores another's from the
  // cache in the plain run either.
  auto run = [&](bool scoring) {
    auto allocator = bench::HostAllocator(*loaded);
    if (!allocator.ok()) std::abort();
    engine::SchedulerConfig config;
    config.cache.policy = engine::CachePolicy::kMarconi;
    config.cache.alpha = 1.0;  // no online tuning in the timed runs
    config.prompt_logprob_rows = rows;
    engine::Scheduler scheduler(model, nullptr, allocator->allocator.get(), loaded->spec, &runner,
                                config);
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    const auto start = engine::Clock::now();
    for (int i = 0; i < requests; ++i) {
      engine::Request request;
      request.prompt = loaded->prompt;
      std::rotate(request.prompt.begin(), request.prompt.begin() + i * 7 % request.prompt.size(),
                  request.prompt.end());
      request.max_new_tokens = 1;
      request.ignore_eos = true;
      if (scoring) request.prompt_logprobs = top;
      streams.push_back(std::make_shared<engine::RequestStream>(i + 1));
      scheduler.Add(i + 1, std::move(request), streams.back(), start);
    }
    while (!scheduler.idle()) scheduler.Step();
    Result result;
    result.seconds = std::chrono::duration<double>(engine::Clock::now() - start).count();
    result.steps = scheduler.stats().steps;
    for (auto& stream : streams) {
      std::vector<int32_t>& tokens = result.tokens.emplace_back();
      engine::Event e;
      while (stream->Next(&e)) {
        tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
        result.scored += e.prompt_logprobs.size();
      }
    }
    return result;
  };

  std::printf(
      "%s, %.1fM parameters, vocabulary %d, %d requests of %zu prompt tokens, top %d, "
      "%d scoring rows per step, %d threads\n\n",
      flags.name().c_str(), model.parameters() / 1e6, model.config().vocab_size, requests,
      loaded->prompt.size(), top, rows, flags.threads);
  run(true);  // warm-up
  constexpr int kVotes = 3;
  std::vector<double> slower, scored_per_second, plain_per_second;
  Result scoring, plain;
  bool same = true;
  for (int vote = 0; vote < kVotes; ++vote) {
    plain = run(false);
    scoring = run(true);
    same &= scoring.tokens == plain.tokens;
    slower.push_back(scoring.seconds / plain.seconds);
    scored_per_second.push_back(static_cast<double>(scoring.scored) / scoring.seconds);
    plain_per_second.push_back(static_cast<double>(requests) *
                               static_cast<double>(loaded->prompt.size()) / plain.seconds);
  }
  std::printf("| run | steps | prompt tokens per s | scoring time / plain time | same tokens |\n");
  std::printf("|---|---|---|---|---|\n");
  std::printf("| plain | %llu | %.0f | | |\n", static_cast<unsigned long long>(plain.steps),
              Median(plain_per_second));
  std::printf("| scoring (%zu scored) | %llu | %.0f | %.2f | %s |\n", scoring.scored,
              static_cast<unsigned long long>(scoring.steps), Median(scored_per_second),
              Median(slower), same ? "yes" : "NO");
  return same ? 0 : 1;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::bench::BenchFlags flags;
  flags.prompt = 1024;
  int requests = 4, rows = 256, top = 1;
  if (!tandem::bench::ReadBenchFlags(
          argc, argv, &flags, {{"--requests", &requests}, {"--rows", &rows}, {"--top", &top}})) {
    return 2;
  }
  if (flags.prompt < 2 || requests < 1 || rows < 1 || top < 0 || top > 20) {
    std::fprintf(stderr, "--prompt >= 2, --requests >= 1, --rows >= 1, --top in [0, 20]\n");
    return 2;
  }
  return tandem::Run(flags, requests, rows, top);
}
