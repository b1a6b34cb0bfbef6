#include "server/grpc/admission.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::server {

absl::Status TakeStreamSlot(ServiceState& state, int32_t n) {
  if (state.AcquireStream(n)) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("too many concurrent streams (the server's limit is ",
                   state.config().limits.max_concurrent_streams, n > 1 ? ", and each of the " : "",
                   n > 1 ? absl::StrCat(n, " choices takes one") : "", ")"));
}

absl::StatusOr<std::shared_ptr<engine::RequestStream>> SubmitForCaller(ServiceState& state,
                                                                       const std::string& caller,
                                                                       std::string* request_id,
                                                                       engine::Request request) {
  // A copy: a refused call's record still names the id it asked for.
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<SubmittedChoice> submitted,
      SubmitChoicesForCaller(state, caller, *request_id, std::move(request), 1));
  *request_id = std::move(submitted.front().request_id);
  return std::move(submitted.front().stream);
}

absl::StatusOr<std::vector<SubmittedChoice>> SubmitChoicesForCaller(ServiceState& state,
                                                                    const std::string& caller,
                                                                    std::string request_id,
                                                                    engine::Request request,
                                                                    int32_t n) {
  std::vector<SubmittedChoice> choices;
  // Gives back the slots and the ids reserved so far.
  auto refuse = [&](absl::Status status) {
    for (const SubmittedChoice& choice : choices) state.ReleaseId(caller, choice.request_id);
    state.ReleaseStream(n);
    return status;
  };
  for (int32_t i = 0; i < n; ++i) {
    std::string id = i == 0 ? std::move(request_id) : std::string();
    if (!state.ReserveId(caller, &id)) {
      return refuse(absl::AlreadyExistsError(
          absl::StrCat("request_id: '", id, "' is used by another live request of yours")));
    }
    choices.push_back({std::move(id), nullptr});
  }
  request.client_id = choices.front().request_id;
  absl::StatusOr<std::vector<std::shared_ptr<engine::RequestStream>>> streams =
      state.engine().SubmitChoices(std::move(request), n);
  if (!streams.ok()) return refuse(streams.status());
  for (int32_t i = 0; i < n; ++i) {
    choices[i].stream = std::move((*streams)[i]);
    state.BindId(caller, choices[i].request_id, choices[i].stream->id());
  }
  return choices;
}

}  // namespace tandem::server
