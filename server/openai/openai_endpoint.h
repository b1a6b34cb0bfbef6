// OpenAI's HTTP API beside gRPC, on a port of its own over our HttpServer: POST
// /v1/chat/completions and /v1/completions (whole or streamed as Server-Sent Events), GET
// /v1/models, and GET /health for HTTP probes (200 serving, 503 draining; no token needed).
//
// A completion takes the gRPC service's path (the same ServiceState): the caller is identified
// by the same bearer tokens (else by the client's host), refused while draining, its body
// translated (openai_request.h) into the proto request that BuildChatRequest /
// BuildGenerateRequest validate and build, and admitted with a stream slot and a per-caller
// request id (admission.h). Calls are recorded like gRPC ones (tandem_requests_total with
// rpc="ChatCompletions" or "Completions"). Each connection's thread reads its request's events;
// a client that hangs up (seen by a failed write or by polling the socket between events) has
// its request cancelled, which touches no other request. A chat with tools gets the calls the
// model made as `tool_calls` (server/tools/tool_calls.h), in the server's tool-call format
// (ServiceState::tool_calls()). Connections are kept alive between whole answers
// (HttpServerOptions::keep_alive).
#ifndef TANDEM_SERVER_OPENAI_OPENAI_ENDPOINT_H_
#define TANDEM_SERVER_OPENAI_OPENAI_ENDPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/grpc/service_state.h"
#include "server/http/http_server.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_response.h"

namespace tandem::server {

struct OpenAiEndpointOptions {
  std::string host = "127.0.0.1";
  int port = 0;                     // 0 picks a free port
  std::shared_ptr<TlsContext> tls;  // null: plain HTTP
  std::string model_name;           // what `model` must say and /v1/models lists
  uint64_t max_body_bytes = 4 << 20;
  int max_connections = 256;
};

class OpenAiEndpoint {
 public:
  // `state` must outlive the endpoint. UNAVAILABLE naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<OpenAiEndpoint>> Start(
      ServiceState& state, const OpenAiEndpointOptions& options);
  OpenAiEndpoint(const OpenAiEndpoint&) = delete;
  OpenAiEndpoint& operator=(const OpenAiEndpoint&) = delete;

  int port() const { return http_->port(); }

 private:
  OpenAiEndpoint(ServiceState& state, const OpenAiEndpointOptions& options);
  void Handle(const HttpRequest& request, HttpResponseWriter& writer);
  // The caller's name ("token:NAME" or "peer:HOST"), or UNAUTHENTICATED.
  absl::StatusOr<std::string> Caller(const HttpRequest& request) const;
  nlohmann::json ModelJson() const;
  // A chat completion (`chat`) or a completion, from body to answer.
  void Complete(bool chat, const HttpRequest& request, HttpResponseWriter& writer);
  // A completion's engine requests, one per prompt (a list of prompts gives several), and with
  // echo each prompt's text and tokens into `echoed`; the first refusal names its prompt.
  absl::StatusOr<std::vector<engine::Request>> BuildCompletions(
      const OpenAiRequest& request, std::vector<CompletionShape::EchoedPrompt>* echoed);
  // Answers a call refused before the engine, and records it.
  void Refuse(const char* rpc, const std::string& caller, const absl::Status& status,
              HttpResponseWriter& writer);

  ServiceState& state_;
  const OpenAiEndpointOptions options_;
  const int64_t started_;             // Unix seconds: /v1/models' `created`
  std::unique_ptr<HttpServer> http_;  // last: destroyed (and its threads joined) first
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_OPENAI_ENDPOINT_H_
