#include "server/grpc/generate_stream.h"

#include <chrono>
#include <utility>

#include "server/grpc/call_record.h"
#include "server/grpc/event_conversion.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/stream_pump.h"
#include "server/grpc/wire_messages.h"

namespace tandem::server {

GenerateStream::GenerateStream(ServiceState& state, StreamPump& pump,
                               grpc::CallbackServerContext* context, const char* rpc,
                               std::string caller, std::string request_id,
                               std::shared_ptr<engine::RequestStream> stream,
                               std::unique_ptr<ChatToolCalls> tool_calls)
    : state_(state),
      pump_(pump),
      context_(context),
      rpc_(rpc),
      caller_(std::move(caller)),
      peer_(context->peer()),
      request_id_(std::move(request_id)),
      deadline_(context->deadline()),
      stream_(std::move(stream)),
      tool_calls_(std::move(tool_calls)) {
  // Wakes the pump when the engine produces something for this stream (a pump that does not
  // know this stream yet ignores it, and its first Advance reads what is waiting).
  stream_->SetPushListener([this] { pump_.Signal(this, {}); });
}

GenerateStream::~GenerateStream() {
  // First, so that the engine's pushes (including the Cancel's below) no longer reach the pump.
  stream_->SetPushListener(nullptr);
  // A stream torn down before its request finished (client gone, server stopping) must not
  // leave the request holding engine memory.
  if (!stream_->finished()) state_.engine().Cancel(stream_->id());
  ReleaseId();
  if (!finish_called_) state_.ReleaseStream();
}

void GenerateStream::ReleaseId() {
  if (id_released_) return;
  id_released_ = true;
  state_.ReleaseId(caller_, request_id_);
}

std::optional<std::chrono::steady_clock::time_point> GenerateStream::stall_deadline() const {
  if (!write_in_flight_ || finish_called_ || stalled_) return std::nullopt;
  return write_started_ + state_.config().limits.write_stall_timeout;
}

void GenerateStream::OnWriteDone(bool ok) {
  pump_.Signal(this, {.write_done = true, .write_ok = ok});
}

void GenerateStream::OnCancel() {
  // Free the request's memory now rather than when the pump gets round to it.
  state_.engine().Cancel(stream_->id());
  // Counted here, on gRPC's thread, rather than when the pump finishes the call: under a reset
  // flood the pump lags behind, and the guard must see the flood as it happens.
  if (!server_cancelled_.load() && !DeadlinePassed()) state_.reset_guard().RecordClientReset(peer_);
  pump_.Signal(this, {.cancelled = true});
}

bool GenerateStream::DeadlinePassed() const {
  // The client's library cancels the call when its own deadline passes, and that cancellation
  // may reach us a little before our copy of the deadline (sent as a rounded timeout, counted
  // from arrival) has passed: a cancellation that close to the deadline is the deadline.
  constexpr auto kDeadlineSlack = std::chrono::milliseconds(250);
  return std::chrono::system_clock::now() + kDeadlineSlack >= deadline_;
}

void GenerateStream::OnDone() { pump_.Signal(this, {.done = true}); }

void GenerateStream::Advance(const StreamSignals& signals) {
  if (signals.write_done) {
    write_in_flight_ = false;
    if (!signals.write_ok) cancelled_ = true;  // the client is gone
  }
  if (signals.cancelled) cancelled_ = true;
  if (write_in_flight_ && !stalled_ && !finish_called_ &&
      std::chrono::steady_clock::now() >= *stall_deadline()) {
    // The client has read nothing for the whole stall timeout: its window is shut and the write
    // can never complete. Cancelling the call (RST_STREAM) fails the write, whose OnWriteDone
    // brings us back here to finish; the request stops now.
    stalled_ = true;
    server_cancelled_ = true;
    state_.metrics().CountStreamStall();
    cancelled_ = true;
    state_.engine().Cancel(stream_->id());
    context_->TryCancel();
  }
  if (finish_called_ || write_in_flight_) return;
  if (cancelled_) {
    state_.engine().Cancel(stream_->id());
    ReleaseId();
    // The client sees DEADLINE_EXCEEDED from its own library; record it as such too.
    const bool expired = DeadlinePassed();
    if (stalled_) {
      FinishCall(grpc::Status(grpc::StatusCode::CANCELLED,
                              "the client read nothing for the server's write stall timeout"));
    } else if (expired) {
      FinishCall(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded"));
    } else {
      FinishCall(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
    }
    return;
  }
  if (final_written_) {
    FinishCall(final_status_);
    return;
  }

  response_.Clear();
  response_.set_request_id(request_id_);
  std::optional<engine::Event> finished = std::move(pending_finished_);
  pending_finished_.reset();
  if (!finished) {
    v1::Chunk* chunk = nullptr;
    finished = TakeEvents(&chunk);
    if (chunk != nullptr && finished) {
      pending_finished_ = std::move(finished);  // the chunk goes first
      finished.reset();
    }
    if (chunk == nullptr && !finished) return;
  }
  if (finished) {
    ReleaseId();  // the request is over: Abort no longer finds it, the id may be reused
    final_status_ = ToGrpcStatus(FinishedResponse(*finished, last_token_, &response_));
    if (tool_calls_ != nullptr && response_.has_complete()) {
      tool_calls_->Finish(response_.mutable_complete());
    }
    final_written_ = true;
    finished_ = std::move(finished);
  }
  if (absl::Status s = SerializeWireMessage(response_, &wire_response_); !s.ok()) {
    state_.engine().Cancel(stream_->id());
    FinishCall(ToGrpcStatus(s));
    return;
  }
  write_in_flight_ = true;
  write_started_ = std::chrono::steady_clock::now();
  StartWrite(&wire_response_);
}

std::optional<engine::Event> GenerateStream::TakeEvents(v1::Chunk** chunk) {
  engine::Event event;
  bool timed_out = false;
  while (stream_->NextFor(std::chrono::milliseconds(0), &event, &timed_out)) {
    if (event.kind == engine::Event::Kind::kFinished) {
      // A request that scored its prompt and generated nothing: the scores go first, in a chunk.
      if (!event.prompt_logprobs.empty()) {
        if (*chunk == nullptr) *chunk = response_.mutable_chunk();
        AppendPromptLogprobs(event, *chunk);
      }
      return event;
    }
    if (*chunk == nullptr) *chunk = response_.mutable_chunk();
    AppendTokens(event, *chunk, /*with_text=*/tool_calls_ == nullptr);
    if (tool_calls_ != nullptr) tool_calls_->AddText(event.text, *chunk);
    if (event.tokens.empty()) continue;
    last_token_ = event.tokens.back();
    state_.metrics().ObserveTokenGaps(event, &last_token_seconds_);
  }
  return std::nullopt;
}

void GenerateStream::FinishCall(const grpc::Status& status) {
  finish_called_ = true;
  RecordServedCall(state_, rpc_, caller_, request_id_, status,
                   finished_ ? std::span<const engine::Event>(&*finished_, 1)
                             : std::span<const engine::Event>());
  // The slot is free once the call's outcome is decided: a client that opens a new stream as
  // soon as it reads this status must find it free (gRPC's OnDone and this object's deletion
  // come later).
  state_.ReleaseStream();
  Finish(status);
}

RefusedStream::RefusedStream(ServiceState& state, const char* rpc, const std::string& caller,
                             const std::string& request_id, const grpc::Status& status) {
  RecordRefusedCall(state, rpc, caller, request_id, status);
  Finish(status);
}

AbandonedStream::AbandonedStream(ServiceState& state, const char* rpc, const grpc::Status& status) {
  RecordAbandonedCall(state, rpc, status);
  Finish(status);
}

}  // namespace tandem::server
