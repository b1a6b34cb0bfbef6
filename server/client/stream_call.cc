#include "server/client/stream_call.h"

#include <utility>

namespace tandem::client {

void StreamCall::StartGenerate(const Connection& connection, v1::GenerateRequest request,
                               std::optional<std::chrono::milliseconds> timeout,
                               Handlers handlers) {
  auto* call = new StreamCall(std::move(handlers));
  call->generate_request_ = std::move(request);
  connection.Prepare(call->context_, timeout);
  connection.stub().async()->Generate(&call->context_, &call->generate_request_, call);
  call->Begin();
}

void StreamCall::StartChat(const Connection& connection, v1::ChatRequest request,
                           std::optional<std::chrono::milliseconds> timeout, Handlers handlers) {
  auto* call = new StreamCall(std::move(handlers));
  call->chat_request_ = std::move(request);
  connection.Prepare(call->context_, timeout);
  connection.stub().async()->Chat(&call->context_, &call->chat_request_, call);
  call->Begin();
}

void StreamCall::Begin() {
  StartRead(&response_);
  StartCall();
}

void StreamCall::OnReadDone(bool ok) {
  // !ok: the stream ended (or failed); OnDone follows with the status.
  if (!ok) return;
  if (handlers_.on_response) handlers_.on_response(response_);
  StartRead(&response_);
}

void StreamCall::OnDone(const grpc::Status& status) {
  if (handlers_.on_done) handlers_.on_done(status);
  delete this;
}

}  // namespace tandem::client
