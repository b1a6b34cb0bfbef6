#include "server/http/http_response_writer.h"

#include <utility>

namespace tandem::server {

absl::Status HttpResponseWriter::Send(HttpResponse response) {
  if (started_) return absl::FailedPreconditionError("the response was already started");
  started_ = true;
  response.head_only = head_only_;
  response.keep_alive = keep_alive_;
  absl::Status status = Write(response.Serialize());
  reusable_ = keep_alive_ && status.ok();
  return status;
}

absl::Status HttpResponseWriter::StartStream(HttpResponse head) {
  if (started_) return absl::FailedPreconditionError("the response was already started");
  started_ = true;
  head.close_delimited = true;
  return Write(head.SerializeHead());
}

absl::Status HttpResponseWriter::Write(absl::string_view data) {
  return connection_.Write(data, std::chrono::steady_clock::now() + write_timeout_);
}

}  // namespace tandem::server
