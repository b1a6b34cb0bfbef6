// Turns a client's Generate or Chat request into an engine::Request, or refuses it with a
// status whose message names the offending field as the proto spells it ("sampling.top_p: must
// be in (0, 1], got 1.5", "messages[2].role: ..."). Everything a client controls is checked
// here, before the engine sees it: sizes against the server's caps, sampling values, UTF-8, chat
// roles, token ids against the vocabulary. Pure functions of the request and the model, so they
// can be tested (and fuzzed) without a server.
#ifndef TANDEM_SERVER_GRPC_REQUEST_VALIDATION_H_
#define TANDEM_SERVER_GRPC_REQUEST_VALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/grammar_cache.h"
#include "engine/request.h"
#include "server/grpc/served_model.h"
#include "server/grpc/server_config.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

// What validation needs besides the request.
struct ValidationContext {
  const ServedModel* model = nullptr;
  RequestLimits limits;
  int32_t max_new_tokens_limit = 4096;
  // Compiled JSON Schemas, shared by requests; null: each request compiles its own.
  engine::GrammarCache* grammars = nullptr;
};

// request_id: empty (the server assigns one) or 1..128 printable ASCII characters.
absl::Status ValidateRequestId(const std::string& request_id);

// Fills the sampling and stopping fields of `out` from `params` (field names prefixed with
// "sampling."). An absent seed is drawn at random.
absl::Status ConvertSampling(const v1::SamplingParams& params, const ValidationContext& context,
                             engine::Request* out);

absl::StatusOr<engine::Request> BuildGenerateRequest(const v1::GenerateRequest& request,
                                                     const ValidationContext& context);
// The part of BuildGenerateRequest that reads the prompt (its text tokenized, or its ids),
// checked as BuildGenerateRequest checks it ("text: ..." or "token_ids.ids[i]: ...").
absl::Status ConvertPrompt(const v1::GenerateRequest& request, const ValidationContext& context,
                           std::vector<int32_t>* prompt);

// Renders the conversation with the model's chat template (chat_variables.h: messages, tools,
// documents, kwargs, bos/eos tokens, add_generation_prompt) and tokenizes the result without
// adding special tokens again (the template placed them) and with the client's text as plain
// text, so special-token spellings in it never become the markers the template writes.
absl::StatusOr<engine::Request> BuildChatRequest(const v1::ChatRequest& request,
                                                 const ValidationContext& context);

// Text to be tokenized as a prompt: valid UTF-8, within the server's request bytes, and short
// enough that it could tokenize into at most max_prompt_tokens tokens. The last check comes
// before tokenizing, because tokenizing costs memory in proportion to the text (a megabyte of
// text takes about 200 MB for a moment): a text longer than max_prompt_tokens × the longest
// token's bytes × 2 cannot fit (the 2 leaves room for normalizers that shrink text, such as
// SentencePiece collapsing runs of spaces). INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckPromptText(const std::string& text, const std::string& field,
                             const ValidationContext& context);
// The last check of CheckPromptText alone, for text the server composed (a rendered chat).
absl::Status CheckTokenizableLength(size_t bytes, const std::string& field,
                                    const ValidationContext& context);
// The tokens of a prompt: 1..max_prompt_tokens. INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckPromptLength(size_t tokens, const std::string& field,
                               const ValidationContext& context);

// A request's `prediction` (the output the client expects): its tokens (plain text, no special
// tokens added) into out->prediction. Empty text is no prediction. INVALID_ARGUMENT naming
// `field` for text that is not UTF-8, too long, or more than engine::kMaxPredictionTokens
// tokens; FAILED_PRECONDITION for a model without a tokenizer.
absl::Status ConvertPrediction(const std::string& text, const std::string& field,
                               const ValidationContext& context, engine::Request* out);

// Ids in [0, vocab): INVALID_ARGUMENT naming `field`[i] otherwise.
absl::Status ValidateTokenIds(const google::protobuf::RepeatedField<int32_t>& ids,
                              int32_t vocab_size, const std::string& field);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_REQUEST_VALIDATION_H_
