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

absl::StatusOr<std::vector<SubmittedChoice>> SubmitChoicesForCaller(ServiceState& state,
                                                                    const std::string& caller,
                                                                    std::string request_id,
                                                                    engine::Request request,
                                                                    int32_t n, ChoiceIds ids) {
  std::vector<std::string> reserved;
  // Gives back the slots and the ids reserved so far.
  auto refuse = [&](absl::Status status) {
    for (const std::string& id : reserved) state.ReleaseId(caller, id);
    state.ReleaseStream(n);
    return status;
  };
  const int32_t distinct = ids == ChoiceIds::kOneEach ? n : 1;
  for (int32_t i = 0; i < distinct; ++i) {
    std::string id = i == 0 ? std::move(request_id) : std::string();
    if (!state.ReserveId(caller, &id)) {
      return refuse(absl::AlreadyExistsError(
          absl::StrCat("request_id: '", id, "' is used by another live request of yours")));
    }
    reserved.push_back(std::move(id));
  }
  request.client_id = reserved.front();
  absl::StatusOr<std::vector<std::shared_ptr<engine::RequestStream>>> streams =
      state.engine().SubmitChoices(std::move(request), n);
  if (!streams.ok()) return refuse(streams.status());
  std::vector<SubmittedChoice> choices;
  for (int32_t i = 0; i < n; ++i) {
    const std::string& id = reserved[static_cast<size_t>(i % distinct)];
    choices.push_back({id, std::move((*streams)[i])});
    state.BindId(caller, id, choices.back().stream->id());
  }
  return choices;
}

}  // namespace tandem::server
