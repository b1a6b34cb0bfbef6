#include "server/grpc/info.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "cache/block_allocator.h"
#include "models/unicode_utf8.h"
#include "server/grpc/request_validation.h"

namespace tandem::server {

absl::Status TokenizeText(const ServiceState& state, const v1::TokenizeRequest& request,
                          v1::TokenizeResponse* response) {
  const models::Tokenizer* tokenizer = state.model().tokenizer.get();
  if (tokenizer == nullptr) {
    return absl::FailedPreconditionError("text: the model has no tokenizer");
  }
  // Tokenize answers for what could be a prompt: the same limits, checked the same way.
  if (absl::Status s = CheckPromptText(request.text(), "text", state.validation()); !s.ok()) {
    return s;
  }
  const bool special = !request.has_add_special_tokens() || request.add_special_tokens();
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(request.text(), special);
  if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat("text: ", ids.status().message()));
  if (ids->size() > static_cast<size_t>(state.config().limits.max_prompt_tokens)) {
    return CheckPromptLength(ids->size(), "text", state.validation());
  }
  for (int32_t id : *ids) {
    response->add_token_ids(id);
    response->add_pieces(tokenizer->TokenToPiece(id));
  }
  return absl::OkStatus();
}

absl::Status DetokenizeIds(const ServiceState& state, const v1::DetokenizeRequest& request,
                           v1::DetokenizeResponse* response) {
  const models::Tokenizer* tokenizer = state.model().tokenizer.get();
  if (tokenizer == nullptr) {
    return absl::FailedPreconditionError("token_ids: the model has no tokenizer");
  }
  if (request.token_ids_size() > state.config().limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("token_ids: ", request.token_ids_size(),
                                                   " ids, more than the server's limit of ",
                                                   state.config().limits.max_prompt_tokens));
  }
  if (absl::Status s = ValidateTokenIds(request.token_ids(), tokenizer->vocab_size(), "token_ids");
      !s.ok()) {
    return s;
  }
  const bool skip = !request.has_skip_special_tokens() || request.skip_special_tokens();
  response->set_text(tokenizer->Decode(
      absl::MakeConstSpan(request.token_ids().data(), request.token_ids().size()), skip));
  return absl::OkStatus();
}

void FillModelInfo(const ServiceState& state, v1::ModelInfo* info) {
  const ServedModel& served = state.model();
  const models::ModelConfig& c = served.model->config();
  info->set_model_path(served.model->dir());
  info->set_architecture(c.architecture);
  info->set_family(models::FamilyName(c.family));
  info->set_vocab_size(c.vocab_size);
  info->set_num_layers(c.num_layers);
  info->set_num_attention_layers(c.num_attention_layers);
  info->set_num_ssm_layers(c.num_ssm_layers);
  info->set_hidden_size(c.hidden_size);
  info->set_weight_bytes(static_cast<int64_t>(served.model->weight_bytes()));
  info->set_bos_token_id(c.bos_token_id);
  for (int32_t id : c.eos_token_ids) info->add_eos_token_ids(id);
  info->set_has_tokenizer(served.tokenizer != nullptr);
  info->set_has_chat_template(served.chat_template.has_value());
  info->set_page_tokens(served.model->layout().page_tokens());
  info->set_max_prompt_tokens(state.config().limits.max_prompt_tokens);
  info->set_max_new_tokens_limit(state.config().engine.scheduler.max_new_tokens_limit);
  const engine::ComputeDevice* device = state.config().engine.device;
  info->set_device(device != nullptr ? device->name() : "cpu");
  info->set_tensor_parallel(served.model->shard().ranks);
  info->set_tool_call_format(std::string(ToolCallFormatName(state.tool_calls().format())));
  info->set_reasoning_format(std::string(ReasoningFormatName(state.reasoning().format())));
}

void FillServerInfo(ServiceState& state, v1::ServerInfo* info) {
  const engine::SchedulerStats s = state.engine().stats();
  info->set_version(kServerVersion);
  info->set_uptime_seconds(state.uptime_seconds());
  info->set_draining(state.draining());
  info->set_running_requests(static_cast<int64_t>(s.running));
  info->set_waiting_requests(static_cast<int64_t>(s.waiting));
  info->set_active_streams(state.active_streams());
  info->set_submitted_requests(static_cast<int64_t>(s.submitted));
  info->set_finished_requests(static_cast<int64_t>(s.finished));
  info->set_cancelled_requests(static_cast<int64_t>(s.cancelled));
  info->set_failed_requests(static_cast<int64_t>(s.failed));
  info->set_preemptions(static_cast<int64_t>(s.preemptions));
  info->set_draft_tokens(static_cast<int64_t>(s.draft_tokens));
  info->set_accepted_draft_tokens(static_cast<int64_t>(s.accepted_draft_tokens));
  info->set_pinned_prefixes(static_cast<int64_t>(s.cache.pinned_prefixes));
  info->set_pinned_bytes(static_cast<int64_t>(s.cache.pinned_bytes));
  info->set_prompt_tokens(static_cast<int64_t>(s.prompt_tokens));
  info->set_cached_tokens(static_cast<int64_t>(s.cached_tokens));
  info->set_generated_tokens(static_cast<int64_t>(s.generated_tokens));
  info->set_token_hit_rate(s.token_hit_rate());
  info->set_cache_policy(s.cache_policy);
  info->set_alpha(s.alpha);
  info->set_alpha_tunings(static_cast<int64_t>(s.alpha_tunings));
  info->set_evictions(static_cast<int64_t>(s.cache.evictions));
  info->set_cache_nodes(static_cast<int64_t>(s.cache.nodes));
  info->set_cache_bytes(static_cast<int64_t>(s.cache.bytes));
  for (int p = 0; p < cache::kNumPools; ++p) {
    const cache::PoolStats& pool = s.memory.pools[p];
    v1::PoolInfo* out = info->add_pools();
    out->set_name(cache::PoolName(static_cast<cache::Pool>(p)));
    out->set_unit_bytes(static_cast<int64_t>(pool.unit_bytes));
    out->set_used_units(static_cast<int64_t>(pool.used_units));
    out->set_capacity_units(static_cast<int64_t>(pool.capacity_units));
    out->set_oom_events(static_cast<int64_t>(pool.oom_events));
  }
  info->set_memory_budget_bytes(static_cast<int64_t>(s.memory.budget_bytes));
  info->set_migrations(static_cast<int64_t>(s.memory.migrations));
  info->set_bytes_migrated(static_cast<int64_t>(s.memory.bytes_migrated));
}

}  // namespace tandem::server
