// What the server records when a Generate or Chat call ends, refused or served: the call in
// tandem_requests_total by its gRPC code, the engine's finish event in the latency histograms,
// and one structured log line with the request id.
#ifndef TANDEM_SERVER_GRPC_CALL_RECORD_H_
#define TANDEM_SERVER_GRPC_CALL_RECORD_H_

#include <span>
#include <string>

#include "engine/request.h"
#include "grpcpp/support/status.h"
#include "server/grpc/service_state.h"

namespace tandem::server {

// A call that never reached the engine (bad request, no stream slot, draining, no token).
// `caller` is empty when the call did not prove who it is.
void RecordRefusedCall(ServiceState& state, const char* rpc, const std::string& caller,
                       const std::string& request_id, const grpc::Status& status);
// A call its client reset before the server read it, or refused by the reset-flood guard:
// counted by its code, not logged (a flood of them must not flood the logs).
void RecordAbandonedCall(ServiceState& state, const char* rpc, const grpc::Status& status);
// A call whose request ran in the engine. `finished`: the engine's finish events that were read,
// one per choice (`n`), in choice order; empty when the call ended before any was (the client
// cancelled or its deadline passed), and without the choices an error cut short. Each is observed
// in the latency histograms; the log line gives the first choice's, with the tokens all generated
// (and each prompt's once, for `choices_per_prompt` choices of each of several prompts: 0 is
// one prompt).
void RecordServedCall(ServiceState& state, const char* rpc, const std::string& caller,
                      const std::string& request_id, const grpc::Status& status,
                      std::span<const engine::Event> finished, size_t choices_per_prompt = 0);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_CALL_RECORD_H_
