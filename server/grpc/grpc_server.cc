#include "server/grpc/grpc_server.h"

#include <algorithm>
#include <future>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/grpc/pinned_prefix_request.h"
#include "server/grpc/service_state.h"
#include "server/grpc/stream_pump.h"
#include "server/grpc/tandem_service.h"
#include "server/http/tls_context.h"
#include "server/logging/structured_log.h"
#include "server/metrics/engine_collector.h"
#include "server/metrics/metrics_endpoint.h"
#include "server/util/small_file.h"

namespace tandem::server {
namespace {

// Runs one short request through every layer so that the first client does not pay for lazy
// initialisation (thread pools, scratch buffers, page commits).
absl::Status WarmUp(engine::Engine& engine, const models::Model& model) {
  engine::Request request;
  request.prompt = {std::max(model.config().bos_token_id, 0)};
  request.max_new_tokens = 2;
  request.ignore_eos = true;
  request.client_id = "warm-up";
  absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream = engine.Submit(request);
  if (!stream.ok()) return stream.status();
  engine::Event event;
  while ((*stream)->Next(&event)) {
    if (event.kind == engine::Event::Kind::kFinished &&
        event.finish_reason == engine::FinishReason::kError) {
      return event.error;
    }
  }
  return absl::OkStatus();
}

// The PEM files' contents, or an error naming the file.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const char* what) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, 1 << 20);
  if (!text.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, " ", text.status().message()));
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is not a PEM file"));
  }
  return text;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const SecurityConfig& config) {
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key file");
  }
  if (config.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadPemFile(config.tls_cert_file, "TLS certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(config.tls_key_file, "TLS key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

// Pins each startup pin as the server's own (TandemService::PinOwner's owner without tokens),
// waiting for the engine: the server reports SERVING with them in place.
absl::Status PinAtStart(ServiceState& state, const std::vector<StartupPin>& pins) {
  for (const StartupPin& pin : pins) {
    v1::PinPrefixRequest request;
    request.set_name(pin.name);
    v1::ChatMessage* system = request.mutable_chat()->add_messages();
    system->set_role("system");
    system->set_content(pin.system_prompt);
    absl::Status status;
    absl::StatusOr<std::vector<int32_t>> tokens = PrefixTokens(request, state.validation());
    if (tokens.ok()) {
      std::promise<absl::StatusOr<PinnedPrefixes::Prefix>> done;
      std::future<absl::StatusOr<PinnedPrefixes::Prefix>> pinned = done.get_future();
      status = state.pins().Pin("", pin.name, *std::move(tokens),
                                [&done](absl::StatusOr<PinnedPrefixes::Prefix> result) {
                                  done.set_value(std::move(result));
                                });
      if (status.ok()) {
        const absl::StatusOr<PinnedPrefixes::Prefix> result = pinned.get();
        status = result.status();
        if (result.ok()) {
          LogLine(LogLevel::kInfo, "system prompt pinned")
              .Field("name", result->name)
              .Field("tokens", result->tokens);
        }
      }
    } else {
      status = tokens.status();
    }
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("--pin-system-prompt ", pin.name, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

std::string Address(const std::string& host, int port) {
  // An IPv6 literal needs brackets before the port.
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

// What one connection may take of the server, whatever its client does.
void SetTransportLimits(const RequestLimits& limits, grpc::ServerBuilder& builder) {
  // Streams open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS; the transport
  // refuses more with REFUSED_STREAM), so that one connection cannot take every stream slot.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_streams_per_connection);
  // A connection must finish its handshake (TLS or the HTTP/2 preface) in this time.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 20'000);
  // Ping clients with calls in flight every minute and drop those that do not answer within
  // 20 s: a peer that vanished (or stopped reading its socket) frees its streams.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20'000);
  // Close connections that have had no call for 10 minutes (clients reconnect on demand).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 600'000);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const ServedModel& model,
                                                              const ServerConfig& config) {
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port must be in [0, 65535], got ", config.port));
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      Credentials(config.security);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(*model.model, model.tokenizer.get(), config.engine);
  if (!engine.ok()) return engine.status();
  server->engine_ = *std::move(engine);
  if (absl::Status s = WarmUp(*server->engine_, *model.model); !s.ok()) {
    return absl::InternalError(absl::StrCat("warm-up request failed: ", s.message()));
  }
  // After a burst of calls (a reset flood, a huge prompt) the freed memory goes back to the
  // system within seconds instead of keeping the process at its peak.
  server->heap_trimmer_ =
      std::make_unique<engine::PeriodicHeapTrimmer>(std::chrono::seconds(2), 32 << 20);
  server->state_ = std::make_unique<ServiceState>(model, *server->engine_, config);
  server->pump_ = std::make_unique<StreamPump>();
  server->service_ = std::make_unique<TandemService>(*server->state_, *server->pump_);
  if (absl::Status pinned = PinAtStart(*server->state_, config.startup_pins); !pinned.ok()) {
    server->pump_->Stop();
    return pinned;
  }
  if (config.metrics.enabled) {
    ServiceState* state = server->state_.get();
    server->engine_collector_ = std::make_shared<EngineCollector>([s = server.get(), state] {
      const uint64_t periodic = s->heap_trimmer_ ? s->heap_trimmer_->trims() : 0;
      EngineSnapshot snapshot{state->engine().stats(), state->active_streams(), state->draining(),
                              state->engine().heap_trims() + periodic};
      const engine::GrammarCache& grammars = state->grammars();
      snapshot.grammar_hits = grammars.hits();
      snapshot.grammar_compiles = grammars.compiles();
      snapshot.grammar_entries = grammars.entries();
      snapshot.grammar_bytes = grammars.bytes();
      return snapshot;
    });
    MetricsEndpointOptions options;
    options.host = config.metrics.host;
    options.port = config.metrics.port;
    options.tokens = config.metrics.tokens;
    if (!config.metrics.tls_cert_file.empty() || !config.metrics.tls_key_file.empty()) {
      absl::StatusOr<std::shared_ptr<TlsContext>> tls =
          TlsContext::Load(config.metrics.tls_cert_file, config.metrics.tls_key_file);
      if (!tls.ok()) {
        server->pump_->Stop();
        return absl::InvalidArgumentError(absl::StrCat("metrics: ", tls.status().message()));
      }
      options.tls = *std::move(tls);
    }
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics = MetricsEndpoint::Start(
        options, {server->state_->metrics().registry(), server->engine_collector_});
    if (!metrics.ok()) {
      server->pump_->Stop();
      return metrics.status();
    }
    server->metrics_ = *std::move(metrics);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(Address(config.host, config.port), *credentials, &server->port_);
  // Room above the prompt cap for the rest of the message, so that an oversized prompt gets
  // our INVALID_ARGUMENT naming the field rather than gRPC's size error.
  const int64_t max_message = config.limits.max_request_bytes + (64 << 10);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(max_message, INT32_MAX)));
  SetTransportLimits(config.limits, builder);

  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->pump_->Stop();
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", Address(config.host, config.port)));
  }
  // The model is loaded and warm: ready.
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  health->SetServingStatus(true);
  // Probes may ask about the service by name as well as about the server ("").
  health->SetServingStatus(v1::Tandem::service_full_name(), true);
  return server;
}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

int GrpcServer::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  server_->GetHealthCheckService()->SetServingStatus(false);
  state_->set_draining();
  // Let in-flight requests finish; past the grace period, abort the rest (Shutdown makes Drain
  // return, and every unfinished stream ends as aborted).
  std::future<void> drained = std::async(std::launch::async, [e = engine_.get()] { e->Drain(); });
  if (drained.wait_until(deadline) != std::future_status::ready) engine_->Shutdown();
  drained.wait();
  // Give the pump time to write the last messages; clients that do not read them by then are
  // cancelled.
  const auto flush = std::max(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(
                        flush - std::chrono::steady_clock::now()));
  server_->Wait();
  pump_->Stop();
  engine_->Shutdown();
  // Last: a scrape during the drain still sees the server.
  metrics_.reset();
}

}  // namespace tandem::server
