// One engine request of an HTTP call, admitted the way a gRPC stream is (admission.h): while it
// lives it holds one of the server's stream slots and its request id in the caller's namespace
// (so the gRPC Abort finds it too), and dropping it cancels the request if it still runs. Both
// are given back as soon as the finish event is read, before the answer's end is written, as a
// gRPC stream does: a client that sends its next request the moment it reads the answer is not
// refused for a slot still held. The connection's thread reads its events, looking every
// kPollInterval for a client that left.
#ifndef TANDEM_SERVER_OPENAI_LIVE_REQUEST_H_
#define TANDEM_SERVER_OPENAI_LIVE_REQUEST_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "server/grpc/service_state.h"

namespace tandem::server {

class LiveRequest {
 public:
  // How often a reader waiting for tokens checks whether its client is still there.
  static constexpr std::chrono::milliseconds kPollInterval{50};

  // The refusal (too many streams, a request id in use, the engine's) holds nothing.
  // The request gets a fresh request id in the caller's namespace.
  static absl::StatusOr<std::unique_ptr<LiveRequest>> Admit(ServiceState& state,
                                                            const std::string& caller,
                                                            engine::Request request);
  ~LiveRequest();
  LiveRequest(const LiveRequest&) = delete;
  LiveRequest& operator=(const LiveRequest&) = delete;

  const std::string& request_id() const { return request_id_; }

  // The next event (token events observed in the inter-token histogram); nullopt once
  // `abandoned()` holds (asked at most every kPollInterval, waiting or not).
  std::optional<engine::Event> Next(const std::function<bool()>& abandoned);
  // Cancels the request and waits for its finish event (the engine sends it at its next step),
  // so that the cancellation is counted like any finish; nullopt if it does not come within a
  // few seconds (a stopping engine).
  std::optional<engine::Event> Cancel();

 private:
  // Gives back the slot and the id (cancelling the request if it still runs); once.
  void Release();

  LiveRequest(ServiceState& state, std::string caller, std::string request_id,
              std::shared_ptr<engine::RequestStream> stream)
      : state_(state),
        caller_(std::move(caller)),
        request_id_(std::move(request_id)),
        stream_(std::move(stream)) {}

  ServiceState& state_;
  const std::string caller_;
  const std::string request_id_;
  std::shared_ptr<engine::RequestStream> stream_;
  bool released_ = false;
  double last_token_seconds_ = -1;
  std::chrono::steady_clock::time_point last_check_ = std::chrono::steady_clock::now();
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_LIVE_REQUEST_H_
