// One Generate or Chat call on gRPC's callback API. No thread waits on it, so one process can
// keep hundreds of streams in flight with gRPC's own small thread pool. The call owns itself
// from Start until it is done.
#ifndef TANDEM_SERVER_CLIENT_STREAM_CALL_H_
#define TANDEM_SERVER_CLIENT_STREAM_CALL_H_

#include <chrono>
#include <functional>
#include <optional>

#include "grpcpp/grpcpp.h"
#include "server/client/connection.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client {

class StreamCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  // Both run on gRPC's threads, never two at once for one call, and must not block.
  struct Handlers {
    // Each streamed message, in order.
    std::function<void(const v1::GenerateResponse&)> on_response;
    // Once, last, with the call's final status; the call is deleted when it returns.
    std::function<void(const grpc::Status&)> on_done;
  };

  // Start a call; `connection` must outlive it. `timeout` bounds the whole call.
  static void StartGenerate(const Connection& connection, v1::GenerateRequest request,
                            std::optional<std::chrono::milliseconds> timeout, Handlers handlers);
  static void StartChat(const Connection& connection, v1::ChatRequest request,
                        std::optional<std::chrono::milliseconds> timeout, Handlers handlers);

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  explicit StreamCall(Handlers handlers) : handlers_(std::move(handlers)) {}
  void Begin();

  grpc::ClientContext context_;
  // The request must stay alive while gRPC may still read it.
  v1::GenerateRequest generate_request_;
  v1::ChatRequest chat_request_;
  v1::GenerateResponse response_;
  Handlers handlers_;
};

}  // namespace tandem::client

#endif  // TANDEM_SERVER_CLIENT_STREAM_CALL_H_
