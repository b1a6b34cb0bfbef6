// What an operator can set about the gRPC server: where it listens and the caps that keep one
// client from taking the whole server. The engine's own settings (memory, batch, cache policy)
// travel in `engine`.
#ifndef TANDEM_SERVER_GRPC_SERVER_CONFIG_H_
#define TANDEM_SERVER_GRPC_SERVER_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/grpc/reset_flood_guard.h"
#include "server/reasoning/reasoning_format.h"
#include "server/tools/tool_call_format.h"
#include "server/util/bearer_tokens.h"

namespace tandem::server {

struct RequestLimits {
  // Bytes of one request message (prompt text, chat messages, stop strings together). gRPC
  // refuses larger messages with RESOURCE_EXHAUSTED before they reach us.
  int64_t max_request_bytes = 1 << 20;
  // Tokens of one prompt after tokenization (or given as ids).
  int32_t max_prompt_tokens = 8192;
  // Generate and Chat streams open at once; one more gets RESOURCE_EXHAUSTED.
  int32_t max_concurrent_streams = 256;
  // HTTP/2 streams one connection may have open at once (announced in SETTINGS; the transport
  // refuses more), so that one connection cannot take every stream slot of the server.
  int32_t max_streams_per_connection = 128;
  // A Generate or Chat stream whose client has read nothing for this long (its HTTP/2 flow
  // control window stays shut, so a write never completes) is cancelled and its slot freed.
  std::chrono::milliseconds write_stall_timeout{30000};
  // Connections whose client resets calls in floods are refused for a while
  // (reset_flood_guard.h).
  ResetFloodLimits reset_flood;
  // Prefixes one caller may have pinned (PinPrefix) at once. The bytes they all hold are
  // capped by engine.scheduler.max_pinned_bytes.
  int32_t max_pinned_prefixes = 64;
};

// Transport security and authentication. Health and reflection stay open to anyone who can
// connect (Kubernetes probes send no token); every tandem.v1.Tandem call needs the token.
struct SecurityConfig {
  // PEM files; both or neither. With them the port speaks TLS only.
  std::string tls_cert_file;
  std::string tls_key_file;
  // When enabled, calls must carry the metadata "authorization: Bearer <token>" with one of
  // them; the token names the caller.
  BearerTokens tokens;
};

struct MetricsConfig {
  bool enabled = true;
  std::string host = "127.0.0.1";
  int port = 9464;  // 0 picks a free port (GrpcServer::metrics_port() tells which)
  // PEM files; both or neither. With them /metrics is served over HTTPS only.
  std::string tls_cert_file;
  std::string tls_key_file;
  // When enabled, a scrape must send "Authorization: Bearer <token>" with one of them
  // (Prometheus: authorization.credentials_file).
  BearerTokens tokens;
};

// A system prompt pinned as the server starts (`tandem serve --pin-system-prompt`), before it
// reports SERVING: pinned as PinPrefix pins a chat of that one system message. The server owns
// it: callers list it only on a server without bearer tokens, and it lasts until shutdown.
struct StartupPin {
  std::string name;
  std::string system_prompt;
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 50051;  // 0 picks a free port (GrpcServer::port() tells which)
  RequestLimits limits;
  SecurityConfig security;
  MetricsConfig metrics;
  // engine.max_waiting is the queue length cap; engine.scheduler.max_new_tokens_limit caps
  // max_new_tokens.
  engine::EngineConfig engine;
  // How the model writes tool calls, which Chat and the OpenAI API parse out of answers; unset:
  // the format its chat template shows (kNone if it shows none).
  std::optional<ToolCallFormat> tool_call_format;
  // How the model sets its reasoning apart, which Chat and the OpenAI API split off answers;
  // unset: the format its chat template shows (kNone if it shows none).
  std::optional<ReasoningFormat> reasoning_format;
  std::vector<StartupPin> startup_pins;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_SERVER_CONFIG_H_
