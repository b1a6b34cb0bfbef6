// One Generate or Chat call: a gRPC write reactor that forwards a request's engine events to
// the client. It holds no thread. gRPC's callbacks (write done, cancelled, done) only record
// what happened with the StreamPump; every call into gRPC (StartWrite, Finish) is made by the
// pump's thread in Advance(). That keeps one thread per concern and rules out re-entrant
// callbacks deadlocking on our locks. The engine never waits for the client: it pushes events
// into the RequestStream, and they are read here at the client's pace.
//
// A client that stops reading (its HTTP/2 window stays shut, so a write never completes) is not
// allowed to hold its stream slot and its request for ever: once a write has been pending for
// the server's write_stall_timeout, the pump cancels the call.
#ifndef TANDEM_SERVER_GRPC_GENERATE_STREAM_H_
#define TANDEM_SERVER_GRPC_GENERATE_STREAM_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request_stream.h"
#include "grpcpp/grpcpp.h"
#include "server/grpc/admission.h"
#include "server/grpc/chat_answer.h"
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

class GenerateStream : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // The request is already in the engine as `choices` (one, or SamplingParams.n of them), all
  // under the call's request id, reserved for `caller` (ChoiceIds::kOneForAll), each with a
  // stream slot acquired in `state`; the destructor gives them back. `rpc` names the method for
  // metrics and logs. `context` is the call's (valid until OnDone). `answer` (null unless a
  // Chat's reasoning or calls are read) moves them out of the answer's text; each choice reads
  // its own copy.
  GenerateStream(ServiceState& state, StreamPump& pump, grpc::CallbackServerContext* context,
                 const char* rpc, std::string caller, std::vector<SubmittedChoice> choices,
                 std::unique_ptr<ChatAnswer> answer = nullptr);
  ~GenerateStream() override;

  // Pump thread only: consumes signals, writes what the engine produced, finishes the call.
  // The stream then waits for a gRPC callback or an engine event, each of which signals the pump,
  // or for its stall deadline.
  void Advance(const StreamSignals& signals);
  // Pump thread only: when a write has been pending since this time plus the stall timeout, the
  // client is not reading; nullopt while no write is pending.
  std::optional<std::chrono::steady_clock::time_point> stall_deadline() const;

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // One choice's request and where its answer stands (pump thread only, but for `stream`).
  struct Choice {
    std::shared_ptr<engine::RequestStream> stream;
    std::unique_ptr<ChatAnswer> answer;
    std::optional<engine::Event> pending_finished;  // read while a chunk was being built
    std::optional<engine::Event> finished;          // the finish event, once converted
    int32_t last_token = -1;
    double last_token_seconds = -1;  // engine time of its latest token, for inter-token gaps
  };

  // Frees the call's id: Abort no longer finds it, and it may be reused.
  void ReleaseId();
  // Cancels the engine requests of the choices that have not finished.
  void CancelUnfinished();
  // The call's deadline has passed (or is about to): a cancellation now is the deadline's.
  bool DeadlinePassed() const;
  // Builds response_ from what choice `index` has waiting; false when it has nothing.
  bool TakeMessage(size_t index);
  // Reads the events waiting in the choice's engine stream into response_'s chunk; returns the
  // finish event if it came.
  std::optional<engine::Event> TakeEvents(Choice& choice, v1::Chunk** chunk);
  // Converts choice `index`'s finish event into response_ and settles what it means for the call.
  void Complete(size_t index, engine::Event finished);
  // Ends the call with `status` (once) and records it.
  void FinishCall(const grpc::Status& status);

  ServiceState& state_;
  StreamPump& pump_;
  grpc::CallbackServerContext* const context_;
  const char* const rpc_;
  const std::string caller_;
  const std::string peer_;        // the connection, for the reset-flood guard
  const std::string request_id_;  // the call's, all its choices'

  const std::chrono::system_clock::time_point deadline_;  // the call's, to tell it from a cancel
  std::vector<Choice> choices_;
  // Pump thread only.
  size_t next_choice_ = 0;  // the first asked for a message (round robin, so none starves)
  size_t completed_ = 0;    // choices whose finish event has been converted
  v1::GenerateResponse response_;
  grpc::ByteBuffer wire_response_;  // response_ serialized, while its write is pending
  std::chrono::steady_clock::time_point write_started_;
  bool stalled_ = false;  // cancelled by the pump because the client stopped reading
  std::atomic<bool> server_cancelled_{false};  // the same, for OnCancel on gRPC's thread
  bool write_in_flight_ = false;
  bool final_written_ = false;
  bool finish_called_ = false;
  bool cancelled_ = false;
  bool id_released_ = false;
  grpc::Status final_status_;
};

// A call refused before it reached the engine: records the refusal and finishes at once with
// the status.
class RefusedStream : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `caller` is empty when the call was refused for not proving who it is.
  RefusedStream(ServiceState& state, const char* rpc, const std::string& caller,
                const std::string& request_id, const grpc::Status& status);
  void OnDone() override { delete this; }
};

// A call its client reset before the server read it (HTTP/2 RST_STREAM right after HEADERS, the
// "rapid reset" pattern), or one from a connection the reset-flood guard blocks: finished at once
// with `status` and only counted, not logged, so that a flood of them costs as little as
// possible and cannot flood the logs either.
class AbandonedStream : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  AbandonedStream(ServiceState& state, const char* rpc, const grpc::Status& status);
  void OnDone() override { delete this; }
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_GENERATE_STREAM_H_
