// Several choices of one prompt (OpenAI's `n`, Engine::SubmitChoices) through the real scheduler,
// against the same number of separate requests for that prompt sent together, as a client
// without `n` would send them: the choices prefill the prompt once and restore it from the
// prefix cache; the separate requests, none of them cached yet, each prefill it. Both runs use
// the same seeds (engine::ChoiceSeed), so their outputs must be equal, which is checked.
//
//   build/release/bench/choices [--preset zamba2-100m | --model DIR] [--threads N]
//                               [--prompt 1024] [--tokens 16]
// Reported per n: the wall time until every answer finished, the time until the last choice's
// first token, and the prompt tokens run through the model. Each n runs three times, each beside
// a run of separate requests; "×" columns are the medians of the three pairs' ratios (this
// machine's speed drifts by tens of percent within seconds).
#include <algorithm>
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
  double seconds = 0;           // until every answer finished
  double last_first_token = 0;  // seconds until the last choice's first token
  uint64_t prefill_tokens = 0;  // run through the model
  std::vector<std::vector<int32_t>> tokens;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int Run(const bench::BenchFlags& flags) {
  absl::StatusOr<bench::BenchModel> loaded = bench::LoadBenchModel(flags);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  const models::Model& model = *loaded->model;
  // Choices that restore one cached prompt decode beside each other: Hydragen off, so that the
  // figure is the prefill saved alone (exact on this backend, it would change no output).
  models::HydragenConfig hydragen;
  hydragen.enabled = false;
  engine::ModelRunner runner(model, kernels::MakeCpuOps(flags.threads, /*batch_invariant=*/true),
                             hydragen);

  engine::Request request;
  request.prompt = loaded->prompt;
  request.max_new_tokens = flags.tokens;
  request.ignore_eos = true;
  request.sampling.greedy = false;
  request.sampling.temperature = 1.0f;
  request.sampling.seed = 17;

  // `as_choices`: queued as SubmitChoices queues them; else as separate requests.
  auto run = [&](int n, bool as_choices) {
    auto allocator = bench::HostAllocator(*loaded);
    if (!allocator.ok()) std::abort();
    engine::SchedulerConfig config;
    config.cache.policy = engine::CachePolicy::kMarconi;
    config.cache.alpha = 1.0;  // no online tuning in the timed runs
    engine::Scheduler scheduler(model, nullptr, allocator->allocator.get(), loaded->spec, &runner,
                                config);
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    const auto start = engine::Clock::now();
    for (int i = 0; i < n; ++i) {
      engine::Request choice = request;
      choice.sampling.seed = engine::ChoiceSeed(request.sampling.seed, i);
      streams.push_back(std::make_shared<engine::RequestStream>(i + 1));
      scheduler.Add(i + 1, std::move(choice), streams.back(), start, as_choices && i > 0 ? 1 : 0);
    }
    while (!scheduler.idle()) scheduler.Step();
    Result result;
    result.seconds = std::chrono::duration<double>(engine::Clock::now() - start).count();
    result.prefill_tokens = scheduler.stats().prefill_tokens;
    for (auto& stream : streams) {
      std::vector<int32_t>& tokens = result.tokens.emplace_back();
      engine::Event e;
      while (stream->Next(&e)) {
        tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
        if (e.kind == engine::Event::Kind::kFinished) {
          result.last_first_token = std::max(result.last_first_token, e.timings.first_token);
        }
      }
    }
    return result;
  };

  std::printf("%s, %.1fM parameters, prompt %zu, %d new tokens, %d threads\n\n",
              flags.name().c_str(), model.parameters() / 1e6, loaded->prompt.size(), flags.tokens,
              flags.threads);
  std::printf(
      "| n | prompt tokens run (choices / separate) | all finished, s (choices) | "
      "× faster | last first token, s (choices) | × sooner | same output |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  run(2, true);  // warm-up
  constexpr int kVotes = 3;
  for (const int n : {2, 4, 8}) {
    std::vector<double> faster, sooner, seconds, first_token;
    Result choices, separate;
    bool same = true;
    for (int vote = 0; vote < kVotes; ++vote) {
      separate = run(n, false);
      choices = run(n, true);
      same &= choices.tokens == separate.tokens;
      faster.push_back(separate.seconds / choices.seconds);
      sooner.push_back(separate.last_first_token / choices.last_first_token);
      seconds.push_back(choices.seconds);
      first_token.push_back(choices.last_first_token);
    }
    std::printf("| %d | %llu / %llu | %.2f | %.2f | %.2f | %.2f | %s |\n", n,
                static_cast<unsigned long long>(choices.prefill_tokens),
                static_cast<unsigned long long>(separate.prefill_tokens), Median(seconds),
                Median(faster), Median(first_token), Median(sooner), same ? "yes" : "NO");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::bench::BenchFlags flags;
  flags.prompt = 1024;
  flags.tokens = 16;
  if (!tandem::bench::ReadBenchFlags(argc, argv, &flags)) return 2;
  if (flags.prompt < 2 || flags.tokens < 1) {
    std::fprintf(stderr, "--prompt >= 2, --tokens >= 1\n");
    return 2;
  }
  return tandem::Run(flags);
}
