// The last steps of every Generate/Chat-like call, whatever its transport (gRPC here, the OpenAI
// HTTP API in server/openai): take one of the server's stream slots, reserve the request id in
// the caller's namespace, and submit the built request to the engine. One path, so that the caps
// and the per-caller ids hold for every client alike.
#ifndef TANDEM_SERVER_GRPC_ADMISSION_H_
#define TANDEM_SERVER_GRPC_ADMISSION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "server/grpc/service_state.h"

namespace tandem::server {

// `n` stream slots (ServiceState::AcquireStream), or RESOURCE_EXHAUSTED naming the limit.
absl::Status TakeStreamSlot(ServiceState& state, int32_t n = 1);

// One choice of several (engine::Engine::SubmitChoices): the request id it stands under and its
// stream.
struct SubmittedChoice {
  std::string request_id;
  std::shared_ptr<engine::RequestStream> stream;
};

// How a call's choices stand in the caller's namespace of request ids.
enum class ChoiceIds {
  // One id, the call's, for every choice (a gRPC call): Abort of it cancels them all, and it is
  // released once, when the call ends.
  kOneForAll,
  // An id of its own for each choice (an HTTP call's, whose ids nobody aborts), released as each
  // choice finishes.
  kOneEach,
};

// For a caller holding `n` stream slots (TakeStreamSlot): reserves `request_id` (an empty one gets
// a fresh id; with kOneEach, the other choices get fresh ones) for `caller` and submits `n`
// choices of `request` under it, each bound to its id. The ids stay reserved and the slots taken
// until the caller releases them (ServiceState::ReleaseId, ReleaseStream). ALREADY_EXISTS for an
// id a live request of the caller uses, or the engine's refusal: then all n slots are given back
// and nothing stays reserved.
absl::StatusOr<std::vector<SubmittedChoice>> SubmitChoicesForCaller(ServiceState& state,
                                                                    const std::string& caller,
                                                                    std::string request_id,
                                                                    engine::Request request,
                                                                    int32_t n, ChoiceIds ids);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_ADMISSION_H_
