#include "server/grpc/tandem_service.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/grpc/bearer_auth.h"
#include "server/grpc/generate_stream.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/info.h"
#include "server/grpc/request_validation.h"
#include "server/logging/structured_log.h"

namespace tandem::server {
namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

grpc::Status TandemService::Authorize(const grpc::CallbackServerContext& context) const {
  return CheckBearerToken(context, state_.config().security.auth_token);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TandemService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  if (grpc::Status refused = Admission(*context); !refused.ok()) {
    return new RefusedStream(state_, "Generate", request->request_id(), refused);
  }
  return Start("Generate", *context, request->request_id(),
               BuildGenerateRequest(*request, state_.validation()));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TandemService::Chat(
    grpc::CallbackServerContext* context, const v1::ChatRequest* request) {
  if (grpc::Status refused = Admission(*context); !refused.ok()) {
    return new RefusedStream(state_, "Chat", request->request_id(), refused);
  }
  return Start("Chat", *context, request->request_id(),
               BuildChatRequest(*request, state_.validation()));
}

grpc::Status TandemService::Admission(const grpc::CallbackServerContext& context) const {
  if (grpc::Status auth = Authorize(context); !auth.ok()) return auth;
  if (state_.draining()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
  }
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TandemService::Start(
    const char* rpc, const grpc::CallbackServerContext& context, std::string request_id,
    absl::StatusOr<engine::Request> request) {
  if (!request.ok()) {
    return new RefusedStream(state_, rpc, request_id, ToGrpcStatus(request.status()));
  }
  if (!state_.AcquireStream()) {
    return new RefusedStream(
        state_, rpc, request_id,
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("too many concurrent streams (the server's limit is ",
                                  state_.config().limits.max_concurrent_streams, ")")));
  }
  if (!state_.ReserveId(&request_id)) {
    state_.ReleaseStream();
    return new RefusedStream(
        state_, rpc, request_id,
        grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                     absl::StrCat("request_id: '", request_id, "' is used by a live request")));
  }
  request->client_id = request_id;
  absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream =
      state_.engine().Submit(*std::move(request));
  if (!stream.ok()) {
    state_.ReleaseId(request_id);
    state_.ReleaseStream();
    return new RefusedStream(state_, rpc, request_id, ToGrpcStatus(stream.status()));
  }
  state_.BindId(request_id, (*stream)->id());
  LogLine(LogLevel::kDebug, "request started")
      .Field("rpc", rpc)
      .Field("request_id", request_id)
      .Field("peer", context.peer());
  auto* reactor = new GenerateStream(state_, pump_, rpc, std::move(request_id), context.deadline(),
                                     *std::move(stream));
  pump_.Add(reactor);
  return reactor;
}

grpc::ServerUnaryReactor* TandemService::Tokenize(grpc::CallbackServerContext* context,
                                                  const v1::TokenizeRequest* request,
                                                  v1::TokenizeResponse* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return Answer(context, auth);
  return Answer(context, ToGrpcStatus(TokenizeText(state_, *request, response)));
}

grpc::ServerUnaryReactor* TandemService::Detokenize(grpc::CallbackServerContext* context,
                                                    const v1::DetokenizeRequest* request,
                                                    v1::DetokenizeResponse* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return Answer(context, auth);
  return Answer(context, ToGrpcStatus(DetokenizeIds(state_, *request, response)));
}

grpc::ServerUnaryReactor* TandemService::GetModelInfo(grpc::CallbackServerContext* context,
                                                      const v1::GetModelInfoRequest* request,
                                                      v1::ModelInfo* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return Answer(context, auth);
  FillModelInfo(state_, response);
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* TandemService::GetServerInfo(grpc::CallbackServerContext* context,
                                                       const v1::GetServerInfoRequest* request,
                                                       v1::ServerInfo* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return Answer(context, auth);
  FillServerInfo(state_, response);
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* TandemService::Abort(grpc::CallbackServerContext* context,
                                               const v1::AbortRequest* request,
                                               v1::AbortResponse* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return Answer(context, auth);
  if (absl::Status s = ValidateRequestId(request->request_id()); !s.ok()) {
    return Answer(context, ToGrpcStatus(s));
  }
  std::optional<engine::RequestId> id = state_.Lookup(request->request_id());
  response->set_aborted(id.has_value() && state_.engine().Cancel(*id));
  return Answer(context, grpc::Status::OK);
}

}  // namespace tandem::server
