#include "server/cli/engine_replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/cli/workload_tokens.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Submits one request and reads its stream to the end.
RequestRecord RunOne(engine::Engine& engine, engine::Request request,
                     std::vector<int32_t>* output) {
  RequestRecord record;
  record.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream = engine.Submit(std::move(request));
  if (!stream.ok()) return record;
  engine::Event event;
  bool first = true;
  while ((*stream)->Next(&event)) {
    if (event.kind == engine::Event::Kind::kTokens) {
      if (first) record.ttft_seconds = Since(start);
      first = false;
      if (output) output->insert(output->end(), event.tokens.begin(), event.tokens.end());
    } else {
      record.ok = event.finish_reason == engine::FinishReason::kLength ||
                  event.finish_reason == engine::FinishReason::kStop;
      record.cached_tokens = event.usage.cached_tokens;
      record.completion_tokens = event.usage.completion_tokens;
    }
  }
  record.e2e_seconds = Since(start);
  return record;
}

engine::Request GreedyRequest(std::vector<int32_t> prompt, size_t max_new_tokens) {
  engine::Request r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = static_cast<int32_t>(max_new_tokens);
  r.ignore_eos = true;  // random-weight models: every request generates the same length
  return r;
}

void SleepUntil(Clock::time_point t) { std::this_thread::sleep_until(t); }

}  // namespace

absl::StatusOr<ReplayResult> ReplayMultiTurn(engine::Engine& engine, const MultiTurnWorkload& w) {
  if (w.sessions == 0 || w.turns == 0 || w.user_tokens + w.system_tokens == 0 ||
      w.output_tokens == 0 || !(w.sessions_per_second > 0) || w.think_seconds < 0) {
    return absl::InvalidArgumentError(
        "workload: sessions, turns, output tokens, prompt tokens and sessions per second must be "
        "positive, think time non-negative");
  }
  const int32_t vocab = engine.model().config().vocab_size;
  const std::vector<int32_t> system = RandomTokens(w.system_tokens, MixBits(w.seed), vocab);
  ReplayResult result;
  result.records.resize(w.sessions * w.turns);
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> sessions;
  for (size_t s = 0; s < w.sessions; ++s) {
    sessions.emplace_back([&, s] {
      SleepUntil(start + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(s / w.sessions_per_second)));
      std::vector<int32_t> history = system;
      for (size_t t = 0; t < w.turns; ++t) {
        const std::vector<int32_t> user =
            RandomTokens(w.user_tokens, MixBits(w.seed + 7919 * (s * w.turns + t + 1)), vocab);
        history.insert(history.end(), user.begin(), user.end());
        std::vector<int32_t> output;
        result.records[s * w.turns + t] =
            RunOne(engine, GreedyRequest(history, w.output_tokens), &output);
        history.insert(history.end(), output.begin(), output.end());
        if (t + 1 < w.turns) {
          std::this_thread::sleep_for(std::chrono::duration<double>(w.think_seconds));
        }
      }
    });
  }
  for (auto& t : sessions) t.join();
  result.wall_seconds = Since(start);
  result.stats = engine.stats();
  return result;
}

absl::StatusOr<ReplayResult> ReplayTrace(engine::Engine& engine, const cache::Trace& trace,
                                         const TraceReplayOptions& options) {
  if (options.clients == 0 || !(options.time_scale >= 0) || options.max_prompt_tokens == 0 ||
      options.max_output_tokens == 0) {
    return absl::InvalidArgumentError(
        "trace replay: clients, prompt and output limits must be positive, time scale >= 0");
  }
  const int32_t vocab = engine.model().config().vocab_size;
  const size_t n = std::min(options.max_requests, trace.size());
  ReplayResult result;
  result.records.resize(n);
  std::atomic<size_t> next{0};
  const double t0 = n > 0 ? trace.requests[0].arrival_s : 0;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> clients;
  for (size_t c = 0; c < std::min(options.clients, n); ++c) {
    clients.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) {
        std::vector<int32_t> prompt = TracePrompt(trace, i, options.max_prompt_tokens, vocab);
        const size_t out =
            std::clamp<size_t>(trace.requests[i].output_tokens, 1, options.max_output_tokens);
        SleepUntil(start +
                   std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                       (trace.requests[i].arrival_s - t0) * options.time_scale)));
        result.records[i] = RunOne(engine, GreedyRequest(std::move(prompt), out), nullptr);
      }
    });
  }
  for (auto& t : clients) t.join();
  result.wall_seconds = Since(start);
  result.stats = engine.stats();
  return result;
}

}  // namespace tandem::cli
