#include "server/grpc/generate_stream.h"

#include <chrono>
#include <utility>
#include <vector>

#include "server/grpc/call_record.h"
#include "server/grpc/event_conversion.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/stream_pump.h"
#include "server/grpc/wire_messages.h"

namespace tandem::server {

GenerateStream::GenerateStream(ServiceState& state, StreamPump& pump,
                               grpc::CallbackServerContext* context, const char* rpc,
                               std::string caller, std::vector<SubmittedChoice> choices,
                               std::unique_ptr<ChatAnswer> answer)
    : state_(state),
      pump_(pump),
      context_(context),
      rpc_(rpc),
      caller_(std::move(caller)),
      peer_(context->peer()),
      request_id_(choices.front().request_id),
      deadline_(context->deadline()) {
  choices_.reserve(choices.size());
  for (SubmittedChoice& submitted : choices) {
    Choice& choice = choices_.emplace_back();
    choice.stream = std::move(submitted.stream);
    // Each choice parses its own answer: a fresh copy, the last one the original.
    if (answer != nullptr) {
      choice.answer = choices_.size() < choices.size() ? std::make_unique<ChatAnswer>(*answer)
                                                       : std::move(answer);
    }
    // Wakes the pump when the engine produces something for this choice (a pump that does not
    // know this stream yet ignores it, and its first Advance reads what is waiting).
    choice.stream->SetPushListener([this] { pump_.Signal(this, {}); });
  }
}

GenerateStream::~GenerateStream() {
  // First, so that the engine's pushes (including the Cancels below) no longer reach the pump.
  for (Choice& choice : choices_) choice.stream->SetPushListener(nullptr);
  // A stream torn down before its requests finished (client gone, server stopping) must not
  // leave them holding engine memory.
  CancelUnfinished();
  ReleaseId();
  if (!finish_called_) state_.ReleaseStream(static_cast<int64_t>(choices_.size()));
}

void GenerateStream::ReleaseId() {
  if (id_released_) return;
  id_released_ = true;
  state_.ReleaseId(caller_, request_id_);
}

void GenerateStream::CancelUnfinished() {
  for (const Choice& choice : choices_) {
    if (!choice.stream->finished()) state_.engine().Cancel(choice.stream->id());
  }
}

std::optional<std::chrono::steady_clock::time_point> GenerateStream::stall_deadline() const {
  if (!write_in_flight_ || finish_called_ || stalled_) return std::nullopt;
  return write_started_ + state_.config().limits.write_stall_timeout;
}

void GenerateStream::OnWriteDone(bool ok) {
  pump_.Signal(this, {.write_done = true, .write_ok = ok});
}

void GenerateStream::OnCancel() {
  // Free the requests' memory now rather than when the pump gets round to it.
  CancelUnfinished();
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
    CancelUnfinished();
    context_->TryCancel();
  }
  if (finish_called_ || write_in_flight_) return;
  if (cancelled_) {
    CancelUnfinished();
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

  // The next message: from the first choice after the one last written that has one.
  for (size_t k = 0; k < choices_.size(); ++k) {
    const size_t index = (next_choice_ + k) % choices_.size();
    if (choices_[index].finished || !TakeMessage(index)) continue;
    next_choice_ = index + 1;
    if (absl::Status s = SerializeWireMessage(response_, &wire_response_); !s.ok()) {
      FinishCall(ToGrpcStatus(s));
      return;
    }
    write_in_flight_ = true;
    write_started_ = std::chrono::steady_clock::now();
    StartWrite(&wire_response_);
    return;
  }
}

bool GenerateStream::TakeMessage(size_t index) {
  Choice& choice = choices_[index];
  response_.Clear();
  response_.set_request_id(request_id_);
  if (choices_.size() > 1) response_.set_index(static_cast<int32_t>(index));
  std::optional<engine::Event> finished = std::move(choice.pending_finished);
  choice.pending_finished.reset();
  if (!finished) {
    v1::Chunk* chunk = nullptr;
    finished = TakeEvents(choice, &chunk);
    if (chunk != nullptr && finished) {
      choice.pending_finished = std::move(finished);  // the chunk goes first
      finished.reset();
    }
    if (chunk == nullptr && !finished) return false;
  }
  if (finished) Complete(index, *std::move(finished));
  return true;
}

void GenerateStream::Complete(size_t index, engine::Event finished) {
  Choice& choice = choices_[index];
  const grpc::Status status =
      ToGrpcStatus(FinishedResponse(finished, choice.last_token, &response_));
  if (choice.answer != nullptr && response_.has_complete()) {
    choice.answer->Finish(response_.mutable_complete());
  }
  choice.finished = std::move(finished);
  ++completed_;
  if (!status.ok()) {
    // An error ends the call, whichever choice it came from.
    ReleaseId();
    final_status_ = status;
    final_written_ = true;
    return;
  }
  if (completed_ == choices_.size()) {
    ReleaseId();  // the request is over: Abort no longer finds it, the id may be reused
    final_status_ = grpc::Status::OK;
    final_written_ = true;
  }
}

std::optional<engine::Event> GenerateStream::TakeEvents(Choice& choice, v1::Chunk** chunk) {
  engine::Event event;
  bool timed_out = false;
  while (choice.stream->NextFor(std::chrono::milliseconds(0), &event, &timed_out)) {
    if (event.kind == engine::Event::Kind::kFinished) {
      // A request that scored its prompt and generated nothing: the scores go first, in a chunk.
      if (!event.prompt_logprobs.empty()) {
        if (*chunk == nullptr) *chunk = response_.mutable_chunk();
        AppendPromptLogprobs(event, *chunk);
      }
      return event;
    }
    if (*chunk == nullptr) *chunk = response_.mutable_chunk();
    AppendTokens(event, *chunk, /*with_text=*/choice.answer == nullptr);
    if (choice.answer != nullptr) choice.answer->AddText(event.text, *chunk);
    if (event.tokens.empty()) continue;
    choice.last_token = event.tokens.back();
    state_.metrics().ObserveTokenGaps(event, &choice.last_token_seconds);
  }
  return std::nullopt;
}

void GenerateStream::FinishCall(const grpc::Status& status) {
  finish_called_ = true;
  // An error or a failed write ends the call with choices still running.
  CancelUnfinished();
  ReleaseId();
  // The choices' finish events, in choice order, for the usage and the log (moved: the call is
  // over).
  std::vector<engine::Event> finished;
  for (Choice& choice : choices_) {
    if (choice.finished) finished.push_back(*std::move(choice.finished));
  }
  RecordServedCall(state_, rpc_, caller_, request_id_, status, finished);
  // The slots are free once the call's outcome is decided: a client that opens a new stream as
  // soon as it reads this status must find them free (gRPC's OnDone and this object's deletion
  // come later).
  state_.ReleaseStream(static_cast<int64_t>(choices_.size()));
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
