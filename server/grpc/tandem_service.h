// tandem.v1.Tandem on gRPC's callback API: unary calls answer on gRPC's own threads, streamed
// ones become GenerateStreams driven by the StreamPump, so no call holds a thread while it waits
// for tokens.
#ifndef TANDEM_SERVER_GRPC_TANDEM_SERVICE_H_
#define TANDEM_SERVER_GRPC_TANDEM_SERVICE_H_

#include "server/grpc/service_state.h"
#include "server/grpc/stream_pump.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::server {

class TandemService final : public v1::Tandem::CallbackService {
 public:
  TandemService(ServiceState& state, StreamPump& pump) : state_(state), pump_(pump) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerWriteReactor<v1::GenerateResponse>* Chat(grpc::CallbackServerContext* context,
                                                       const v1::ChatRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest* request,
                                          v1::ServerInfo* response) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;

 private:
  // The bearer token check every call makes first.
  grpc::Status Authorize(const grpc::CallbackServerContext& context) const;
  // What a Generate or Chat call must pass before its request is even built: the token, and
  // the server not draining.
  grpc::Status Admission(const grpc::CallbackServerContext& context) const;
  // Admits a built request (or its refusal) into the engine and returns the call's reactor.
  grpc::ServerWriteReactor<v1::GenerateResponse>* Start(const char* rpc,
                                                        const grpc::CallbackServerContext& context,
                                                        std::string request_id,
                                                        absl::StatusOr<engine::Request> request);

  ServiceState& state_;
  StreamPump& pump_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_TANDEM_SERVICE_H_
