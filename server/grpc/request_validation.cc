#include "server/grpc/request_validation.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/json_schema_grammar.h"
#include "engine/stop_strings.h"
#include "models/unicode_utf8.h"
#include "server/grpc/chat_checkpoints.h"
#include "server/grpc/chat_variables.h"

namespace tandem::server {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Written as !(lo <= x && x <= hi) so that NaN, which compares false, is refused too.
bool InRange(float x, float lo, float hi) { return lo <= x && x <= hi; }

absl::Status CheckText(const std::string& text, const std::string& field, int64_t max_bytes) {
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    return Invalid(
        field, absl::StrCat(text.size(), " bytes, more than the server's limit of ", max_bytes));
  }
  if (!models::IsValidUtf8(text)) return Invalid(field, "not valid UTF-8");
  return absl::OkStatus();
}

// Draws seeds for requests that give none. One generator behind a mutex: requests are rare
// compared with the work each one does.
uint64_t RandomSeed() {
  static std::mutex mu;
  static std::mt19937_64 gen{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return gen();
}

}  // namespace

absl::Status CheckPromptLength(size_t tokens, const std::string& field,
                               const ValidationContext& context) {
  if (tokens == 0) return Invalid(field, "the prompt is empty");
  if (tokens > static_cast<size_t>(context.limits.max_prompt_tokens)) {
    return Invalid(field, absl::StrCat(tokens, " tokens, more than the server's limit of ",
                                       context.limits.max_prompt_tokens));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenizableLength(size_t bytes, const std::string& field,
                                    const ValidationContext& context) {
  const size_t most = static_cast<size_t>(context.limits.max_prompt_tokens) * 2 *
                      std::max<size_t>(context.model->longest_token_bytes, 1);
  if (bytes > most) {
    return Invalid(field, absl::StrCat(bytes, " bytes, more than ", most,
                                       ", which is more than the server's limit of ",
                                       context.limits.max_prompt_tokens, " tokens can hold"));
  }
  return absl::OkStatus();
}

absl::Status CheckPromptText(const std::string& text, const std::string& field,
                             const ValidationContext& context) {
  if (absl::Status s = CheckText(text, field, context.limits.max_request_bytes); !s.ok()) return s;
  return CheckTokenizableLength(text.size(), field, context);
}

absl::Status ValidateRequestId(const std::string& request_id) {
  if (request_id.size() > 128) {
    return Invalid("request_id", absl::StrCat(request_id.size(), " characters, more than 128"));
  }
  for (char c : request_id) {
    if (c < 0x21 || c > 0x7e) {
      return Invalid("request_id", "only printable ASCII characters without spaces are allowed");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTokenIds(const google::protobuf::RepeatedField<int32_t>& ids,
                              int32_t vocab_size, const std::string& field) {
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return Invalid(
          absl::StrCat(field, "[", i, "]"),
          absl::StrCat("token id ", ids[i], " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ConvertResponseFormat(const v1::SamplingParams& p, const ValidationContext& context,
                                   engine::Request* out) {
  const char* field = nullptr;
  switch (p.response_format_case()) {
    case v1::SamplingParams::RESPONSE_FORMAT_NOT_SET:
      return absl::OkStatus();
    case v1::SamplingParams::kJsonSchema: {
      field = "sampling.json_schema";
      auto compile = [&] { return engine::JsonSchemaGrammar(p.json_schema()); };
      absl::StatusOr<std::shared_ptr<const engine::Grammar>> grammar;
      if (context.grammars != nullptr) {
        grammar = context.grammars->GetOrCompile("json_schema\n" + p.json_schema(), compile);
      } else if (absl::StatusOr<engine::Grammar> compiled = compile(); compiled.ok()) {
        grammar = std::make_shared<const engine::Grammar>(*std::move(compiled));
      } else {
        grammar = compiled.status();
      }
      if (!grammar.ok()) return Invalid(field, std::string(grammar.status().message()));
      out->grammar = *std::move(grammar);
      break;
    }
    case v1::SamplingParams::kJsonObject: {
      field = "sampling.json_object";
      if (!p.json_object()) return Invalid(field, "only true is accepted (leave it unset for text)");
      // The same for every request: built once.
      static const auto* const kAnyObject =
          new std::shared_ptr<const engine::Grammar>(std::make_shared<const engine::Grammar>(
              engine::JsonObjectGrammar()));
      out->grammar = *kAnyObject;
      break;
    }
  }
  if (context.model->tokenizer == nullptr) {
    return Invalid(field, "the model has no tokenizer to match the output against");
  }
  return absl::OkStatus();
}

namespace {

// sampling.logit_bias: ids in the vocabulary, amounts in [-100, 100], at most 300 of them,
// sorted by id (a protobuf map keeps no order).
absl::Status ConvertLogitBias(const v1::SamplingParams& p, int32_t vocab,
                              engine::SamplingParams* out) {
  constexpr size_t kMax = engine::SamplingParams::kMaxLogitBiasTokens;
  if (p.logit_bias_size() > static_cast<int>(kMax)) {
    return Invalid("sampling.logit_bias",
                   absl::StrCat("at most ", kMax, " tokens, got ", p.logit_bias_size()));
  }
  for (const auto& [token, bias] : p.logit_bias()) {
    const std::string field = absl::StrCat("sampling.logit_bias[", token, "]");
    if (token < 0 || token >= vocab) {
      return Invalid(field, absl::StrCat("not a token id: must be in [0, ", vocab, ")"));
    }
    if (!InRange(bias, -engine::SamplingParams::kMaxLogitBias,
                 engine::SamplingParams::kMaxLogitBias)) {
      return Invalid(field, absl::StrCat("must be in [-100, 100], got ", bias));
    }
    out->logit_bias.emplace_back(token, bias);
  }
  std::sort(out->logit_bias.begin(), out->logit_bias.end());
  return absl::OkStatus();
}

}  // namespace

absl::Status ConvertSampling(const v1::SamplingParams& p, const ValidationContext& context,
                             engine::Request* out) {
  engine::SamplingParams& s = out->sampling;
  const float temperature = p.has_temperature() ? p.temperature() : 1.0f;
  if (!InRange(temperature, 0.0f, 100.0f)) {
    return Invalid("sampling.temperature", absl::StrCat("must be in [0, 100], got ", temperature));
  }
  // As vLLM does: temperatures this small divide the logits into overflow, and mean greedy.
  s.greedy = temperature < 1e-5f;
  s.temperature = s.greedy ? 1.0f : temperature;
  if (p.top_k() < 0) {
    return Invalid("sampling.top_k", absl::StrCat("must be >= 0, got ", p.top_k()));
  }
  s.top_k = p.top_k();
  s.top_p = p.has_top_p() ? p.top_p() : 1.0f;
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) {
    return Invalid("sampling.top_p", absl::StrCat("must be in (0, 1], got ", s.top_p));
  }
  s.min_p = p.min_p();
  if (!InRange(s.min_p, 0.0f, 1.0f)) {
    return Invalid("sampling.min_p", absl::StrCat("must be in [0, 1], got ", s.min_p));
  }
  s.repetition_penalty = p.has_repetition_penalty() ? p.repetition_penalty() : 1.0f;
  if (!(s.repetition_penalty > 0.0f && std::isfinite(s.repetition_penalty))) {
    return Invalid("sampling.repetition_penalty",
                   absl::StrCat("must be > 0 and finite, got ", s.repetition_penalty));
  }
  s.presence_penalty = p.presence_penalty();
  if (!InRange(s.presence_penalty, -2.0f, 2.0f)) {
    return Invalid("sampling.presence_penalty",
                   absl::StrCat("must be in [-2, 2], got ", s.presence_penalty));
  }
  s.frequency_penalty = p.frequency_penalty();
  if (!InRange(s.frequency_penalty, -2.0f, 2.0f)) {
    return Invalid("sampling.frequency_penalty",
                   absl::StrCat("must be in [-2, 2], got ", s.frequency_penalty));
  }
  s.seed = p.has_seed() ? p.seed() : RandomSeed();
  if (p.top_logprobs() < 0 || p.top_logprobs() > engine::SampleResult::kMaxTop) {
    return Invalid("sampling.top_logprobs",
                   absl::StrCat("must be in [0, ", engine::SampleResult::kMaxTop, "], got ",
                                p.top_logprobs()));
  }
  s.top_logprobs = p.top_logprobs();
  s.logprobs = p.logprobs() || p.top_logprobs() > 0;
  out->top_logprobs = p.top_logprobs();

  if (p.has_prompt_logprobs()) {
    if (p.prompt_logprobs() < 0 || p.prompt_logprobs() > engine::SampleResult::kMaxTop) {
      return Invalid("sampling.prompt_logprobs",
                     absl::StrCat("must be in [0, ", engine::SampleResult::kMaxTop, "], got ",
                                  p.prompt_logprobs()));
    }
    out->prompt_logprobs = p.prompt_logprobs();
  }

  if (p.n() < 1 || p.n() > engine::kMaxChoices) {
    return Invalid("sampling.n",
                   absl::StrCat("must be in [1, ", engine::kMaxChoices, "], got ", p.n()));
  }
  if (p.n() > context.limits.max_concurrent_streams) {
    return Invalid("sampling.n", absl::StrCat("each choice takes one of the server's ",
                                              context.limits.max_concurrent_streams,
                                              " concurrent streams, so it can never run ", p.n()));
  }

  // Scoring a prompt may generate nothing.
  const int32_t min_new = out->prompt_logprobs ? 0 : 1;
  const int32_t max_new = p.has_max_new_tokens() ? p.max_new_tokens() : 16;
  if (max_new < min_new || max_new > context.max_new_tokens_limit) {
    return Invalid(
        "sampling.max_new_tokens",
        absl::StrCat("must be in [", min_new, ", ", context.max_new_tokens_limit, "], got ",
                     max_new, min_new == 1 ? " (0 only with prompt_logprobs)" : ""));
  }
  out->max_new_tokens = max_new;

  const int32_t vocab = context.model->model->config().vocab_size;
  if (absl::Status s = ValidateTokenIds(p.stop_token_ids(), vocab, "sampling.stop_token_ids");
      !s.ok()) {
    return s;
  }
  out->stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  if (absl::Status s = ConvertLogitBias(p, vocab, &out->sampling); !s.ok()) return s;
  out->stop_strings.assign(p.stop_strings().begin(), p.stop_strings().end());
  if (absl::Status s = engine::ValidateStopStrings(out->stop_strings); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.", s.message()));
  }
  if (!out->stop_strings.empty() && context.model->tokenizer == nullptr) {
    return Invalid("sampling.stop_strings", "the model has no tokenizer to match text with");
  }
  out->ignore_eos = p.ignore_eos();
  out->skip_special_tokens = p.has_skip_special_tokens() ? p.skip_special_tokens() : true;
  return ConvertResponseFormat(p, context, out);
}

absl::Status ConvertPrediction(const std::string& text, const std::string& field,
                               const ValidationContext& context, engine::Request* out) {
  if (text.empty()) return absl::OkStatus();
  if (absl::Status s = CheckPromptText(text, field, context); !s.ok()) return s;
  const models::Tokenizer* tokenizer = context.model->tokenizer.get();
  if (tokenizer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": the model has no tokenizer to read a prediction with"));
  }
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer->EncodePlain(text, false);
  if (!ids.ok()) return Invalid(field, std::string(ids.status().message()));
  if (ids->size() > engine::kMaxPredictionTokens) {
    return Invalid(field, absl::StrCat(ids->size(), " tokens, more than the ",
                                       engine::kMaxPredictionTokens, " allowed"));
  }
  // An id the model has no logit for (a tokenizer may know more) could never be confirmed:
  // the prediction ends before it rather than join the text on either side.
  const int32_t vocab = context.model->model->config().vocab_size;
  ids->erase(std::find_if(ids->begin(), ids->end(), [&](int32_t id) { return id >= vocab; }),
             ids->end());
  out->prediction = *std::move(ids);
  return absl::OkStatus();
}

absl::Status ConvertPrompt(const v1::GenerateRequest& request, const ValidationContext& context,
                           std::vector<int32_t>* prompt) {
  const ServedModel& served = *context.model;
  const int32_t vocab = served.model->config().vocab_size;
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText: {
      if (absl::Status s = CheckPromptText(request.text(), "text", context); !s.ok()) return s;
      if (request.text().empty()) return Invalid("text", "the prompt is empty");
      if (served.tokenizer == nullptr) {
        return absl::FailedPreconditionError(
            "text: the model has no tokenizer; send token_ids instead");
      }
      const bool special = !request.has_add_special_tokens() || request.add_special_tokens();
      absl::StatusOr<std::vector<int32_t>> ids = served.tokenizer->Encode(request.text(), special);
      if (!ids.ok()) return Invalid("text", std::string(ids.status().message()));
      if (absl::Status s = CheckPromptLength(ids->size(), "text", context); !s.ok()) return s;
      *prompt = *std::move(ids);
      return absl::OkStatus();
    }
    case v1::GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      if (absl::Status s = CheckPromptLength(ids.size(), "token_ids.ids", context); !s.ok()) {
        return s;
      }
      if (absl::Status s = ValidateTokenIds(ids, vocab, "token_ids.ids"); !s.ok()) return s;
      prompt->assign(ids.begin(), ids.end());
      return absl::OkStatus();
    }
    case v1::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return Invalid("prompt", "give either text or token_ids");
}

absl::StatusOr<engine::Request> BuildGenerateRequest(const v1::GenerateRequest& request,
                                                     const ValidationContext& context) {
  if (absl::Status s = ValidateRequestId(request.request_id()); !s.ok()) return s;
  engine::Request out;
  if (absl::Status s = ConvertPrompt(request, context, &out.prompt); !s.ok()) return s;
  if (absl::Status s = ConvertSampling(request.sampling(), context, &out); !s.ok()) return s;
  if (absl::Status s = ConvertPrediction(request.prediction(), "prediction", context, &out);
      !s.ok()) {
    return s;
  }
  out.client_id = request.request_id();
  return out;
}

absl::StatusOr<engine::Request> BuildChatRequest(const v1::ChatRequest& request,
                                                 const ValidationContext& context) {
  if (absl::Status s = ValidateRequestId(request.request_id()); !s.ok()) return s;
  const ServedModel& served = *context.model;
  // The request's own errors first, then what the model lacks.
  absl::StatusOr<ChatVariables> variables = BuildChatVariables(
      request, served.tokenizer ? served.tokenizer->config() : models::TokenizerConfig(),
      context.limits.max_request_bytes);
  if (!variables.ok()) return variables.status();
  if (served.tokenizer == nullptr || !served.chat_template.has_value()) {
    return absl::FailedPreconditionError(
        "messages: the model has no chat template (tokenizer_config.json chat_template); use "
        "Generate");
  }
  absl::StatusOr<chat_template::RenderedPrompt> rendered =
      served.chat_template->RenderTracked(variables->trusted, variables->untrusted);
  if (!rendered.ok()) {
    // A template's raise_exception is how it refuses a conversation (e.g. roles that do not
    // alternate), so the client hears it as a bad request.
    return Invalid("messages",
                   absl::StrCat("the chat template refused them: ", rendered.status().message()));
  }
  if (absl::Status s = CheckTokenizableLength(rendered->text.size(), "messages", context);
      !s.ok()) {
    return s;
  }
  // A "<|im_start|>" written in a message is text; only the template's are markers.
  absl::StatusOr<std::vector<int32_t>> ids = EncodeRenderedChat(*served.tokenizer, *rendered);
  if (!ids.ok()) return Invalid("messages", std::string(ids.status().message()));
  if (absl::Status s = CheckPromptLength(ids->size(), "messages", context); !s.ok()) return s;
  engine::Request out;
  out.checkpoint_hints =
      ChatCheckpointHints(*served.chat_template, *served.tokenizer, *variables, *rendered, *ids);
  out.prompt = *std::move(ids);
  if (absl::Status s = ConvertSampling(request.sampling(), context, &out); !s.ok()) return s;
  if (absl::Status s = ConvertPrediction(request.prediction(), "prediction", context, &out);
      !s.ok()) {
    return s;
  }
  out.client_id = request.request_id();
  return out;
}

}  // namespace tandem::server
