#include "server/grpc/admission.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::server {

absl::Status TakeStreamSlot(ServiceState& state) {
  if (state.AcquireStream()) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("too many concurrent streams (the server's limit is ",
                   state.config().limits.max_concurrent_streams, ")"));
}

absl::StatusOr<std::shared_ptr<engine::RequestStream>> SubmitForCaller(ServiceState& state,
                                                                       const std::string& caller,
                                                                       std::string* request_id,
                                                                       engine::Request request) {
  if (!state.ReserveId(caller, request_id)) {
    state.ReleaseStream();
    return absl::AlreadyExistsError(
        absl::StrCat("request_id: '", *request_id, "' is used by another live request of yours"));
  }
  request.client_id = *request_id;
  absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream =
      state.engine().Submit(std::move(request));
  if (!stream.ok()) {
    state.ReleaseId(caller, *request_id);
    state.ReleaseStream();
    return stream.status();
  }
  state.BindId(caller, *request_id, (*stream)->id());
  return stream;
}

}  // namespace tandem::server
