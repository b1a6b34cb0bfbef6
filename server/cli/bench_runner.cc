#include "server/cli/bench_runner.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "server/client/stream_call.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Clock::duration FromSeconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// One call from send to end. The call's own thread fills it (its handlers never overlap); the
// runner's thread reads it once the call is done.
struct Call {
  BenchRequest request;
  CallRecord record;
  std::vector<int32_t> output;
  Clock::time_point start;
  Clock::time_point last_chunk;
};

class Runner {
 public:
  Runner(const client::Connection& connection, BenchWorkload& workload, const LoadOptions& options,
         BenchRecorder& recorder)
      : connection_(connection),
        workload_(workload),
        options_(options),
        recorder_(recorder),
        arrivals_(options.seed) {}

  LoadResult Run() {
    start_ = Clock::now();
    if (options_.duration_seconds) {
      stop_sending_at_ = start_ + FromSeconds(*options_.duration_seconds);
    }
    next_arrival_ = start_;
    Clock::time_point last_end = start_;
    while (true) {
      SendDue();
      if (!MaySend() && in_flight_ == 0) break;
      std::deque<std::unique_ptr<Call>> finished;
      {
        std::unique_lock<std::mutex> lock(mu_);
        auto ready = [&] { return !done_.empty(); };
        if (const std::optional<Clock::time_point> wake = NextWake()) {
          done_cv_.wait_until(lock, *wake, ready);
        } else if (in_flight_ > 0) {
          done_cv_.wait(lock, ready);
        }
        finished.swap(done_);
      }
      for (std::unique_ptr<Call>& call : finished) {
        --in_flight_;
        const bool ok = call->record.status.ok() && call->record.has_complete;
        if (!ok && options_.pacing == LoadOptions::Pacing::kClosedLoop) {
          resting_.push_back(Clock::now() + kFailureBackoff);
        }
        workload_.Finished(call->request, ok, call->output);
        recorder_.Add(call->record);
        last_end = std::max(last_end, call->start + FromSeconds(call->record.e2e_seconds));
      }
    }
    result_.wall_seconds = Seconds(last_end - start_);
    return result_;
  }

 private:
  bool MaySend() const {
    if (options_.max_requests && result_.sent >= *options_.max_requests) return false;
    if (stop_sending_at_ && Clock::now() >= *stop_sending_at_) return false;
    return !workload_.Exhausted();
  }

  // When the loop must look again without a call finishing: the next open-loop arrival, the end
  // of a resting slot's pause, or the end of the sending window (so that an idle loop notices).
  std::optional<Clock::time_point> NextWake() {
    if (!MaySend()) return std::nullopt;
    std::optional<Clock::time_point> wake = stop_sending_at_;
    if (!resting_.empty()) wake = wake ? std::min(*wake, resting_.front()) : resting_.front();
    if (options_.pacing != LoadOptions::Pacing::kClosedLoop) {
      const Clock::time_point arrival = ArrivalTime();
      wake = wake ? std::min(*wake, arrival) : arrival;
    }
    return wake;
  }

  Clock::time_point ArrivalTime() const {
    if (options_.pacing == LoadOptions::Pacing::kWorkloadClock) {
      return start_ + FromSeconds(workload_.NextArrival().value_or(0));
    }
    return next_arrival_;
  }

  void SendDue() {
    while (MaySend()) {
      if (options_.pacing == LoadOptions::Pacing::kClosedLoop) {
        const Clock::time_point now = Clock::now();
        while (!resting_.empty() && resting_.front() <= now) resting_.pop_front();
        if (in_flight_ + static_cast<int64_t>(resting_.size()) >= options_.concurrency) return;
      } else {
        if (Clock::now() < ArrivalTime()) return;
        if (options_.pacing == LoadOptions::Pacing::kPoisson) {
          next_arrival_ +=
              FromSeconds(std::exponential_distribution<double>(options_.rate)(arrivals_));
        }
      }
      Send(workload_.Next());
    }
  }

  void Send(BenchRequest request) {
    auto* call = new Call();
    v1::GenerateRequest message;
    message.mutable_token_ids()->mutable_ids()->Add(request.prompt.begin(), request.prompt.end());
    v1::SamplingParams* sampling = message.mutable_sampling();
    sampling->set_temperature(options_.temperature);
    sampling->set_max_new_tokens(request.max_new_tokens);
    sampling->set_ignore_eos(options_.ignore_eos);
    sampling->set_seed(options_.seed + static_cast<uint64_t>(result_.sent));
    call->request = std::move(request);
    ++result_.sent;
    ++in_flight_;
    result_.max_in_flight = std::max(result_.max_in_flight, in_flight_);

    client::StreamCall::Handlers handlers;
    handlers.on_response = [call](const v1::GenerateResponse& response) {
      OnResponse(*call, response);
    };
    handlers.on_done = [this, call](const grpc::Status& status) {
      call->record.status = status;
      call->record.e2e_seconds = Seconds(Clock::now() - call->start);
      // Notify under the lock: once the runner sees its last call, it may return and destroy
      // the condition variable.
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace_back(call);
      done_cv_.notify_one();
    };
    client::StreamCall::Metadata metadata;
    if (!options_.session_header.empty()) {
      metadata.emplace_back(options_.session_header, std::to_string(call->request.session));
    }
    call->start = Clock::now();
    call->last_chunk = call->start;
    client::StreamCall::StartGenerate(connection_, std::move(message), options_.request_timeout,
                                      std::move(handlers), std::move(metadata));
  }

  static void OnResponse(Call& call, const v1::GenerateResponse& response) {
    if (response.has_chunk()) {
      const int n = response.chunk().token_ids_size();
      if (n == 0) return;
      const Clock::time_point now = Clock::now();
      if (call.record.ttft_seconds < 0) {
        call.record.ttft_seconds = Seconds(now - call.start);
      } else {
        const double per_token = Seconds(now - call.last_chunk) / n;
        call.record.inter_token_seconds.insert(call.record.inter_token_seconds.end(), n, per_token);
      }
      call.last_chunk = now;
      call.record.output_tokens += n;
      call.output.insert(call.output.end(), response.chunk().token_ids().begin(),
                         response.chunk().token_ids().end());
    } else if (response.has_complete()) {
      call.record.has_complete = true;
      call.record.prompt_tokens = response.complete().usage().prompt_tokens();
      call.record.cached_tokens = response.complete().usage().cached_tokens();
    }
  }

  const client::Connection& connection_;
  BenchWorkload& workload_;
  const LoadOptions options_;
  BenchRecorder& recorder_;
  std::mt19937_64 arrivals_;

  // The runner's thread only.
  Clock::time_point start_;
  std::optional<Clock::time_point> stop_sending_at_;
  Clock::time_point next_arrival_;
  int64_t in_flight_ = 0;
  std::deque<Clock::time_point> resting_;  // closed loop: when slots whose call failed reopen
  LoadResult result_;

  // Finished calls, handed over by the calls' threads.
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::deque<std::unique_ptr<Call>> done_;
};

}  // namespace

LoadResult RunLoad(const client::Connection& connection, BenchWorkload& workload,
                   const LoadOptions& options, BenchRecorder& recorder) {
  return Runner(connection, workload, options, recorder).Run();
}

}  // namespace tandem::cli
