#include "server/grpc/tandem_service.h"

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/grpc/admission.h"
#include "server/grpc/caller_identity.h"
#include "server/grpc/chat_answer.h"
#include "server/grpc/generate_stream.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/info.h"
#include "server/grpc/pinned_prefix_request.h"
#include "server/grpc/request_validation.h"
#include "server/grpc/wire_messages.h"
#include "server/logging/structured_log.h"

namespace tandem::server {
namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

grpc::Status TandemService::CheckResetFlood(const grpc::CallbackServerContext& context,
                                            bool has_message) {
  const std::string connection = context.peer();
  if (state_.reset_guard().Blocked(connection)) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "this connection resets too many calls; try again later");
  }
  // Reset by the client before it was read (the cancellation, or at least the end of the stream
  // without a request message, has arrived): nobody is waiting for an answer.
  if (context.IsCancelled() || !has_message) {
    state_.reset_guard().RecordClientReset(connection);
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client reset the call");
  }
  return grpc::Status::OK;
}

template <class Request>
std::variant<std::string, grpc::ServerUnaryReactor*> TandemService::AcceptUnary(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* wire_request, Request* request) {
  if (grpc::Status flood = CheckResetFlood(*context, wire_request->Valid()); !flood.ok()) {
    context->DefaultReactor()->Finish(flood);
    return context->DefaultReactor();
  }
  absl::StatusOr<std::string> caller = IdentifyCaller(*context, state_.config().security.tokens);
  if (!caller.ok()) return Answer(context, caller.status());
  if (absl::Status s = ParseWireMessage(*wire_request, request); !s.ok()) {
    return Answer(context, s);
  }
  return *std::move(caller);
}

template <class Request, class Response, class AnswerFn>
grpc::ServerUnaryReactor* TandemService::Unary(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* wire_request,
                                               grpc::ByteBuffer* wire_response, AnswerFn answer) {
  Request request;
  auto accepted = AcceptUnary(context, wire_request, &request);
  if (auto* ended = std::get_if<grpc::ServerUnaryReactor*>(&accepted)) return *ended;
  Response response;
  absl::Status status = answer(std::get<std::string>(accepted), request, &response);
  if (status.ok()) status = SerializeWireMessage(response, wire_response);
  return Answer(context, status);
}

template <class Request, class Build>
grpc::ServerWriteReactor<grpc::ByteBuffer>* TandemService::Stream(
    const char* rpc, grpc::CallbackServerContext* context, const grpc::ByteBuffer* wire_request,
    Build build) {
  if (grpc::Status flood = CheckResetFlood(*context, wire_request->Valid()); !flood.ok()) {
    return new AbandonedStream(state_, rpc, flood);
  }
  absl::StatusOr<std::string> caller = IdentifyCaller(*context, state_.config().security.tokens);
  if (!caller.ok()) return new RefusedStream(state_, rpc, "", "", ToGrpcStatus(caller.status()));
  if (state_.draining()) {
    return new RefusedStream(
        state_, rpc, *caller, "",
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }
  Request request;
  if (absl::Status s = ParseWireMessage(*wire_request, &request); !s.ok()) {
    return new RefusedStream(state_, rpc, *caller, "", ToGrpcStatus(s));
  }
  std::unique_ptr<ChatAnswer> answer;
  absl::StatusOr<engine::Request> built = build(request, &answer);
  return Start(rpc, context, *caller, request.request_id(), std::move(built),
               request.sampling().n(), std::move(answer));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TandemService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return Stream<v1::GenerateRequest>(
      "Generate", context, request,
      [this](const v1::GenerateRequest& in, std::unique_ptr<ChatAnswer>*) {
        return BuildGenerateRequest(in, state_.validation());
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TandemService::Chat(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return Stream<v1::ChatRequest>(
      "Chat", context, request,
      [this](const v1::ChatRequest& in, std::unique_ptr<ChatAnswer>* answer) {
        return BuildChatCall(in, state_, answer);
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TandemService::Start(
    const char* rpc, grpc::CallbackServerContext* context, const std::string& caller,
    std::string request_id, absl::StatusOr<engine::Request> request, int32_t choices,
    std::unique_ptr<ChatAnswer> answer) {
  if (!request.ok()) {
    return new RefusedStream(state_, rpc, caller, request_id, ToGrpcStatus(request.status()));
  }
  if (absl::Status slot = TakeStreamSlot(state_, choices); !slot.ok()) {
    if (grpc::Status flood = CheckResetFlood(*context, /*has_message=*/true); !flood.ok()) {
      return new AbandonedStream(state_, rpc, flood);
    }
    return new RefusedStream(state_, rpc, caller, request_id, ToGrpcStatus(slot));
  }
  absl::StatusOr<std::vector<SubmittedChoice>> submitted = SubmitChoicesForCaller(
      state_, caller, request_id, *std::move(request), choices, ChoiceIds::kOneForAll);
  if (!submitted.ok()) {
    return new RefusedStream(state_, rpc, caller, request_id, ToGrpcStatus(submitted.status()));
  }
  LogLine(LogLevel::kDebug, "request started")
      .Field("rpc", rpc)
      .Field("request_id", submitted->front().request_id)
      .Field("caller", caller)
      .Field("peer", context->peer());
  auto* reactor = new GenerateStream(state_, pump_, context, rpc, caller, *std::move(submitted),
                                     std::move(answer));
  pump_.Add(reactor);
  return reactor;
}

grpc::ServerUnaryReactor* TandemService::Tokenize(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  return Unary<v1::TokenizeRequest, v1::TokenizeResponse>(
      context, request, response,
      [this](const std::string&, const v1::TokenizeRequest& in, v1::TokenizeResponse* out) {
        return TokenizeText(state_, in, out);
      });
}

grpc::ServerUnaryReactor* TandemService::Detokenize(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return Unary<v1::DetokenizeRequest, v1::DetokenizeResponse>(
      context, request, response,
      [this](const std::string&, const v1::DetokenizeRequest& in, v1::DetokenizeResponse* out) {
        return DetokenizeIds(state_, in, out);
      });
}

grpc::ServerUnaryReactor* TandemService::GetModelInfo(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return Unary<v1::GetModelInfoRequest, v1::ModelInfo>(
      context, request, response,
      [this](const std::string&, const v1::GetModelInfoRequest&, v1::ModelInfo* out) {
        FillModelInfo(state_, out);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* TandemService::GetServerInfo(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary<v1::GetServerInfoRequest, v1::ServerInfo>(
      context, request, response,
      [this](const std::string&, const v1::GetServerInfoRequest&, v1::ServerInfo* out) {
        FillServerInfo(state_, out);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* TandemService::Abort(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return Unary<v1::AbortRequest, v1::AbortResponse>(
      context, request, response,
      [this](const std::string& caller, const v1::AbortRequest& in, v1::AbortResponse* out) {
        if (absl::Status s = ValidateRequestId(in.request_id()); !s.ok()) return s;
        // Only the caller's own requests: another caller's id is as unknown as a made-up one.
        // Every choice of the call: aborted when any of them was still running.
        bool aborted = false;
        for (engine::RequestId id : state_.Lookup(caller, in.request_id())) {
          aborted = state_.engine().Cancel(id) || aborted;
        }
        out->set_aborted(aborted);
        return absl::OkStatus();
      });
}

std::string TandemService::PinOwner(const std::string& caller) const {
  // Without tokens a caller is its address, which a client restarted elsewhere (a new pod) no
  // longer has: its pins could then never be unpinned. Pins outlive connections, so without
  // tokens they are the server's, shared by every client.
  return state_.config().security.tokens.enabled() ? caller : std::string();
}

grpc::ServerUnaryReactor* TandemService::PinPrefix(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* wire_request,
                                                   grpc::ByteBuffer* wire_response) {
  v1::PinPrefixRequest request;
  auto accepted = AcceptUnary(context, wire_request, &request);
  if (auto* ended = std::get_if<grpc::ServerUnaryReactor*>(&accepted)) return *ended;
  const std::string caller = PinOwner(std::get<std::string>(accepted));
  if (state_.draining()) {
    return Answer(context, absl::UnavailableError("the server is shutting down"));
  }
  absl::StatusOr<std::vector<int32_t>> tokens = PrefixTokens(request, state_.validation());
  if (!tokens.ok()) return Answer(context, tokens.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status started = state_.pins().Pin(
      caller, request.name(), *std::move(tokens),
      [reactor, wire_response, caller](absl::StatusOr<PinnedPrefixes::Prefix> pinned) {
        absl::Status status = pinned.status();
        if (pinned.ok()) {
          v1::PinnedPrefix out;
          out.set_name(pinned->name);
          out.set_tokens(pinned->tokens);
          status = SerializeWireMessage(out, wire_response);
          LogLine(LogLevel::kInfo, "prefix pinned")
              .Field("name", pinned->name)
              .Field("tokens", pinned->tokens)
              .Field("caller", caller);
        }
        reactor->Finish(ToGrpcStatus(status));
      });
  if (!started.ok()) return Answer(context, started);
  return reactor;
}

grpc::ServerUnaryReactor* TandemService::UnpinPrefix(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Unary<v1::UnpinPrefixRequest, v1::UnpinPrefixResponse>(
      context, request, response,
      [this](const std::string& caller, const v1::UnpinPrefixRequest& in,
             v1::UnpinPrefixResponse*) {
        if (absl::Status s = ValidatePrefixName(in.name()); !s.ok()) return s;
        absl::Status unpinned = state_.pins().Unpin(PinOwner(caller), in.name());
        if (unpinned.ok()) {
          LogLine(LogLevel::kInfo, "prefix unpinned")
              .Field("name", in.name())
              .Field("caller", caller);
        }
        return unpinned;
      });
}

grpc::ServerUnaryReactor* TandemService::ListPinnedPrefixes(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return Unary<v1::ListPinnedPrefixesRequest, v1::ListPinnedPrefixesResponse>(
      context, request, response,
      [this](const std::string& caller, const v1::ListPinnedPrefixesRequest&,
             v1::ListPinnedPrefixesResponse* out) {
        for (const PinnedPrefixes::Prefix& p : state_.pins().List(PinOwner(caller))) {
          v1::PinnedPrefix* entry = out->add_prefixes();
          entry->set_name(p.name);
          entry->set_tokens(p.tokens);
        }
        return absl::OkStatus();
      });
}

}  // namespace tandem::server
