// What an operator can set about the gRPC server: where it listens and the caps that keep one
// client from taking the whole server. The engine's own settings (memory, batch, cache policy)
// travel in `engine`.
#ifndef TANDEM_SERVER_GRPC_SERVER_CONFIG_H_
#define TANDEM_SERVER_GRPC_SERVER_CONFIG_H_

#include <cstdint>
#include <string>

#include "engine/engine.h"

namespace tandem::server {

struct RequestLimits {
  // Bytes of one request message (prompt text, chat messages, stop strings together). gRPC
  // refuses larger messages with RESOURCE_EXHAUSTED before they reach us.
  int64_t max_request_bytes = 1 << 20;
  // Tokens of one prompt after tokenization (or given as ids).
  int32_t max_prompt_tokens = 8192;
  // Generate and Chat streams open at once; one more gets RESOURCE_EXHAUSTED.
  int32_t max_concurrent_streams = 256;
};

// Transport security and authentication. Health and reflection stay open to anyone who can
// connect (Kubernetes probes send no token); every tandem.v1.Tandem call needs the token.
struct SecurityConfig {
  // PEM files; both or neither. With them the port speaks TLS only.
  std::string tls_cert_file;
  std::string tls_key_file;
  // When set, calls must carry the metadata "authorization: Bearer <token>".
  std::string auth_token;
};

struct MetricsConfig {
  bool enabled = true;
  std::string host = "127.0.0.1";
  int port = 9464;  // 0 picks a free port (GrpcServer::metrics_port() tells which)
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
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_SERVER_CONFIG_H_
