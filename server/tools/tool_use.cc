#include "server/tools/tool_use.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::server {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Whether a well-formed tool of the list is the function `name` (ill-formed ones are named by
// the forced grammar, which reads every tool).
bool HasFunction(const nlohmann::ordered_json& tools, const std::string& name) {
  for (const nlohmann::ordered_json& tool : tools) {
    if (!tool.is_object()) continue;
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) continue;
    auto n = function->find("name");
    if (n != function->end() && *n == name) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ToolUse> ResolveToolUse(ToolChoice choice, const std::string& function,
                                       const std::string& function_field, bool parallel,
                                       nlohmann::ordered_json tools, ToolCallFormat format) {
  ToolUse use;
  use.parallel = parallel;
  const bool has_tools = tools.is_array() && !tools.empty();
  if (choice == ToolChoice::kNone || (choice == ToolChoice::kAuto && !has_tools)) return use;
  if (!has_tools) return Invalid("tool_choice", "needs tools to choose from");
  if (format == ToolCallFormat::kNone) {
    // Without a format the calls cannot be found in the text; "auto" still lets the model see
    // the tools and answer in text.
    if (choice == ToolChoice::kAuto) return use;
    return Invalid("tool_choice",
                   "this model's chat template shows no tool-call format tandem knows; start the "
                   "server with --tool-call-format");
  }
  if (choice == ToolChoice::kFunction) {
    if (function.empty()) return Invalid(function_field, "required");
    if (!HasFunction(tools, function)) {
      return Invalid(function_field,
                     absl::StrCat("'", function, "' is not one of the request's tools"));
    }
    use.only = function;
  }
  use.parse = true;
  use.forced = choice != ToolChoice::kAuto;
  use.tools = std::move(tools);
  return use;
}

}  // namespace tandem::server
