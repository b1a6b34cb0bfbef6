// One engine request of an HTTP call, admitted the way a gRPC stream is (admission.h): while it
// lives it holds one of the server's stream slots and its request id in the caller's namespace
// (so the gRPC Abort finds it too), and dropping it cancels the request if it still runs. Both
// are given back as soon as the finish event is read, before the answer's end is written, as a
// gRPC stream does: a client that sends its next request the moment it reads the answer is not
// refused for a slot still held. The connection's thread reads its events (choice_streams.h).
#ifndef TANDEM_SERVER_OPENAI_LIVE_REQUEST_H_
#define TANDEM_SERVER_OPENAI_LIVE_REQUEST_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "server/grpc/service_state.h"

namespace tandem::server {

class LiveRequest {
 public:
  // `n` choices of each of `requests` (engine::Engine::SubmitChoices), each with a stream slot and
  // a fresh request id in the caller's namespace: request 0's choices in order, then request
  // 1's, and so on. All are admitted or none: the refusal (too many streams, the engine's) holds
  // nothing, the requests already submitted cancelled.
  static absl::StatusOr<std::vector<std::unique_ptr<LiveRequest>>> AdmitChoices(
      ServiceState& state, const std::string& caller, std::vector<engine::Request> requests,
      int32_t n);
  ~LiveRequest();
  LiveRequest(const LiveRequest&) = delete;
  LiveRequest& operator=(const LiveRequest&) = delete;

  const std::string& request_id() const { return request_id_; }

  // The next event if one has come, without waiting (token events observed in the inter-token
  // histogram; the finish event gives back the slot and the id).
  std::optional<engine::Event> TryNext();
  // Runs `listener` after every event the engine pushes (RequestStream::SetPushListener: quick,
  // under the stream's lock); nullptr removes it.
  void SetPushListener(std::function<void()> listener) {
    stream_->SetPushListener(std::move(listener));
  }
  // Cancelling, in two halves so that many requests can be cancelled at once: SendCancel asks
  // the engine to cancel the request; AwaitFinish waits for its finish event (the engine sends
  // it at its next step), so that the cancellation is counted like any finish, until
  // `give_up` (a stopping engine may send none: nullopt).
  void SendCancel();
  std::optional<engine::Event> AwaitFinish(std::chrono::steady_clock::time_point give_up);

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
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_OPENAI_LIVE_REQUEST_H_
