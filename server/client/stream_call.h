// One Generate or Chat call, run on a thread of its own with gRPC's synchronous API, so that a
// load generator can keep hundreds of streams in flight while its own thread only waits for
// their ends. The Connection owns the threads and joins them when it is destroyed.
//
// Why not gRPC's callback API: with Debian's gRPC 1.51 its client side frees a completion queue
// twice now and then (ASan, about one run in two of the 256-stream soak test and of
// client_test), inside gRPC's own threads, whatever the reactor does.
#ifndef TANDEM_SERVER_CLIENT_STREAM_CALL_H_
#define TANDEM_SERVER_CLIENT_STREAM_CALL_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "server/client/connection.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client {

class StreamCall {
 public:
  // Both run on the call's thread, in order, and should not block for long.
  struct Handlers {
    // Each streamed message, in order.
    std::function<void(const v1::GenerateResponse&)> on_response;
    // Once, last, with the call's final status.
    std::function<void(const grpc::Status&)> on_done;
  };

  // Headers sent with the call besides the connection's own (e.g. a session key that a proxy
  // routes by). Names must be lowercase gRPC metadata keys.
  using Metadata = std::vector<std::pair<std::string, std::string>>;

  // Start a call on a new thread; `connection` must outlive it (its destructor waits for it).
  // `timeout` bounds the whole call.
  static void StartGenerate(const Connection& connection, v1::GenerateRequest request,
                            std::optional<std::chrono::milliseconds> timeout, Handlers handlers,
                            Metadata metadata = {});
  static void StartChat(const Connection& connection, v1::ChatRequest request,
                        std::optional<std::chrono::milliseconds> timeout, Handlers handlers,
                        Metadata metadata = {});
};

}  // namespace tandem::client

#endif  // TANDEM_SERVER_CLIENT_STREAM_CALL_H_
