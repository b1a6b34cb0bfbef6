#include "server/openai/openai_endpoint.h"

#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/grpc/call_record.h"
#include "server/grpc/caller_identity.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/request_validation.h"
#include "server/logging/structured_log.h"
#include "server/openai/choice_streams.h"
#include "server/openai/completion_answer.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_json.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;

constexpr char kChatRpc[] = "ChatCompletions";
constexpr char kCompletionRpc[] = "Completions";

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "10.0.0.7:5123" -> "10.0.0.7", "[::1]:5123" -> "::1": an HTTP peer's host, spelled as
// caller_identity.h spells a gRPC peer's, so one host has one namespace of request ids.
std::string HttpPeerHost(absl::string_view peer) {
  peer = peer.substr(0, peer.rfind(':'));
  if (absl::ConsumePrefix(&peer, "[")) absl::ConsumeSuffix(&peer, "]");
  return std::string(peer);
}

HttpResponse NotFound(const std::string& path) {
  OpenAiError error;
  error.http_status = 404;
  error.type = "invalid_request_error";
  error.message = absl::StrCat("no such endpoint: ", path,
                               " (tandem serves /v1/chat/completions, /v1/completions, "
                               "/v1/models and /health)");
  return ErrorResponse(error);
}

HttpResponse MethodNotAllowed(const char* allow) {
  OpenAiError error;
  error.http_status = 405;
  error.type = "invalid_request_error";
  error.message = absl::StrCat("this endpoint takes ", allow);
  HttpResponse response = ErrorResponse(error);
  response.headers.emplace_back("Allow", allow);
  return response;
}

}  // namespace

OpenAiEndpoint::OpenAiEndpoint(ServiceState& state, const OpenAiEndpointOptions& options)
    : state_(state), options_(options), started_(UnixSeconds()) {}

absl::StatusOr<std::unique_ptr<OpenAiEndpoint>> OpenAiEndpoint::Start(
    ServiceState& state, const OpenAiEndpointOptions& options) {
  std::unique_ptr<OpenAiEndpoint> endpoint(new OpenAiEndpoint(state, options));
  HttpServerOptions http;
  http.name = "http";
  http.host = options.host;
  http.port = options.port;
  http.tls = options.tls;
  http.max_connections = options.max_connections;
  http.max_body_bytes = options.max_body_bytes;
  // OpenAI's SDKs and gateways keep connections in a pool; a connection idle for 5 s is closed
  // so that idle ones do not hold the connection slots for long.
  http.keep_alive = true;
  // A large prompt over a slow link needs more than the metrics endpoint's 5 s.
  http.request_timeout = std::chrono::seconds(30);
  // Each write of a response (a whole one, or one event of a stream) must be taken within the
  // stall timeout of gRPC streams.
  http.response_timeout = state.config().limits.write_stall_timeout;
  http.error_response = [](int status, const std::string& message) {
    OpenAiError error;
    error.http_status = status;
    error.type = "invalid_request_error";
    error.message = message;
    return ErrorResponse(error);
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      http, [e = endpoint.get()](const HttpRequest& request, HttpResponseWriter& writer) {
        e->Handle(request, writer);
      });
  if (!server.ok()) return server.status();
  endpoint->http_ = *std::move(server);
  return endpoint;
}

absl::StatusOr<std::string> OpenAiEndpoint::Caller(const HttpRequest& request) const {
  return IdentifyCaller(request.Header("authorization"), HttpPeerHost(request.peer),
                        state_.config().security.tokens);
}

json OpenAiEndpoint::ModelJson() const {
  return {{"id", options_.model_name},
          {"object", "model"},
          {"created", started_},
          {"owned_by", "tandem"}};
}

void OpenAiEndpoint::Handle(const HttpRequest& request, HttpResponseWriter& writer) {
  const std::string& path = request.path;
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (path == "/health") {
    // Open to probes, which send no token.
    if (!get) return (void)writer.Send(MethodNotAllowed("GET, HEAD"));
    (void)writer.Send(state_.draining() ? HttpResponse::Text(503, "draining\n")
                                        : HttpResponse::Text(200, "ok\n"));
    return;
  }
  const bool chat = path == "/v1/chat/completions";
  if (chat || path == "/v1/completions") {
    if (request.method != "POST") return (void)writer.Send(MethodNotAllowed("POST"));
    Complete(chat, request, writer);
    return;
  }
  if (path != "/v1/models" && !absl::StartsWith(path, "/v1/models/")) {
    return (void)writer.Send(NotFound(path));
  }
  if (!get) return (void)writer.Send(MethodNotAllowed("GET, HEAD"));
  if (absl::StatusOr<std::string> caller = Caller(request); !caller.ok()) {
    return (void)writer.Send(ErrorResponse(ErrorFromStatus(caller.status())));
  }
  if (path == "/v1/models") {
    (void)writer.Send(
        JsonResponse(200, {{"object", "list"}, {"data", json::array({ModelJson()})}}));
  } else if (path.substr(sizeof("/v1/models/") - 1) == options_.model_name) {
    (void)writer.Send(JsonResponse(200, ModelJson()));
  } else {
    (void)writer.Send(ErrorResponse(ErrorFromStatus(absl::NotFoundError(absl::StrCat(
        "model: '", path.substr(sizeof("/v1/models/") - 1), "' is not served here; this server ",
        "serves '", options_.model_name, "'")))));
  }
}

void OpenAiEndpoint::Refuse(const char* rpc, const std::string& caller, const absl::Status& status,
                            HttpResponseWriter& writer) {
  RecordRefusedCall(state_, rpc, caller, "", ToGrpcStatus(status));
  (void)writer.Send(ErrorResponse(ErrorFromStatus(status)));
}

void OpenAiEndpoint::Complete(bool chat, const HttpRequest& http, HttpResponseWriter& writer) {
  const char* rpc = chat ? kChatRpc : kCompletionRpc;
  // As a gRPC call: who is calling first, then whether the server still takes requests, and only
  // then what the request says.
  absl::StatusOr<std::string> caller = Caller(http);
  if (!caller.ok()) return Refuse(rpc, "", caller.status(), writer);
  if (state_.draining()) {
    return Refuse(rpc, *caller, absl::UnavailableError("the server is shutting down"), writer);
  }
  OpenAiRequestOptions translation;
  translation.model_name = options_.model_name;
  translation.default_chat_max_tokens = state_.validation().max_new_tokens_limit;
  translation.tool_call_format = state_.tool_calls().format();
  absl::StatusOr<OpenAiRequest> request = chat ? ParseChatCompletionRequest(http.body, translation)
                                               : ParseCompletionRequest(http.body, translation);
  if (!request.ok()) return Refuse(rpc, *caller, request.status(), writer);
  std::vector<engine::Request> built;
  std::vector<CompletionShape::EchoedPrompt> echoed;
  std::optional<ReasoningUse> reasoning;
  if (chat) {
    absl::StatusOr<engine::Request> one = BuildChatRequest(request->chat, state_.validation());
    if (!one.ok()) return Refuse(rpc, *caller, one.status(), writer);
    if (absl::Status s = state_.tool_calls().Apply(request->tool_use, state_.grammars(), &*one);
        !s.ok()) {
      return Refuse(rpc, *caller, s, writer);
    }
    // After the tools: a forced call's grammar keeps the answer whole.
    reasoning = state_.reasoning().Apply(&*one);
    built.push_back(*std::move(one));
  } else {
    absl::StatusOr<std::vector<engine::Request>> all = BuildCompletions(*request, &echoed);
    if (!all.ok()) return Refuse(rpc, *caller, all.status(), writer);
    built = *std::move(all);
  }
  // best_of ranks candidates by their tokens' logprobs, which the engine then reports.
  if (request->best_of > request->n) {
    for (engine::Request& one : built) one.sampling.logprobs = true;
  }
  const size_t prompts = built.size();
  // Each choice takes a stream slot: a request that needs more than the server has can never
  // run, which is the client's to fix, not to retry (429 is for slots that are busy).
  const int64_t streams = static_cast<int64_t>(prompts) * request->best_of;
  const int32_t most = state_.config().limits.max_concurrent_streams;
  if (streams > most) {
    return Refuse(rpc, *caller,
                  absl::InvalidArgumentError(absl::StrCat(
                      prompts > 1 ? "prompt" : (request->best_of > request->n ? "best_of" : "n"),
                      ": ", streams, " choices need as many streams, more than the server's ", most,
                      " (--max-concurrent-streams)")),
                  writer);
  }
  absl::StatusOr<std::unique_ptr<ChoiceStreams>> live =
      ChoiceStreams::Admit(state_, *caller, std::move(built), request->best_of);
  if (!live.ok()) return Refuse(rpc, *caller, live.status(), writer);
  const std::string request_id = (*live)->request_id();
  LogLine(LogLevel::kDebug, "request started")
      .Field("rpc", rpc)
      .Field("request_id", request_id)
      .Field("caller", *caller)
      .Field("peer", http.peer)
      .Field("choices", static_cast<int64_t>(prompts) * request->best_of);

  CompletionShape shape;
  shape.chat = chat;
  shape.id = absl::StrCat(chat ? "chatcmpl-" : "cmpl-", request_id);
  shape.model = options_.model_name;
  shape.created = UnixSeconds();
  shape.usage_in_chunks = request->include_usage;
  const v1::SamplingParams& sampling =
      chat ? request->chat.sampling() : request->generate.sampling();
  shape.logprobs = sampling.logprobs();
  shape.choices_per_prompt = request->best_of;
  if (request->best_of > request->n) shape.keep_best = request->n;
  shape.skip_special_tokens = sampling.skip_special_tokens();
  shape.tokenizer = state_.model().tokenizer.get();
  shape.echo = request->echo;
  shape.prompts = std::move(echoed);
  if (request->tool_use.parse) {
    shape.tool_call_format = state_.tool_calls().format();
    shape.tools = request->tool_use.tools;
  }
  shape.reasoning = reasoning;
  CallOutcome outcome = request->stream ? AnswerStreamed(**live, shape, writer, state_.metrics())
                                        : AnswerWhole(**live, shape, writer);
  live->reset();  // the slots and the ids are free (if no finish event came) before the record
  RecordServedCall(state_, rpc, *caller, request_id, ToGrpcStatus(outcome.status), outcome.finished,
                   static_cast<size_t>(request->best_of));
}

absl::StatusOr<std::vector<engine::Request>> OpenAiEndpoint::BuildCompletions(
    const OpenAiRequest& request, std::vector<CompletionShape::EchoedPrompt>* echoed) {
  std::vector<const v1::GenerateRequest*> sources = {&request.generate};
  for (const v1::GenerateRequest& more : request.more_prompts) sources.push_back(&more);
  // Of a list, the prompt at fault is named by its place ("prompt[2]: ...", or
  // "prompt[2][7]: ..." for an id), in the client's names.
  auto named = [&](size_t i, const absl::Status& status) {
    std::string message(status.message());
    const size_t colon = message.find(": ");
    if (request.prompt_list && colon != std::string::npos) {
      const std::string param = OpenAiParam(message.substr(0, colon));
      if (absl::StartsWith(param, "prompt")) {
        message = absl::StrCat("prompt[", i, "]", param.substr(sizeof("prompt") - 1),
                               message.substr(colon));
      }
    }
    return absl::Status(status.code(), message);
  };
  // The first prompt's request is built whole; the others are copies of it with their own
  // prompt, so what they share (a prediction, stop strings, a bias) is read once.
  std::vector<engine::Request> built;
  size_t prompt_tokens = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (i == 0) {
      absl::StatusOr<engine::Request> first =
          BuildGenerateRequest(*sources[0], state_.validation());
      if (!first.ok()) return named(0, first.status());
      built.push_back(*std::move(first));
    } else {
      std::vector<int32_t> prompt;
      if (absl::Status s = ConvertPrompt(*sources[i], state_.validation(), &prompt); !s.ok()) {
        return named(i, s);
      }
      built.push_back(built.front());  // push_back copies safely from its own element
      built.back().prompt = std::move(prompt);
    }
    prompt_tokens += built.back().prompt.size();
    // A list holds at most kListPromptBudget prompts' worth of tokens: every answer (and an
    // echo's scores) is held until the last choice finishes.
    const size_t budget = static_cast<size_t>(kListPromptBudget) *
                          static_cast<size_t>(state_.validation().limits.max_prompt_tokens);
    if (prompt_tokens > budget) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt: the list's prompts hold more than ", budget, " tokens in all (",
          kListPromptBudget, " × the server's --max-prompt-tokens); send fewer per request"));
    }
    if (request.echo) {
      // The prompt as the client sent it, or the text of the ids it sent.
      CompletionShape::EchoedPrompt& echo = echoed->emplace_back();
      const models::Tokenizer* tokenizer = state_.model().tokenizer.get();
      if (sources[i]->has_text()) {
        echo.text = sources[i]->text();
      } else if (tokenizer != nullptr) {
        echo.text = tokenizer->Decode(built.back().prompt,
                                      request.generate.sampling().skip_special_tokens());
      } else {
        return absl::FailedPreconditionError(
            "echo: the model has no tokenizer to write the text of a prompt of ids");
      }
      echo.tokens = built.back().prompt;
    }
  }
  return built;
}

}  // namespace tandem::server
