// The model the server serves, with what requests need besides the weights: the tokenizer
// (optional: without it only token-id prompts work) and the parsed chat template (optional:
// without it Chat is refused). Immutable once loaded, so every RPC thread reads it freely.
#ifndef TANDEM_SERVER_GRPC_SERVED_MODEL_H_
#define TANDEM_SERVER_GRPC_SERVED_MODEL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "models/tensor_parallel_group.h"
#include "models/tokenizer.h"
#include "server/chat_template/chat_template.h"

namespace tandem::server {

struct ServedModel {
  // The whole model, or the lead of its tensor-parallel workers (which it keeps alive).
  std::shared_ptr<const models::Model> model;
  std::unique_ptr<models::Tokenizer> tokenizer;  // may be null
  std::optional<ChatTemplate> chat_template;     // only with a tokenizer
  // The most bytes of text one token can stand for (the longest vocabulary entry, in its raw
  // and its stored spelling), so that text too long for any prompt can be refused before it is
  // tokenized (request_validation.h). 0 without a tokenizer.
  size_t longest_token_bytes = 0;

  // Loads a checkpoint directory. A missing tokenizer is not an error (token-id prompts still
  // work); a tokenizer that fails to load, or a chat template that fails to parse, is.
  // With `workers` > 1 the model is split over that many threads
  // (models/tensor_parallel_group.h), each but the lead computing on a backend from `make_ops`.
  static absl::StatusOr<ServedModel> Load(
      const std::string& dir, const models::LoadOptions& options, int32_t workers = 1,
      const models::TensorParallelGroup::OpsFactory& make_ops = {});
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_SERVED_MODEL_H_
