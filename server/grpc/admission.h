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

// For a caller holding a stream slot (TakeStreamSlot): reserves `*request_id` for `caller` (an
// empty one gets a fresh id, written back) and submits `request` under it; the id stays
// reserved, bound to the engine's id, and the slot stays taken, until the caller releases them
// (ServiceState::ReleaseId, ReleaseStream). ALREADY_EXISTS for an id a live request of the
// caller uses, or the engine's refusal: then the slot is given back and nothing stays reserved.
absl::StatusOr<std::shared_ptr<engine::RequestStream>> SubmitForCaller(ServiceState& state,
                                                                       const std::string& caller,
                                                                       std::string* request_id,
                                                                       engine::Request request);

// One choice of several (engine::Engine::SubmitChoices): its request id and its stream.
struct SubmittedChoice {
  std::string request_id;
  std::shared_ptr<engine::RequestStream> stream;
};
// SubmitForCaller for `n` choices of one request, for a caller holding n stream slots: choice 0
// gets `request_id` (an empty one: a fresh id), the others fresh ids, each reserved and bound
// as SubmitForCaller's is. On a refusal all n slots are given back and nothing stays reserved.
absl::StatusOr<std::vector<SubmittedChoice>> SubmitChoicesForCaller(ServiceState& state,
                                                                    const std::string& caller,
                                                                    std::string request_id,
                                                                    engine::Request request,
                                                                    int32_t n);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_ADMISSION_H_
