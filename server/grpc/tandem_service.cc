#include "server/grpc/tandem_service.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/grpc/generate_stream.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/info.h"
#include "server/grpc/request_validation.h"

namespace tandem::server {
namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* TandemService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  if (state_.draining()) {
    return new RefusedStream(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }
  return Start(request->request_id(), BuildGenerateRequest(*request, state_.validation()));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TandemService::Chat(
    grpc::CallbackServerContext* context, const v1::ChatRequest* request) {
  if (state_.draining()) {
    return new RefusedStream(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }
  return Start(request->request_id(), BuildChatRequest(*request, state_.validation()));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TandemService::Start(
    std::string request_id, absl::StatusOr<engine::Request> request) {
  if (!request.ok()) return new RefusedStream(ToGrpcStatus(request.status()));
  if (!state_.AcquireStream()) {
    return new RefusedStream(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("too many concurrent streams (the server's limit is ",
                                  state_.config().limits.max_concurrent_streams, ")")));
  }
  if (!state_.ReserveId(&request_id)) {
    state_.ReleaseStream();
    return new RefusedStream(
        grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                     absl::StrCat("request_id: '", request_id, "' is used by a live request")));
  }
  request->client_id = request_id;
  absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream =
      state_.engine().Submit(*std::move(request));
  if (!stream.ok()) {
    state_.ReleaseId(request_id);
    state_.ReleaseStream();
    return new RefusedStream(ToGrpcStatus(stream.status()));
  }
  state_.BindId(request_id, (*stream)->id());
  auto* reactor = new GenerateStream(state_, pump_, std::move(request_id), *std::move(stream));
  pump_.Add(reactor);
  return reactor;
}

grpc::ServerUnaryReactor* TandemService::Tokenize(grpc::CallbackServerContext* context,
                                                  const v1::TokenizeRequest* request,
                                                  v1::TokenizeResponse* response) {
  return Answer(context, ToGrpcStatus(TokenizeText(state_, *request, response)));
}

grpc::ServerUnaryReactor* TandemService::Detokenize(grpc::CallbackServerContext* context,
                                                    const v1::DetokenizeRequest* request,
                                                    v1::DetokenizeResponse* response) {
  return Answer(context, ToGrpcStatus(DetokenizeIds(state_, *request, response)));
}

grpc::ServerUnaryReactor* TandemService::GetModelInfo(grpc::CallbackServerContext* context,
                                                      const v1::GetModelInfoRequest* request,
                                                      v1::ModelInfo* response) {
  FillModelInfo(state_, response);
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* TandemService::GetServerInfo(grpc::CallbackServerContext* context,
                                                       const v1::GetServerInfoRequest* request,
                                                       v1::ServerInfo* response) {
  FillServerInfo(state_, response);
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* TandemService::Abort(grpc::CallbackServerContext* context,
                                               const v1::AbortRequest* request,
                                               v1::AbortResponse* response) {
  if (absl::Status s = ValidateRequestId(request->request_id()); !s.ok()) {
    return Answer(context, ToGrpcStatus(s));
  }
  std::optional<engine::RequestId> id = state_.Lookup(request->request_id());
  response->set_aborted(id.has_value() && state_.engine().Cancel(*id));
  return Answer(context, grpc::Status::OK);
}

}  // namespace tandem::server
