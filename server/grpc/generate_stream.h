// One Generate or Chat call: a gRPC write reactor that forwards a request's engine events to
// the client. It holds no thread. gRPC's callbacks (write done, cancelled, done) only record
// what happened with the StreamPump; every call into gRPC (StartWrite, Finish) is made by the
// pump's thread in Advance(). That keeps one thread per concern and rules out re-entrant
// callbacks deadlocking on our locks. The engine never waits for the client: it pushes events
// into the RequestStream, and they are read here at the client's pace.
#ifndef TANDEM_SERVER_GRPC_GENERATE_STREAM_H_
#define TANDEM_SERVER_GRPC_GENERATE_STREAM_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "engine/request_stream.h"
#include "grpcpp/grpcpp.h"
#include "server/grpc/service_state.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::server {

class StreamPump;

// What happened to a stream since the pump last looked (recorded by gRPC's threads).
struct StreamSignals {
  bool write_done = false;
  bool write_ok = true;
  bool cancelled = false;
  bool done = false;
};

class GenerateStream : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // The request is already in the engine as `stream`, with `request_id` reserved and one
  // stream slot acquired in `state`; the destructor gives both back. `rpc` names the method
  // for metrics and logs; `deadline` is the call's (to tell a deadline from a cancellation).
  GenerateStream(ServiceState& state, StreamPump& pump, const char* rpc, std::string request_id,
                 std::chrono::system_clock::time_point deadline,
                 std::shared_ptr<engine::RequestStream> stream);
  ~GenerateStream() override;

  // Pump thread only: consumes signals, writes what the engine produced, finishes the call.
  // The stream then waits for a gRPC callback or an engine event, each of which signals the pump.
  void Advance(const StreamSignals& signals);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void ReleaseId();
  // Reads the events waiting in the engine's stream into response_'s chunk; returns the finish
  // event if it came.
  std::optional<engine::Event> TakeEvents(v1::Chunk** chunk);
  // Ends the call with `status` (once) and records it.
  void FinishCall(const grpc::Status& status);

  ServiceState& state_;
  StreamPump& pump_;
  const char* const rpc_;
  const std::string request_id_;
  const std::chrono::system_clock::time_point deadline_;
  std::shared_ptr<engine::RequestStream> stream_;
  // Pump thread only.
  v1::GenerateResponse response_;
  std::optional<engine::Event> pending_finished_;  // read while a chunk was being built
  std::optional<engine::Event> finished_;  // the finish event, once converted
  int32_t last_token_ = -1;
  double last_token_seconds_ = -1;  // engine time of the latest token, for inter-token gaps
  bool write_in_flight_ = false;
  bool final_written_ = false;
  bool finish_called_ = false;
  bool cancelled_ = false;
  bool id_released_ = false;
  grpc::Status final_status_;
};

// A call refused before it reached the engine: records the refusal and finishes at once with
// the status.
class RefusedStream : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  RefusedStream(ServiceState& state, const char* rpc, const std::string& request_id,
                const grpc::Status& status);
  void OnDone() override { delete this; }
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_GENERATE_STREAM_H_
