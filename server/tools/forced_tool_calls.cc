#include "server/tools/forced_tool_calls.h"

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
// to point where their targets now are. Keywords whose values are data (const, enum, default,
// examples) are left as they are; in maps from names to schemas (properties, $defs) every value
// is a schema, whatever its name.
void MoveReferences(ordered& schema, const std::string& pointer) {
  if (schema.is_array()) {  // anyOf, oneOf, allOf, prefixItems: schemas
    for (ordered& element : schema) MoveReferences(element, pointer);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key == "const" || key == "enum" || key == "default" || key == "examples") continue;
    if (key == "$ref" && value.is_string() && absl::StartsWith(value.get<std::string>(), "#")) {
      value = absl::StrCat("#", pointer, value.get<std::string>().substr(1));
    } else if ((key == "properties" || key == "$defs" || key == "definitions" ||
                key == "patternProperties" || key == "dependentSchemas") &&
               value.is_object()) {
      for (auto& [name, subschema] : value.items()) MoveReferences(subschema, pointer);
    } else {
      MoveReferences(value, pointer);
    }
  }
}

// Whether the schema says what its value is by other means than `type` (a reference, a union,
// a list of values), beside which `type` is not accepted.
bool TypedOtherwise(const ordered& schema) {
  for (const char* key : {"$ref", "anyOf", "oneOf", "allOf", "enum", "const"}) {
    if (schema.contains(key)) return true;
  }
  return false;
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
        if (!parameters.contains("type") && !TypedOtherwise(parameters)) {
          parameters["type"] = "object";
        }
        if (parameters.contains("type") && parameters["type"].is_string() &&
            parameters["type"] != "object") {
          return Invalid(where, "must describe an object (\"type\": \"object\")");
        }
        // Once embedded it is no longer the root: its own $id and $schema would mislead.
        parameters.erase("$id");
        parameters.erase("$schema");
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
  if (grammar.ok()) return grammar;
  // Which tool: each one's parameters compiled alone name it and the place in its own schema
  // (only now, so that a good request compiles once). Not when they were only too many together:
  // each may fit alone, and compiling them all again would cost their sum once more.
  const std::string why(grammar.status().message());
  const bool too_large = why.find(engine::GrammarBuilder::kOverBudget) != std::string::npos;
  for (size_t i = 0; i < tools.size() && !too_large; ++i) {
    const ordered& function = tools[i]["function"];
    if (!only.empty() && function["name"] != only) continue;
    auto p = function.find("parameters");
    if (p == function.end() || !p->is_object()) continue;
    if (absl::Status s = engine::JsonSchemaGrammar(p->dump()).status(); !s.ok()) {
      return Invalid(absl::StrCat("tools[", i, "].function.parameters"), s.message());
    }
  }
  return Invalid("tools", grammar.status().message());
}

std::string ForcedToolCallKey(ToolCallFormat format, const ordered& tools, const std::string& only,
                              bool parallel) {
  return absl::StrCat("tools\n", std::string(ToolCallFormatName(format)), "\n", only, "\n",
                      parallel ? "parallel" : "one", "\n", tools.dump());
}

}  // namespace tandem::server
