#include "cache/workloads.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::cache {
namespace {

// Log-normal with the given median and σ (of the log), rounded and clipped to [lo, hi].
size_t LogNormal(std::mt19937_64& rng, double median, double sigma, size_t lo, size_t hi) {
  std::normal_distribution<double> n(std::log(median), sigma);
  const double v = std::exp(n(rng));
  return std::clamp<size_t>(static_cast<size_t>(std::llround(v)), lo, hi);
}

struct SessionShape {
  size_t min_turns, max_turns;
  double extra_turns_mean;           // turns beyond min_turns ~ geometric with this mean
  double first_median, first_sigma;  // first prompt (system + first user turn)
  double user_median, user_sigma;    // later user turns / observations
  double reply_median, reply_sigma;  // model responses
  bool agent;                        // swebench: Poisson gaps instead of typing
};

// Where the paper is silent the numbers are ours:
//  lmsys: LMSYS-Chat-1M averages ~70 prompt and ~215 response tokens per turn; ≥ 10 turns.
//  sharegpt: longer prompts and answers than LMSys (ShareGPT V3 averages ~300 tokens/turn).
//  swebench: SWE-agent trajectories open with a ~3k-token system prompt + issue, observations
//  collapsed to a few hundred tokens, short actions; up to 50 turns.
SessionShape Shape(const std::string& name) {
  if (name == "lmsys") return {10, 40, 4, 60, 1.0, 50, 1.0, 180, 0.8, false};
  if (name == "sharegpt") return {10, 40, 5, 90, 1.1, 70, 1.1, 260, 0.7, false};
  return {20, 50, 0, 3000, 0.35, 350, 1.0, 120, 0.6, true};
}

}  // namespace

std::vector<std::string> SessionWorkloadNames() { return {"lmsys", "sharegpt", "swebench"}; }

absl::StatusOr<Trace> GenerateSessionWorkload(const std::string& name,
                                              const WorkloadOptions& options) {
  const auto names = SessionWorkloadNames();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown workload '", name, "' (expected ", absl::StrJoin(names, ", "), ")"));
  }
  if (!(options.sessions_per_second > 0)) {
    return absl::InvalidArgumentError("sessions_per_second must be positive");
  }
  const SessionShape shape = Shape(name);
  Trace trace;
  trace.name = name;
  std::mt19937_64 rng(options.seed);
  for (size_t s = 0; s < options.sessions; ++s) {
    std::mt19937_64 srng(rng());
    size_t turns = shape.min_turns;
    if (shape.agent) {
      turns = std::uniform_int_distribution<size_t>(shape.min_turns, shape.max_turns)(srng);
    } else {
      std::geometric_distribution<size_t> extra(1.0 / (1.0 + shape.extra_turns_mean));
      turns = std::min(shape.max_turns, shape.min_turns + extra(srng));
    }
    std::vector<TokenId> stream;
    double t = double(s) / options.sessions_per_second;
    std::uniform_int_distribution<TokenId> token(0, (1 << 30) - 1);
    const uint32_t stream_id = static_cast<uint32_t>(trace.streams.size());
    std::vector<TraceRequest> reqs;
    for (size_t turn = 0; turn < turns; ++turn) {
      const size_t user = turn == 0
                              ? LogNormal(srng, shape.first_median, shape.first_sigma, 8, 16384)
                              : LogNormal(srng, shape.user_median, shape.user_sigma, 4, 8192);
      const size_t reply = LogNormal(srng, shape.reply_median, shape.reply_sigma, 4, 4096);
      if (stream.size() + user + reply > options.max_context) break;
      if (turn > 0) {
        if (shape.agent) {
          t += double(std::poisson_distribution<int>(options.avg_response_time_s * 10)(srng)) / 10;
        } else {
          // Reading the answer is folded into typing; words ≈ tokens / 1.3 at 90 wpm.
          t += (double(user) / 1.3) / (90.0 / 60.0);
        }
      }
      for (size_t i = 0; i < user; ++i) stream.push_back(token(srng));
      TraceRequest r;
      r.arrival_s = t;
      r.session = s;
      r.turn = static_cast<uint32_t>(turn);
      r.input_tokens = stream.size();
      r.output_tokens = reply;
      r.stream = stream_id;
      for (size_t i = 0; i < reply; ++i) stream.push_back(token(srng));
      reqs.push_back(r);
    }
    if (reqs.empty()) continue;
    trace.streams.push_back(std::move(stream));
    for (auto& r : reqs) trace.requests.push_back(r);
  }
  std::stable_sort(
      trace.requests.begin(), trace.requests.end(),
      [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  return trace;
}

std::vector<std::string> AllocWorkloadNames() {
  return {"uniform_short", "mixed_long", "agentic_burst", "sharegpt_replay"};
}

absl::StatusOr<std::vector<AllocRequest>> GenerateAllocWorkload(const std::string& name,
                                                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  std::vector<AllocRequest> out;
  if (name == "uniform_short") {
    for (size_t i = 0; i < 512; ++i) out.push_back({uni(128, 1024), uni(64, 256), i});
  } else if (name == "mixed_long") {
    std::bernoulli_distribution long_prompt(0.2);
    for (size_t i = 0; i < 256; ++i) {
      const size_t p = long_prompt(rng) ? uni(16384, 65536) : uni(512, 4096);
      out.push_back({p, uni(128, 512), i});
    }
  } else if (name == "agentic_burst") {
    // Poisson(10) arrivals per tick; prompt LogNormal(8.5, 1.0) clipped to [64, 65536].
    std::poisson_distribution<int> per_tick(10);
    uint64_t tick = 0;
    while (out.size() < 256) {
      const int n = per_tick(rng);
      for (int k = 0; k < n && out.size() < 256; ++k) {
        out.push_back({LogNormal(rng, std::exp(8.5), 1.0, 64, 65536), uni(64, 256), tick});
      }
      ++tick;
    }
  } else if (name == "sharegpt_replay") {
    // The AVMP artifact resamples ShareGPT prompt lengths from a file we do not have; a
    // log-normal with ShareGPT's median (~100 tokens) and heavy tail stands in for it.
    for (size_t i = 0; i < 512; ++i) {
      out.push_back(
          {LogNormal(rng, 100, 1.2, 16, 4096), LogNormal(rng, std::exp(4.5), 1.0, 32, 2048), i});
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown workload '", name, "' (expected ",
                                                   absl::StrJoin(AllocWorkloadNames(), ", "), ")"));
  }
  return out;
}

}  // namespace tandem::cache
