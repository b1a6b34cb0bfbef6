// tandem.v1.Tandem on gRPC's callback API: unary calls answer on gRPC's own threads, streamed
// ones become GenerateStreams driven by the StreamPump, so no call holds a thread while it waits
// for tokens.
//
// Every method is registered raw (ByteBuffer in and out, wire_messages.h): each call first
// identifies its caller (the bearer token when the server has tokens; caller_identity.h), and
// only then parses its request, so nothing about a request is looked at before authentication.
#ifndef TANDEM_SERVER_GRPC_TANDEM_SERVICE_H_
#define TANDEM_SERVER_GRPC_TANDEM_SERVICE_H_

#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "server/grpc/service_state.h"
#include "server/grpc/stream_pump.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::server {

using RawTandemService = v1::Tandem::WithRawCallbackMethod_Generate<
    v1::Tandem::WithRawCallbackMethod_Chat<v1::Tandem::WithRawCallbackMethod_Tokenize<
        v1::Tandem::WithRawCallbackMethod_Detokenize<v1::Tandem::WithRawCallbackMethod_GetModelInfo<
            v1::Tandem::WithRawCallbackMethod_GetServerInfo<
                v1::Tandem::WithRawCallbackMethod_Abort<v1::Tandem::WithRawCallbackMethod_PinPrefix<
                    v1::Tandem::WithRawCallbackMethod_UnpinPrefix<
                        v1::Tandem::WithRawCallbackMethod_ListPinnedPrefixes<
                            v1::Tandem::Service>>>>>>>>>>;

class TandemService final : public RawTandemService {
 public:
  TandemService(ServiceState& state, StreamPump& pump) : state_(state), pump_(pump) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Chat(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  // Answers when the engine has pinned the prefix (server/grpc/pinned_prefixes.h), without
  // holding a gRPC thread meanwhile.
  grpc::ServerUnaryReactor* PinPrefix(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnpinPrefix(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListPinnedPrefixes(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) override;

 private:
  // Calls of a connection the reset-flood guard blocks, and calls their client already reset,
  // end here (CANCELLED or RESOURCE_EXHAUSTED) before anything else is done for them.
  // `has_message`: the request message arrived (a reset before it did leaves none).
  grpc::Status CheckResetFlood(const grpc::CallbackServerContext& context, bool has_message);
  // A unary call: identify the caller, parse `wire_request` as Request, run
  // `answer(caller, request, &response)` and send its response or its error.
  template <class Request, class Response, class Answer>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* wire_request,
                                  grpc::ByteBuffer* wire_response, Answer answer);
  // Unary's checks (the reset flood, the caller, the request's parse): the caller, or the
  // reactor the call already ended with.
  template <class Request>
  std::variant<std::string, grpc::ServerUnaryReactor*> AcceptUnary(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* wire_request, Request* request);
  // Generate and Chat: identify the caller, refuse while draining, parse, build the engine
  // request with `build(request, &answer)` (which sets `answer` for a Chat whose reasoning or
  // calls are read), and admit it.
  template <class Request, class Build>
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Stream(const char* rpc,
                                                     grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* wire_request,
                                                     Build build);
  // Admits a built request (or its refusal) into the engine as `choices` choices
  // (SamplingParams.n, validated with the request) and returns the call's reactor.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Start(
      const char* rpc, grpc::CallbackServerContext* context, const std::string& caller,
      std::string request_id, absl::StatusOr<engine::Request> request, int32_t choices,
      std::unique_ptr<ChatAnswer> answer);

  // Whose pinned prefixes a call sees: its caller's with bearer tokens, everyone's without.
  std::string PinOwner(const std::string& caller) const;

  ServiceState& state_;
  StreamPump& pump_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_TANDEM_SERVICE_H_
