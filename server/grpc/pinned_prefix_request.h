// PinPrefixRequest to the tokens to pin: its text or ids read as Generate reads them, or its
// conversation rendered as Chat renders it without the generation prompt. A conversation is
// pinned only where the template renders it as the start of a longer one token for token,
// since otherwise no later Chat call's prompt would start with those tokens.
#ifndef TANDEM_SERVER_GRPC_PINNED_PREFIX_REQUEST_H_
#define TANDEM_SERVER_GRPC_PINNED_PREFIX_REQUEST_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/grpc/request_validation.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::server {

// INVALID_ARGUMENT naming the field ("name", "text", "token_ids.ids[3]", "chat.messages[0]...")
// for bad input; FAILED_PRECONDITION where the model lacks a tokenizer or chat template, or the
// template does not render the conversation as a prefix of a longer one.
absl::StatusOr<std::vector<int32_t>> PrefixTokens(const v1::PinPrefixRequest& request,
                                                  const ValidationContext& context);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_PINNED_PREFIX_REQUEST_H_
