// The whole server: the engine over a loaded model, tandem.v1.Tandem, grpc.health.v1 and server
// reflection (so grpcurl works without the .proto files) on one listening port (TLS when
// configured), and Prometheus metrics on a port of their own.
//
// Lifecycle: Start() creates the engine, warms it up with a one-token request, then listens with
// health SERVING. Shutdown(grace) sets health NOT_SERVING, refuses new streams with UNAVAILABLE,
// lets in-flight requests finish for up to `grace` (then aborts what is left: those streams end
// with finish_reason ABORTED), and stops the server, the pump and the engine.
#ifndef TANDEM_SERVER_GRPC_GRPC_SERVER_H_
#define TANDEM_SERVER_GRPC_GRPC_SERVER_H_

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/heap_trim.h"
#include "server/grpc/served_model.h"
#include "server/grpc/server_config.h"

namespace grpc {
class Server;
}

namespace tandem::server {

class EngineCollector;
class MetricsEndpoint;
class ServiceState;
class StreamPump;
class TandemService;

class GrpcServer {
 public:
  // `model` must outlive the server.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const ServedModel& model,
                                                           const ServerConfig& config);
  ~GrpcServer();  // Shutdown(0) if not done yet

  // The port bound (the one asked for, or the one the system picked for port 0).
  int port() const { return port_; }
  // The metrics endpoint's port; 0 when metrics are disabled.
  int metrics_port() const;
  void Shutdown(std::chrono::milliseconds grace);
  engine::Engine& engine() { return *engine_; }
  // What the service's calls share, for endpoints beside gRPC that serve the same requests (the
  // OpenAI API: server/openai). They must be destroyed before the server, after its Shutdown.
  ServiceState& state() { return *state_; }

 private:
  GrpcServer() = default;

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<ServiceState> state_;
  std::unique_ptr<StreamPump> pump_;
  std::unique_ptr<TandemService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<EngineCollector> engine_collector_;
  std::unique_ptr<MetricsEndpoint> metrics_;
  std::unique_ptr<engine::PeriodicHeapTrimmer> heap_trimmer_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_GRPC_SERVER_H_
