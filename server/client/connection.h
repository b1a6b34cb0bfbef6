// A client's connection to one tandem server: the channel (TLS or plaintext), the stub, and the
// per-call setup every call needs. Thread-safe; share one Connection among all calls.
//
// The bearer token travels differently by channel: on a TLS channel as call credentials, which
// gRPC attaches to every call (and would never send over plaintext); on a plaintext channel gRPC
// refuses call credentials, so Prepare() adds the `authorization` header to each ClientContext.
// Either way the server sees the same header. Every call made through this class must therefore
// use a context set up by Prepare() or NewContext().
#ifndef TANDEM_SERVER_CLIENT_CONNECTION_H_
#define TANDEM_SERVER_CLIENT_CONNECTION_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/client/client_security.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client {

class Connection {
 public:
  // Creates the channel; it connects at the first call. Fails when the CA file cannot be read.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const std::string& address,
                                                          const ClientSecurity& security);

  const std::string& address() const { return address_; }
  bool tls() const { return tls_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  v1::Tandem::Stub& stub() const { return *stub_; }

  // Sets `context` up for one call: the token where the channel does not carry it, and a
  // deadline `timeout` from now when given.
  void Prepare(grpc::ClientContext& context,
               std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;
  // A fresh context, prepared.
  std::unique_ptr<grpc::ClientContext> NewContext(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;

  // Runs `body` on a thread of its own (StreamCall's calls). Threads that have finished are
  // joined on the next Spawn; the destructor joins the rest.
  void Spawn(std::function<void()> body) const;
  ~Connection();

 private:
  Connection() = default;

  std::string address_;
  bool tls_ = false;
  std::string per_call_authorization_;  // "Bearer <token>" on plaintext channels, else empty
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tandem::Stub> stub_;

  struct CallThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  mutable std::mutex threads_mu_;
  mutable std::vector<CallThread> threads_;
};

}  // namespace tandem::client

#endif  // TANDEM_SERVER_CLIENT_CONNECTION_H_
