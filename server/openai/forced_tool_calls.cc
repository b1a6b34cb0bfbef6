#include "server/openai/forced_tool_calls.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/json_schema_grammar.h"

namespace tandem::server {
namespace {

using ordered = nlohmann::ordered_json;

absl::Status Invalid(const std::string& field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// A schema moved to `pointer` inside another: its local references ("#/$defs/X") are rewritten
// to point where their targets now are. Values (const, enum, default, examples) are data, not
// schemas, and are left as they are.
void MoveReferences(ordered& schema, const std::string& pointer) {
  if (schema.is_object()) {
    for (auto& [key, value] : schema.items()) {
      if (key == "const" || key == "enum" || key == "default" || key == "examples") continue;
      if (key == "$ref" && value.is_string() && absl::StartsWith(value.get<std::string>(), "#")) {
        value = absl::StrCat("#", pointer, value.get<std::string>().substr(1));
      } else {
        MoveReferences(value, pointer);
      }
    }
  } else if (schema.is_array()) {
    for (ordered& element : schema) MoveReferences(element, pointer);
  }
}

}  // namespace

absl::StatusOr<engine::Grammar> ForcedToolCallGrammar(ToolCallFormat format, const ordered& tools,
                                                      const std::string& only, bool parallel) {
  if (format == ToolCallFormat::kNone || format == ToolCallFormat::kXmlFunction) {
    return Invalid(
        "tool_choice",
        absl::StrCat("\"required\" and named functions need a JSON tool-call format; "
                     "this model's is '",
                     std::string(ToolCallFormatName(format)), "' (see --tool-call-format)"));
  }
  if (!tools.is_array() || tools.empty()) return Invalid("tools", "required by this tool_choice");
  const bool array = format != ToolCallFormat::kHermes;  // one JSON list of calls
  // Where the calls' schemas sit in the whole schema.
  const std::string calls_at = array ? "/items/anyOf/" : "/anyOf/";
  ordered calls = ordered::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string field = absl::StrCat("tools[", i, "]");
    const ordered& tool = tools[i];
    // Compared, never converted: a client's "type": 1 must not throw.
    if (!tool.is_object() || !tool.contains("type") || tool["type"] != "function" ||
        !tool.contains("function") || !tool["function"].is_object()) {
      return Invalid(field, "must be {\"type\": \"function\", \"function\": {...}}");
    }
    const ordered& function = tool["function"];
    if (!function.contains("name") || !function["name"].is_string()) {
      return Invalid(field + ".function.name", "required, a string");
    }
    const std::string name = function["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    // No parameters: OpenAI's "takes no arguments", so only {}.
    ordered parameters = {{"type", "object"}, {"properties", ordered::object()}};
    if (auto p = function.find("parameters"); p != function.end() && !p->is_null()) {
      const std::string where = field + ".function.parameters";
      if (*p == true) {
        parameters = {{"type", "object"}};
      } else if (!p->is_object()) {
        return Invalid(where, "must be a JSON Schema object");
      } else {
        parameters = *p;
        // Arguments are an object (what the calls' parser takes); {} means any object.
        if (!parameters.contains("type")) parameters["type"] = "object";
        if (parameters["type"] != "object") {
          return Invalid(where, "must describe an object (\"type\": \"object\")");
        }
        // Once embedded it is no longer the root: its own $id and $schema would mislead.
        parameters.erase("$id");
        parameters.erase("$schema");
      }
      // Checked alone first, so that a refusal names the tool and the place in its own schema.
      if (absl::Status s = engine::JsonSchemaGrammar(parameters.dump()).status(); !s.ok()) {
        return Invalid(where, s.message());
      }
    }
    MoveReferences(parameters, absl::StrCat(calls_at, calls.size(), "/properties/arguments"));
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", name}}}, {"arguments", parameters}}},
                     {"required", {"name", "arguments"}}});
  }
  if (calls.empty()) {
    return Invalid("tool_choice.function.name",
                   absl::StrCat("'", only, "' is not one of the request's tools"));
  }
  ordered schema = {{"anyOf", std::move(calls)}};
  engine::JsonFrame frame;
  const ToolCallMarkers markers = MarkersOf(format);
  if (array) {
    schema = {{"type", "array"}, {"items", std::move(schema)}, {"minItems", 1}};
    if (!parallel) schema["maxItems"] = 1;
    frame.before = markers.start;
    frame.after = markers.end;
  } else {
    frame.open = std::string(markers.start) + "\n";
    frame.close = "\n" + std::string(markers.end);
    frame.separator = "\n";
    frame.max_count = parallel ? -1 : 1;
  }
  absl::StatusOr<engine::Grammar> grammar = engine::FramedJsonSchemaGrammar(schema.dump(), frame);
  if (!grammar.ok()) return Invalid("tools", grammar.status().message());
  return grammar;
}

std::string ForcedToolCallKey(ToolCallFormat format, const ordered& tools, const std::string& only,
                              bool parallel) {
  return absl::StrCat("tools\n", std::string(ToolCallFormatName(format)), "\n", only, "\n",
                      parallel ? "parallel" : "one", "\n", tools.dump());
}

}  // namespace tandem::server
