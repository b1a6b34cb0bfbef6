#include "server/grpc/event_conversion.h"

#include <algorithm>

namespace tandem::server {

namespace {

void AppendLogprobRows(const std::vector<std::vector<engine::TopLogprob>>& rows,
                       google::protobuf::RepeatedPtrField<v1::TokenLogprobs>* to) {
  for (const std::vector<engine::TopLogprob>& row : rows) {
    v1::TokenLogprobs* out = to->Add();
    if (row.empty()) continue;
    // The engine puts the chosen token first, then the most likely ones.
    out->set_token_id(row[0].token);
    out->set_logprob(row[0].logprob);
    for (size_t i = 1; i < row.size(); ++i) {
      v1::TopLogprob* top = out->add_top();
      top->set_token_id(row[i].token);
      top->set_logprob(row[i].logprob);
    }
  }
}

}  // namespace

void AppendTokens(const engine::Event& event, v1::Chunk* chunk, bool with_text) {
  chunk->mutable_token_ids()->Add(event.tokens.begin(), event.tokens.end());
  if (with_text) chunk->mutable_text()->append(event.text);
  AppendLogprobRows(event.logprobs, chunk->mutable_logprobs());
  AppendPromptLogprobs(event, chunk);
}

void AppendPromptLogprobs(const engine::Event& event, v1::Chunk* chunk) {
  AppendLogprobRows(event.prompt_logprobs, chunk->mutable_prompt_logprobs());
}

engine::Usage ChoicesUsage(std::span<const engine::Event> finished, size_t choices_per_prompt) {
  engine::Usage usage;
  if (choices_per_prompt == 0) choices_per_prompt = std::max<size_t>(finished.size(), 1);
  for (size_t i = 0; i < finished.size(); i += choices_per_prompt) {
    usage.prompt_tokens += finished[i].usage.prompt_tokens;
    usage.cached_tokens += finished[i].usage.cached_tokens;
  }
  for (const engine::Event& event : finished) {
    usage.completion_tokens += event.usage.completion_tokens;
    // Unknown for one choice (its markers are not single tokens), unknown for all.
    if (usage.reasoning_tokens && event.usage.reasoning_tokens) {
      *usage.reasoning_tokens += *event.usage.reasoning_tokens;
    } else {
      usage.reasoning_tokens = std::nullopt;
    }
    usage.preemptions += event.usage.preemptions;
    usage.accepted_draft_tokens += event.usage.accepted_draft_tokens;
    usage.rejected_draft_tokens += event.usage.rejected_draft_tokens;
  }
  return usage;
}

absl::Status FinishStatus(const engine::Event& finished) {
  if (finished.finish_reason != engine::FinishReason::kError) return absl::OkStatus();
  return finished.error.ok() ? absl::InternalError("the request failed") : finished.error;
}

absl::Status FinishedResponse(const engine::Event& event, int32_t last_token,
                              v1::GenerateResponse* response) {
  if (absl::Status error = FinishStatus(event); !error.ok()) {
    v1::Error* out = response->mutable_error();
    out->set_code(static_cast<int32_t>(error.code()));
    out->set_message(std::string(error.message()));
    return error;
  }
  v1::Complete* complete = response->mutable_complete();
  switch (event.finish_reason) {
    case engine::FinishReason::kLength:
      complete->set_finish_reason(v1::LENGTH);
      break;
    case engine::FinishReason::kStop:
      complete->set_finish_reason(v1::STOP);
      if (!event.stop_string.empty()) {
        complete->set_matched_stop_str(event.stop_string);
      } else if (last_token >= 0) {
        complete->set_matched_token_id(last_token);
      }
      break;
    default:
      complete->set_finish_reason(v1::ABORTED);
      break;
  }
  complete->set_text(event.text);
  v1::Usage* usage = complete->mutable_usage();
  usage->set_prompt_tokens(event.usage.prompt_tokens);
  usage->set_cached_tokens(event.usage.cached_tokens);
  if (event.usage.reasoning_tokens) usage->set_reasoning_tokens(*event.usage.reasoning_tokens);
  usage->set_completion_tokens(event.usage.completion_tokens);
  usage->set_preemptions(event.usage.preemptions);
  usage->set_accepted_draft_tokens(event.usage.accepted_draft_tokens);
  usage->set_rejected_draft_tokens(event.usage.rejected_draft_tokens);
  v1::Timings* timings = complete->mutable_timings();
  timings->set_queued_seconds(event.timings.queued);
  timings->set_first_token_seconds(event.timings.first_token);
  timings->set_finished_seconds(event.timings.finished);
  timings->set_mean_inter_token_seconds(event.timings.mean_inter_token);
  return absl::OkStatus();
}

}  // namespace tandem::server
