#include "server/grpc/served_model.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/status_macros.h"

namespace tandem::server {

absl::StatusOr<ServedModel> ServedModel::Load(
    const std::string& dir, const models::LoadOptions& options, int32_t workers,
    const models::TensorParallelGroup::OpsFactory& make_ops) {
  ServedModel served;
  TANDEM_ASSIGN_OR_RETURN(served.model, models::LoadModel(dir, options, workers, make_ops));
  const bool has_tokenizer_file = std::filesystem::exists(dir + "/tokenizer.json") ||
                                  std::filesystem::exists(dir + "/tokenizer.model");
  if (!has_tokenizer_file) return served;
  TANDEM_ASSIGN_OR_RETURN(served.tokenizer, models::LoadTokenizer(dir));
  for (int32_t id = 0; id < served.tokenizer->vocab_size(); ++id) {
    served.longest_token_bytes =
        std::max({served.longest_token_bytes, served.tokenizer->TokenBytes(id).size(),
                  served.tokenizer->TokenToPiece(id).size()});
  }
  const std::string& source = served.tokenizer->config().chat_template;
  if (!source.empty()) {
    absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, "/tokenizer_config.json: chat_template: ", parsed.status().message()));
    }
    served.chat_template = *std::move(parsed);
  }
  return served;
}

}  // namespace tandem::server
