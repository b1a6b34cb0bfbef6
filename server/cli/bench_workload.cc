#include "server/cli/bench_workload.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/cli/workload_tokens.h"

namespace tandem::cli {
namespace {

class SessionWorkload final : public BenchWorkload {
 public:
  SessionWorkload(const SessionWorkloadOptions& options, int32_t vocab, size_t max_prompt_tokens)
      : options_(options),
        vocab_(vocab),
        max_prompt_tokens_(max_prompt_tokens),
        system_(RandomTokens(options.system_tokens, MixBits(options.seed), vocab)) {}

  bool Exhausted() const override { return false; }

  BenchRequest Next() override {
    while (true) {
      uint64_t id;
      if (!waiting_.empty()) {
        id = waiting_.front();
        waiting_.pop_front();
      } else {
        id = next_session_++;
        sessions_[id].history = system_;
      }
      Session& session = sessions_[id];
      // The same stream numbering as bench-engine's multi-turn workload.
      const std::vector<int32_t> user = RandomTokens(
          options_.user_tokens,
          MixBits(options_.seed + 7919 * (id * options_.turns + session.turns_sent + 1)), vocab_);
      if (session.history.size() + user.size() > max_prompt_tokens_) {
        sessions_.erase(id);  // the conversation outgrew the server; a fresh one takes over
        continue;
      }
      session.history.insert(session.history.end(), user.begin(), user.end());
      ++session.turns_sent;
      return BenchRequest{session.history, options_.max_new_tokens, id};
    }
  }

  void Finished(const BenchRequest& request, bool ok, const std::vector<int32_t>& output) override {
    auto it = sessions_.find(request.session);
    if (it == sessions_.end()) return;
    Session& session = it->second;
    if (!ok || session.turns_sent >= options_.turns) {
      sessions_.erase(it);
      return;
    }
    session.history.insert(session.history.end(), output.begin(), output.end());
    waiting_.push_back(request.session);
  }

  std::string Describe() const override {
    return absl::StrCat("sessions: system ", options_.system_tokens, " + ", options_.turns,
                        " turns × (user ", options_.user_tokens, ", output ",
                        options_.max_new_tokens, ") tokens");
  }

 private:
  struct Session {
    std::vector<int32_t> history;  // everything sent and answered so far
    size_t turns_sent = 0;
  };

  const SessionWorkloadOptions options_;
  const int32_t vocab_;
  const size_t max_prompt_tokens_;
  const std::vector<int32_t> system_;
  absl::flat_hash_map<uint64_t, Session> sessions_;
  std::deque<uint64_t> waiting_;  // sessions whose last answer came back, oldest first
  uint64_t next_session_ = 0;
};

class TraceWorkload final : public BenchWorkload {
 public:
  TraceWorkload(cache::Trace trace, const TraceWorkloadOptions& options, int32_t vocab,
                size_t max_prompt_tokens)
      : trace_(std::move(trace)),
        options_(options),
        vocab_(vocab),
        max_prompt_tokens_(max_prompt_tokens) {}

  bool Exhausted() const override { return next_ >= trace_.size(); }

  std::optional<double> NextArrival() const override {
    if (Exhausted()) return std::nullopt;
    return (trace_.requests[next_].arrival_s - trace_.requests[0].arrival_s) * options_.time_scale;
  }

  BenchRequest Next() override {
    const size_t i = next_++;
    BenchRequest request;
    request.prompt = TracePrompt(trace_, i, max_prompt_tokens_, vocab_);
    request.max_new_tokens = static_cast<int32_t>(std::clamp<size_t>(
        trace_.requests[i].output_tokens, 1, static_cast<size_t>(options_.max_new_tokens)));
    request.session = trace_.requests[i].session;
    return request;
  }

  std::string Describe() const override {
    return absl::StrCat("trace ", trace_.name, ": ", trace_.size(), " requests, prompts cut to ",
                        max_prompt_tokens_, " tokens, outputs to ", options_.max_new_tokens);
  }

 private:
  const cache::Trace trace_;
  const TraceWorkloadOptions options_;
  const int32_t vocab_;
  const size_t max_prompt_tokens_;
  size_t next_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BenchWorkload>> MakeSessionWorkload(
    const SessionWorkloadOptions& options, int32_t vocab, size_t max_prompt_tokens) {
  if (vocab <= 4) return absl::InvalidArgumentError("the model's vocabulary is too small");
  if (options.turns == 0 || options.user_tokens == 0 || options.max_new_tokens < 1) {
    return absl::InvalidArgumentError("sessions need turns, user tokens and output tokens > 0");
  }
  if (options.system_tokens + options.user_tokens > max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a session's first prompt (", options.system_tokens, " system + ", options.user_tokens,
        " user tokens) exceeds the prompt limit of ", max_prompt_tokens, " tokens"));
  }
  return std::make_unique<SessionWorkload>(options, vocab, max_prompt_tokens);
}

absl::StatusOr<std::unique_ptr<BenchWorkload>> MakeTraceWorkload(
    cache::Trace trace, const TraceWorkloadOptions& options, int32_t vocab,
    size_t max_prompt_tokens) {
  if (vocab <= 4) return absl::InvalidArgumentError("the model's vocabulary is too small");
  if (trace.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("trace ", trace.name, " has no requests"));
  }
  if (max_prompt_tokens == 0 || options.max_new_tokens < 1 || !(options.time_scale >= 0)) {
    return absl::InvalidArgumentError(
        "trace replay: prompt and output limits must be positive, the time scale >= 0");
  }
  return std::make_unique<TraceWorkload>(std::move(trace), options, vocab, max_prompt_tokens);
}

}  // namespace tandem::cli
