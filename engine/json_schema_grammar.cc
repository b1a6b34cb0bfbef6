#include "engine/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/json_number_range.h"
#include "engine/json_number_texts.h"
#include "engine/json_string_format.h"
#include "engine/json_string_pattern.h"
#include "models/json_depth.h"
#include "models/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem::engine {
namespace {

using json = nlohmann::ordered_json;
using B = GrammarBuilder;

constexpr int32_t kMaxIndent = 20;  // spaces or tabs after a newline

// Keywords that only describe: they change nothing the output may be.
const std::set<std::string>& Annotations() {
  static const auto* const kSet = new std::set<std::string>{
      "title",   "description", "default", "examples",  "$schema",   "$id",
      "$comment", "deprecated", "readOnly", "writeOnly", "$defs",    "definitions"};
  return *kSet;
}

// Keywords that constrain and are enforced.
const std::set<std::string>& Enforced() {
  static const auto* const kSet =
      new std::set<std::string>{// any value
                                "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
                                // strings
                                "minLength", "maxLength", "format", "pattern",
                                // numbers
                                "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                // arrays
                                "items", "minItems", "maxItems", "prefixItems", "additionalItems",
                                // objects
                                "properties", "required", "additionalProperties"};
  return *kSet;
}

const std::vector<std::string>& TypeNames() {
  static const auto* const kNames = new std::vector<std::string>{
      "null", "boolean", "integer", "number", "string", "array", "object"};
  return *kNames;
}

std::string Where(const std::string& path) { return path.empty() ? "#" : "#" + path; }

absl::Status Refuse(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("json_schema at ", Where(path), ": ", what));
}

// Whether `value` is an instance of the JSON Schema type `type`.
bool OfType(const json& value, const std::string& type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    if (!value.is_number_float()) return false;
    const double d = value.get<double>();
    return std::isfinite(d) && std::trunc(d) == d;
  }
  if (type == "number") return value.is_number();
  if (type == "string") return value.is_string();
  if (type == "array") return value.is_array();
  return value.is_object();
}

class SchemaCompiler {
 public:
  // `number_texts`: the schema's numbers as it wrote them (json_number_texts.h).
  SchemaCompiler(const json& root, const std::map<std::string, std::string>& number_texts)
      : root_(root), number_texts_(number_texts) {
    const int32_t indent =
        b_.Repeat("indent", {B::Bytes(ByteSet::Of(' ').Add(ByteSet::Of('\t')))}, 0, kMaxIndent);
    ws_ = b_.AddRule("whitespace", {{}, B::Literal(" "), {B::Bytes(ByteSet::Of('\n')), B::Ref(indent)}});
  }

  absl::StatusOr<Grammar> Compile(const json& schema) {
    absl::StatusOr<int32_t> value = Value(schema, "");
    if (!value.ok()) return value.status();
    return Finish(*value);
  }

  absl::StatusOr<Grammar> CompileFramed(const json& schema, const JsonFrame& frame) {
    if (frame.min_count < 1 || (frame.max_count >= 0 && frame.max_count < frame.min_count)) {
      return absl::InvalidArgumentError(absl::StrCat("json frame: counts ", frame.min_count,
                                                     "..", frame.max_count, " are not a range"));
    }
    absl::StatusOr<int32_t> value = Value(schema, "");
    if (!value.ok()) return value.status();
    GrammarSequence one = B::Literal(frame.open);
    one.push_back(B::Ref(ws_));
    one.push_back(B::Ref(*value));
    Append(one, B::Literal(frame.close));
    GrammarSequence another = B::Literal(frame.separator);
    Append(another, one);
    const int32_t more = b_.Repeat("more values", another, frame.min_count - 1,
                                   frame.max_count < 0 ? -1 : frame.max_count - 1);
    GrammarSequence all = B::Literal(frame.before);
    Append(all, one);
    all.push_back(B::Ref(more));
    Append(all, B::Literal(frame.after));
    return Build(b_.AddRule("root", {std::move(all)}));
  }

  Grammar AnyObjectGrammar() {
    AnyValue();
    absl::StatusOr<Grammar> grammar = Finish(any_object_);
    return *std::move(grammar);  // fixed rules: always well formed
  }

 private:
  static void Append(GrammarSequence& to, const GrammarSequence& more) {
    to.insert(to.end(), more.begin(), more.end());
  }

  absl::StatusOr<Grammar> Finish(int32_t value) {
    return Build(b_.AddRule("root", {{B::Ref(ws_), B::Ref(value)}}));
  }

  absl::StatusOr<Grammar> Build(int32_t root) {
    absl::StatusOr<Grammar> grammar = b_.Build(root);
    if (!grammar.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("json_schema: ", grammar.status().message()));
    }
    return grammar;
  }

  absl::StatusOr<int32_t> Value(const json& schema, const std::string& path) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return AnyValue();
      return Refuse(path, "the schema false admits no value");
    }
    if (!schema.is_object()) return Refuse(path, "a schema must be an object or a boolean");
    if (!path.empty() && schema.contains("$id")) {
      // A nested $id changes what "#" means below it; references here resolve against the root.
      return Refuse(path, "'$id' below the root is not supported");
    }
    for (const auto& [key, unused] : schema.items()) {
      if (!Annotations().contains(key) && !Enforced().contains(key)) {
        return Refuse(path, absl::StrCat("keyword '", key, "' is not supported"));
      }
    }
    auto only_beside = [&](const char* keyword) -> absl::Status {
      for (const auto& [key, unused] : schema.items()) {
        if (key != keyword && !Annotations().contains(key)) {
          return Refuse(path, absl::StrCat("'", key, "' beside '", keyword, "' is not supported"));
        }
      }
      return absl::OkStatus();
    };
    if (schema.contains("$ref")) {
      if (absl::Status s = only_beside("$ref"); !s.ok()) return s;
      return Ref(schema["$ref"], path + "/$ref");
    }
    for (const char* keyword : {"anyOf", "oneOf", "allOf"}) {
      if (!schema.contains(keyword)) continue;
      if (absl::Status s = only_beside(keyword); !s.ok()) return s;
      if (std::string_view(keyword) == "oneOf") {
        if (absl::Status s = Disjoint(schema[keyword], path + "/oneOf"); !s.ok()) return s;
      }
      return Choice(schema[keyword], keyword, path);
    }

    absl::StatusOr<std::vector<std::string>> types = Types(schema, path);
    if (!types.ok()) return types.status();
    if (schema.contains("enum") || schema.contains("const")) {
      // The values are the whole answer: a keyword beside them that could refuse one of them
      // would be ignored, so it is refused instead.
      for (const auto& [key, unused] : schema.items()) {
        if (key != "enum" && key != "const" && key != "type" && !Annotations().contains(key)) {
          return Refuse(path, absl::StrCat("'", key, "' beside 'enum' or 'const' is not supported"));
        }
      }
      return Values(schema, *types, path);
    }
    std::vector<GrammarSequence> alternatives;
    for (const std::string& type : *types) {
      absl::StatusOr<int32_t> rule = OfTypeRule(schema, type, path);
      if (!rule.ok()) return rule.status();
      alternatives.push_back({B::Ref(*rule)});
    }
    if (alternatives.size() == 1) return alternatives[0][0].rule;
    return b_.AddRule(Where(path), std::move(alternatives));
  }

  // The types `schema` allows: its `type`, or what its keywords imply, or all of them.
  absl::StatusOr<std::vector<std::string>> Types(const json& schema, const std::string& path) {
    if (schema.contains("type")) {
      const json& type = schema["type"];
      std::vector<std::string> types;
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty()) {
        for (const json& t : type) {
          if (!t.is_string()) return Refuse(path + "/type", "a type must be a string");
          types.push_back(t.get<std::string>());
        }
      } else {
        return Refuse(path + "/type", "must be a type name or a non-empty list of them");
      }
      for (const std::string& t : types) {
        if (std::find(TypeNames().begin(), TypeNames().end(), t) == TypeNames().end()) {
          return Refuse(path + "/type", absl::StrCat("unknown type '", t, "' (known: ",
                                                     absl::StrJoin(TypeNames(), ", "), ")"));
        }
      }
      return types;
    }
    if (schema.contains("properties") || schema.contains("required") ||
        schema.contains("additionalProperties")) {
      return std::vector<std::string>{"object"};
    }
    if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems") ||
        schema.contains("prefixItems") || schema.contains("additionalItems")) {
      return std::vector<std::string>{"array"};
    }
    if (schema.contains("minLength") || schema.contains("maxLength") || schema.contains("format") ||
        schema.contains("pattern")) {
      return std::vector<std::string>{"string"};
    }
    if (HasNumberBounds(schema)) return std::vector<std::string>{"number"};
    return TypeNames();
  }

  absl::StatusOr<int32_t> Ref(const json& ref, const std::string& path) {
    if (!ref.is_string()) return Refuse(path, "must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') {
      return Refuse(path, absl::StrCat("'", target,
                                       "' is not a reference into this schema (\"#\" or \"#/...\")"));
    }
    const json* resolved = &root_;
    if (target.size() > 1) {
      try {
        const json::json_pointer pointer(target.substr(1));
        if (!root_.contains(pointer)) return Refuse(path, absl::StrCat("'", target, "' names nothing"));
        resolved = &root_.at(pointer);
      } catch (const json::exception& e) {
        return Refuse(path, absl::StrCat("'", target, "' is not a JSON pointer: ", e.what()));
      }
    }
    // A chain of references to references nests compilation as deep as the chain is long.
    constexpr int kMaxRefDepth = 64;
    if (ref_depth_ >= kMaxRefDepth) {
      return Refuse(path, absl::StrCat("references nest deeper than ", kMaxRefDepth));
    }
    // Declared first, so that a schema may refer to itself.
    const int32_t rule = b_.DeclareRule(target);
    refs_[target] = rule;
    ++ref_depth_;
    absl::StatusOr<int32_t> value = Value(*resolved, target.substr(1));
    --ref_depth_;
    if (!value.ok()) return value.status();
    b_.AddAlternative(rule, {B::Ref(*value)});
    return rule;
  }

  // oneOf means exactly one subschema matches; tandem enforces it only where no value can match
  // two: each subschema names one type, and no two the same (integer is a number too).
  absl::Status Disjoint(const json& list, const std::string& at) {
    if (!list.is_array()) return absl::OkStatus();  // Choice refuses it
    std::set<std::string> types;
    for (const json& branch : list) {
      const bool typed = branch.is_object() && branch.contains("type") && branch["type"].is_string();
      std::string type = typed ? branch["type"].get<std::string>() : "";
      if (type == "integer") type = "number";
      if (!typed || !types.insert(type).second) {
        return Refuse(at, "oneOf is supported only when each subschema has its own single type "
                          "(an answer matching two would break it); use anyOf");
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int32_t> Choice(const json& list, const std::string& keyword,
                                 const std::string& path) {
    const std::string at = absl::StrCat(path, "/", keyword);
    if (!list.is_array() || list.empty()) return Refuse(at, "must be a non-empty list of schemas");
    if (keyword == "allOf" && list.size() != 1) {
      return Refuse(at, "allOf with more than one schema is not supported");
    }
    std::vector<GrammarSequence> alternatives;
    for (size_t i = 0; i < list.size(); ++i) {
      absl::StatusOr<int32_t> rule = Value(list[i], absl::StrCat(at, "/", i));
      if (!rule.ok()) return rule.status();
      alternatives.push_back({B::Ref(*rule)});
    }
    return b_.AddRule(Where(at), std::move(alternatives));
  }

  // enum / const: the values themselves, each written compactly.
  absl::StatusOr<int32_t> Values(const json& schema, const std::vector<std::string>& types,
                                 const std::string& path) {
    std::vector<json> values;
    std::vector<std::string> pointers;  // where each value is in the document
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array() || schema["enum"].empty()) {
        return Refuse(path + "/enum", "must be a non-empty list");
      }
      for (const json& v : schema["enum"]) {
        pointers.push_back(absl::StrCat(path, "/enum/", values.size()));
        values.push_back(v);
      }
    }
    if (schema.contains("const")) {
      if (!values.empty() &&
          std::find(values.begin(), values.end(), schema["const"]) == values.end()) {
        return Refuse(path, "const is not one of enum's values: no value is allowed");
      }
      values = {schema["const"]};
      pointers = {path + "/const"};
    }
    std::vector<std::string> texts;
    for (size_t i = 0; i < values.size(); ++i) {
      const json& v = values[i];
      const bool typed = std::any_of(types.begin(), types.end(),
                                     [&](const std::string& t) { return OfType(v, t); });
      if (!typed) {
        return Refuse(path, absl::StrCat("the value ", v.dump(), " is not of type ",
                                         absl::StrJoin(types, " or ")));
      }
      // Numbers as the schema wrote them: a double may not hold the value exactly.
      texts.push_back(DumpWithNumberTexts(v, pointers[i], number_texts_));
    }
    return Literals(texts, Where(path + "/enum"));
  }

  // A rule deriving exactly the strings `texts`, shaped as their trie (one rule per trie node),
  // so that values sharing a prefix are one parse until they differ: a long enum then keeps one
  // parse stack alive, not one per value.
  int32_t Literals(std::vector<std::string> texts, const std::string& name) {
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;
      bool terminal = false;
    };
    std::vector<Node> nodes(1);
    for (const std::string& text : texts) {
      int32_t at = 0;
      for (const char c : text) {
        const auto byte = static_cast<uint8_t>(c);
        auto& children = nodes[at].children;
        if (children.empty() || children.back().first != byte) {  // sorted input: last or new
          children.emplace_back(byte, static_cast<int32_t>(nodes.size()));
          nodes.emplace_back();
        }
        at = nodes[at].children.back().second;
      }
      nodes[at].terminal = true;
    }
    // Children are made after their parents: build the rules from the last node back.
    std::vector<int32_t> rules(nodes.size(), -1);
    for (size_t n = nodes.size(); n-- > 0 && !b_.over_budget();) {
      std::vector<GrammarSequence> alternatives;
      if (nodes[n].terminal) alternatives.push_back({});
      for (const auto& [byte, child] : nodes[n].children) {
        GrammarSequence step = {B::Bytes(ByteSet::Of(byte))};
        if (!(nodes[child].terminal && nodes[child].children.empty())) step.push_back(B::Ref(rules[child]));
        alternatives.push_back(std::move(step));
      }
      rules[n] = b_.AddRule(name, std::move(alternatives));
    }
    return rules[0] < 0 ? b_.AddRule(name, {}) : rules[0];
  }

  absl::StatusOr<int32_t> OfTypeRule(const json& schema, const std::string& type,
                                     const std::string& path) {
    if (type == "null") return Keyword("null");
    if (type == "boolean") return Boolean();
    if ((type == "integer" || type == "number") && HasNumberBounds(schema)) {
      return BoundedNumber(schema, type == "integer", path);
    }
    if (type == "integer") return Integer();
    if (type == "number") return Number();
    if (type == "string") return String(schema, path);
    if (type == "array") return Array(schema, path);
    return Object(schema, path);
  }

  // A non-negative integer keyword (minLength, ...): its value, or `otherwise` when absent.
  absl::StatusOr<int32_t> Count(const json& schema, const char* keyword, int32_t otherwise,
                                const std::string& path) {
    if (!schema.contains(keyword)) return otherwise;
    const json& v = schema[keyword];
    // Bounded repetition costs a rule per allowed count.
    constexpr int64_t kLargest = 10000;
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kLargest) {
      return Refuse(path + "/" + keyword, absl::StrCat("must be an integer in [0, ", kLargest, "]"));
    }
    return static_cast<int32_t>(v.get<int64_t>());
  }

  absl::StatusOr<std::pair<int32_t, int32_t>> Bounds(const json& schema, const char* min_keyword,
                                                     const char* max_keyword,
                                                     const std::string& path) {
    absl::StatusOr<int32_t> min = Count(schema, min_keyword, 0, path);
    if (!min.ok()) return min.status();
    absl::StatusOr<int32_t> max = Count(schema, max_keyword, -1, path);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < *min) {
      return Refuse(path, absl::StrCat(max_keyword, " ", *max, " is below ", min_keyword, " ",
                                       *min, ": no value is allowed"));
    }
    return std::make_pair(*min, *max);
  }

  static bool HasNumberBounds(const json& schema) {
    for (const char* keyword : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (schema.contains(keyword)) return true;
    }
    return false;
  }

  // One side of a number's bounds: `inclusive_keyword` (minimum or maximum) and
  // `exclusive_keyword`, a number (the bound, exclusive) or, as in draft 4, a boolean that makes
  // the inclusive one exclusive. Of two bounds the tighter holds; `low` says which way is tighter.
  absl::StatusOr<std::optional<NumberBound>> NumberSide(const json& schema,
                                                        const char* inclusive_keyword,
                                                        const char* exclusive_keyword, bool low,
                                                        const std::string& path) {
    std::optional<NumberBound> bound;
    bool draft4_exclusive = false;
    if (schema.contains(exclusive_keyword) && schema[exclusive_keyword].is_boolean()) {
      draft4_exclusive = schema[exclusive_keyword].get<bool>();
      if (draft4_exclusive && !schema.contains(inclusive_keyword)) {
        return Refuse(path + "/" + exclusive_keyword,
                      absl::StrCat("true needs '", inclusive_keyword, "' beside it"));
      }
    }
    for (const char* keyword : {inclusive_keyword, exclusive_keyword}) {
      if (!schema.contains(keyword) || schema[keyword].is_boolean()) continue;
      const json& value = schema[keyword];
      if (!value.is_number()) return Refuse(path + "/" + keyword, "must be a number");
      // The bound as the schema wrote it: a double may not hold it exactly (1e-400, 2^64 + 1).
      const auto text = number_texts_.find(path + "/" + keyword);
      absl::StatusOr<Decimal> decimal =
          ParseDecimal(text != number_texts_.end() ? text->second : value.dump());
      if (!decimal.ok()) {
        return Refuse(path + "/" + keyword, std::string(decimal.status().message()));
      }
      const bool exclusive = keyword == exclusive_keyword || draft4_exclusive;
      if (!bound) {
        bound = NumberBound{*decimal, exclusive};
        continue;
      }
      const int order = CompareDecimals(*decimal, bound->value);
      if (order == 0) {
        bound->exclusive = bound->exclusive || exclusive;
      } else if ((order > 0) == low) {
        bound = NumberBound{*decimal, exclusive};
      }
    }
    return bound;
  }

  // An integer or a number between minimum/exclusiveMinimum and maximum/exclusiveMaximum.
  absl::StatusOr<int32_t> BoundedNumber(const json& schema, bool integer, const std::string& path) {
    NumberRange range;
    TANDEM_ASSIGN_OR_RETURN(range.low,
                            NumberSide(schema, "minimum", "exclusiveMinimum", true, path));
    TANDEM_ASSIGN_OR_RETURN(range.high,
                            NumberSide(schema, "maximum", "exclusiveMaximum", false, path));
    std::optional<int32_t> rule = NumberRangeRule(b_, range, integer, Where(path));
    if (rule) return *rule;
    std::vector<std::string> bounds;
    if (range.low) {
      bounds.push_back(
          absl::StrCat(range.low->exclusive ? "> " : ">= ", range.low->value.ToString()));
    }
    if (range.high) {
      bounds.push_back(
          absl::StrCat(range.high->exclusive ? "< " : "<= ", range.high->value.ToString()));
    }
    return Refuse(path, absl::StrCat("no ", integer ? "integer" : "number", " is ",
                                     absl::StrJoin(bounds, " and "), ": no value is allowed"));
  }

  int32_t Keyword(const char* word) {
    auto [it, added] = keywords_.try_emplace(word, 0);
    if (added) it->second = b_.AddRule(word, {B::Literal(word)});
    return it->second;
  }

  int32_t Boolean() {
    if (!boolean_) boolean_ = b_.AddRule("boolean", {{B::Ref(Keyword("true"))}, {B::Ref(Keyword("false"))}});
    return *boolean_;
  }

  int32_t Digits() {
    if (!digits_) digits_ = b_.Star("digits", {B::Bytes(ByteSet::Range('0', '9'))});
    return *digits_;
  }

  int32_t Integer() {
    if (!integer_) {
      const int32_t minus = b_.Optional("minus", B::Literal("-"));
      const int32_t magnitude = b_.AddRule(
          "magnitude",
          {B::Literal("0"), {B::Bytes(ByteSet::Range('1', '9')), B::Ref(Digits())}});
      integer_ = b_.AddRule("integer", {{B::Ref(minus), B::Ref(magnitude)}});
    }
    return *integer_;
  }

  int32_t Number() {
    if (!number_) {
      const GrammarSymbol digit = B::Bytes(ByteSet::Range('0', '9'));
      const int32_t fraction = b_.Optional("fraction", {B::Bytes(ByteSet::Of('.')), digit, B::Ref(Digits())});
      const int32_t sign = b_.Optional("exponent sign", {B::Bytes(ByteSet::Of('+').Add(ByteSet::Of('-')))});
      const int32_t exponent = b_.Optional(
          "exponent", {B::Bytes(ByteSet::Of('e').Add(ByteSet::Of('E'))), B::Ref(sign), digit, B::Ref(Digits())});
      number_ = b_.AddRule("number", {{B::Ref(Integer()), B::Ref(fraction), B::Ref(exponent)}});
    }
    return *number_;
  }

  // One character of a JSON string: a well-formed UTF-8 character other than '"', '\' and the
  // control characters, or an escape.
  int32_t Character() {
    if (!character_) {
      ByteSet plain = ByteSet::Range(0x20, 0x7F);
      plain.Remove(ByteSet::Of('"')).Remove(ByteSet::Of('\\'));
      const int32_t utf8 = b_.Utf8Character("unescaped character", plain);
      ByteSet escaped;
      for (const char c : std::string_view("\"\\/bfnrt")) escaped.Add(ByteSet::Of(c));
      const ByteSet hex_digits =
          ByteSet::Range('0', '9').Add(ByteSet::Range('a', 'f')).Add(ByteSet::Range('A', 'F'));
      const GrammarSymbol hex = B::Bytes(hex_digits);
      const GrammarSymbol backslash = B::Bytes(ByteSet::Of('\\'));
      const GrammarSymbol u = B::Bytes(ByteSet::Of('u'));
      const ByteSet d = ByteSet::Of('d').Add(ByteSet::Of('D'));
      // \uXXXX of a code point outside the surrogates, or a high surrogate escape followed by a
      // low one: a lone surrogate is refused by most JSON parsers.
      ByteSet not_d = hex_digits;
      not_d.Remove(d);
      const GrammarSymbol high = B::Bytes(ByteSet::Range('8', '9').Add(ByteSet::Range('a', 'b')).Add(ByteSet::Range('A', 'B')));
      const GrammarSymbol low = B::Bytes(ByteSet::Range('c', 'f').Add(ByteSet::Range('C', 'F')));
      character_ = b_.AddRule(
          "character", {{B::Ref(utf8)},
                        {backslash, B::Bytes(escaped)},
                        {backslash, u, B::Bytes(not_d), hex, hex, hex},
                        {backslash, u, B::Bytes(d), B::Bytes(ByteSet::Range('0', '7')), hex, hex},
                        {backslash, u, B::Bytes(d), high, hex, hex, backslash, u, B::Bytes(d), low, hex, hex}});
    }
    return *character_;
  }

  int32_t StringOf(int32_t min, int32_t max) {
    auto [it, added] = strings_.try_emplace({min, max}, 0);
    if (added) {
      const GrammarSymbol quote = B::Bytes(ByteSet::Of('"'));
      const int32_t body = b_.Repeat(absl::StrCat("characters{", min, ",", max, "}"),
                                     {B::Ref(Character())}, min, max);
      it->second = b_.AddRule("string", {{quote, B::Ref(body), quote}});
    }
    return it->second;
  }

  absl::StatusOr<int32_t> String(const json& schema, const std::string& path) {
    if (schema.contains("format")) return Format(schema, path);
    if (schema.contains("pattern")) return Pattern(schema, path);
    absl::StatusOr<std::pair<int32_t, int32_t>> bounds = Bounds(schema, "minLength", "maxLength", path);
    if (!bounds.ok()) return bounds.status();
    return StringOf(bounds->first, bounds->second);
  }

  // A string in the schema's `format` (json_string_format.h).
  absl::StatusOr<int32_t> Format(const json& schema, const std::string& path) {
    const json& format = schema["format"];
    if (!format.is_string()) return Refuse(path + "/format", "must be a string");
    for (const char* keyword : {"minLength", "maxLength", "pattern"}) {
      if (schema.contains(keyword)) {
        return Refuse(path, absl::StrCat("'", keyword, "' beside 'format' is not supported"));
      }
    }
    const std::string name = format.get<std::string>();
    if (auto it = formats_.find(name); it != formats_.end()) return it->second;
    std::optional<int32_t> rule = StringFormatRule(b_, name);
    if (!rule) {
      return Refuse(path + "/format", absl::StrCat("'", name, "' is not supported (supported: ",
                                                   absl::StrJoin(StringFormats(), ", "), ")"));
    }
    formats_[name] = *rule;
    return *rule;
  }

  // A string its `pattern` matches (json_string_pattern.h).
  absl::StatusOr<int32_t> Pattern(const json& schema, const std::string& path) {
    const json& pattern = schema["pattern"];
    if (!pattern.is_string()) return Refuse(path + "/pattern", "must be a string");
    for (const char* keyword : {"minLength", "maxLength"}) {
      if (schema.contains(keyword)) {
        return Refuse(path, absl::StrCat("'", keyword, "' beside 'pattern' is not supported"));
      }
    }
    const std::string text = pattern.get<std::string>();
    if (auto it = patterns_.find(text); it != patterns_.end()) return it->second;
    absl::StatusOr<int32_t> rule = StringPatternRule(b_, text);
    if (!rule.ok()) return Refuse(path + "/pattern", std::string(rule.status().message()));
    patterns_[text] = *rule;
    return *rule;
  }

  // [ item (, item)* ] with the count in [min, max] (max < 0: unbounded).
  int32_t ArrayOf(int32_t item, int32_t min, int32_t max, const std::string& name) {
    const GrammarSymbol ws = B::Ref(ws_);
    std::vector<GrammarSequence> alternatives;
    if (min == 0) alternatives.push_back({B::Bytes(ByteSet::Of('[')), ws, B::Bytes(ByteSet::Of(']'))});
    if (max != 0) {
      const int32_t rest = b_.Repeat(name + " more items",
                                     {B::Bytes(ByteSet::Of(',')), ws, B::Ref(item), ws},
                                     std::max(min - 1, 0), max < 0 ? -1 : max - 1);
      alternatives.push_back({B::Bytes(ByteSet::Of('[')), ws, B::Ref(item), ws, B::Ref(rest),
                              B::Bytes(ByteSet::Of(']'))});
    }
    return b_.AddRule(name, std::move(alternatives));
  }

  // An array: its positional schemas (prefixItems, or, before draft 2020-12, items as a list),
  // then the schema of every later item (items, or additionalItems beside a list), whose `false`
  // allows none; minItems and maxItems count them all.
  absl::StatusOr<int32_t> Array(const json& schema, const std::string& path) {
    absl::StatusOr<std::pair<int32_t, int32_t>> bounds = Bounds(schema, "minItems", "maxItems", path);
    if (!bounds.ok()) return bounds.status();
    auto [min, max] = *bounds;
    const bool listed = schema.contains("items") && schema["items"].is_array();
    if (listed && schema.contains("prefixItems")) {
      return Refuse(path + "/items", "a list of schemas beside 'prefixItems' is not supported");
    }
    if (schema.contains("additionalItems") && !listed) {
      return Refuse(path + "/additionalItems", "is supported only beside 'items' as a list");
    }
    const char* prefix_keyword = listed ? "items" : "prefixItems";
    const char* rest_keyword = listed ? "additionalItems" : "items";
    std::vector<int32_t> prefix;
    if (schema.contains(prefix_keyword)) {
      const json& list = schema[prefix_keyword];
      if (!list.is_array()) return Refuse(path + "/" + prefix_keyword, "must be a list of schemas");
      for (size_t i = 0; i < list.size(); ++i) {
        absl::StatusOr<int32_t> rule =
            Value(list[i], absl::StrCat(path, "/", prefix_keyword, "/", i));
        if (!rule.ok()) return rule.status();
        prefix.push_back(*rule);
      }
    }
    // Later items: a schema's rule, or -1 when `false` allows none.
    int32_t rest = 0;
    if (!schema.contains(rest_keyword) || schema[rest_keyword] == true) {
      rest = AnyValue();
    } else if (schema[rest_keyword] == false) {
      rest = -1;
    } else {
      absl::StatusOr<int32_t> rule = Value(schema[rest_keyword], path + "/" + rest_keyword);
      if (!rule.ok()) return rule.status();
      rest = *rule;
    }
    const auto count = static_cast<int32_t>(prefix.size());
    if (rest < 0) {
      if (min > count) {
        return Refuse(path, absl::StrCat("minItems ", min, " is above the ", count,
                                         " items allowed: no value is allowed"));
      }
      max = max < 0 ? count : std::min(max, count);
    }
    if (prefix.empty()) return ArrayOf(rest < 0 ? AnyValue() : rest, min, max, Where(path));
    return TupleOf(prefix, rest, min, max, Where(path));
  }

  // [ prefix[0], prefix[1], ..., then items of `rest` (-1: none) ] with the count in [min, max]
  // (max < 0: unbounded); every later position is optional once min is met. One rule per
  // position: what may follow once that many items are written.
  int32_t TupleOf(const std::vector<int32_t>& prefix, int32_t rest, int32_t min, int32_t max,
                  const std::string& name) {
    const GrammarSymbol ws = B::Ref(ws_);
    const GrammarSymbol comma = B::Bytes(ByteSet::Of(','));
    const GrammarSymbol close = B::Bytes(ByteSet::Of(']'));
    const auto count = static_cast<int32_t>(prefix.size());
    std::vector<GrammarSequence> after_prefix;
    if (rest >= 0 && (max < 0 || max > count)) {
      const int32_t more = b_.Repeat(name + " more items", {comma, ws, B::Ref(rest), ws},
                                     std::max(min - count, 0), max < 0 ? -1 : max - count);
      after_prefix.push_back({B::Ref(more), close});
    } else {
      after_prefix.push_back({close});  // count >= min here (Array refuses the rest)
    }
    int32_t after = b_.AddRule(name + " after its prefix", std::move(after_prefix));
    for (int32_t written = count - 1; written >= 1; --written) {
      std::vector<GrammarSequence> alternatives;
      if (written >= min) alternatives.push_back({close});
      if (max < 0 || written < max) {
        alternatives.push_back({comma, ws, B::Ref(prefix[written]), ws, B::Ref(after)});
      }
      after = b_.AddRule(absl::StrCat(name, " after item ", written), std::move(alternatives));
    }
    std::vector<GrammarSequence> alternatives;
    const GrammarSymbol open = B::Bytes(ByteSet::Of('['));
    if (min == 0) alternatives.push_back({open, ws, close});
    if (max != 0) alternatives.push_back({open, ws, B::Ref(prefix[0]), ws, B::Ref(after)});
    return b_.AddRule(name, std::move(alternatives));
  }

  // "key" ws : ws value ws, the key given or any string.
  int32_t Member(const GrammarSequence& key, int32_t value, const std::string& name) {
    GrammarSequence member = key;
    const GrammarSymbol ws = B::Ref(ws_);
    member.insert(member.end(), {ws, B::Bytes(ByteSet::Of(':')), ws, B::Ref(value), ws});
    return b_.AddRule(name, {std::move(member)});
  }

  // { members } where the declared members come in order, the required ones always, then any
  // number of `extra` members (a rule, or -1 for none). Per declared member i two rules: first[i]
  // (no member written yet: no comma before the next) and later[i].
  int32_t ObjectOf(const std::vector<std::pair<int32_t, bool>>& members, int32_t extra,
                   const std::string& name) {
    const GrammarSymbol ws = B::Ref(ws_);
    const GrammarSymbol comma = B::Bytes(ByteSet::Of(','));
    int32_t first = 0, later = 0;
    if (extra >= 0) {
      later = b_.Star(name + " more members", {comma, ws, B::Ref(extra)});
      first = b_.AddRule(name + " members", {{}, {B::Ref(extra), B::Ref(later)}});
    } else {
      first = later = b_.AddRule(name + " end", {{}});
    }
    for (size_t i = members.size(); i-- > 0;) {
      const auto [member, required] = members[i];
      std::vector<GrammarSequence> with_comma = {{comma, ws, B::Ref(member), B::Ref(later)}};
      std::vector<GrammarSequence> without = {{B::Ref(member), B::Ref(later)}};
      if (!required) {
        with_comma.push_back({B::Ref(later)});
        without.push_back({B::Ref(first)});
      }
      const int32_t next_later = b_.AddRule(absl::StrCat(name, " after member ", i), std::move(with_comma));
      first = b_.AddRule(absl::StrCat(name, " from member ", i), std::move(without));
      later = next_later;
    }
    return b_.AddRule(name, {{B::Bytes(ByteSet::Of('{')), ws, B::Ref(first), B::Bytes(ByteSet::Of('}'))}});
  }

  absl::StatusOr<int32_t> Object(const json& schema, const std::string& path) {
    const json empty = json::object();
    const json& properties = schema.contains("properties") ? schema["properties"] : empty;
    if (!properties.is_object()) return Refuse(path + "/properties", "must be an object");
    std::set<std::string> required;
    if (schema.contains("required")) {
      const json& list = schema["required"];
      if (!list.is_array()) return Refuse(path + "/required", "must be a list of names");
      for (const json& name : list) {
        if (!name.is_string()) return Refuse(path + "/required", "must be a list of names");
        if (!properties.contains(name.get<std::string>())) {
          return Refuse(path + "/required",
                        absl::StrCat("'", name.get<std::string>(),
                                     "' is required but not among properties (not supported)"));
        }
        required.insert(name.get<std::string>());
      }
    }
    // Each optional property is a parse that stays alive until the next member starts.
    constexpr size_t kMaxProperties = 1024;
    if (properties.size() > kMaxProperties) {
      return Refuse(path + "/properties",
                    absl::StrCat(properties.size(), " properties, more than ", kMaxProperties));
    }
    std::vector<std::pair<int32_t, bool>> members;
    for (const auto& [key, subschema] : properties.items()) {
      const std::string at = absl::StrCat(path, "/properties/", PointerSegment(key));
      absl::StatusOr<int32_t> value = Value(subschema, at);
      if (!value.ok()) return value.status();
      members.emplace_back(Member(B::Literal(json(key).dump()), *value, Where(at)), required.contains(key));
    }
    // Extra members: additionalProperties true or a schema; when absent, only for an object
    // that declares no properties.
    int32_t extra = -1;
    const bool declared = schema.contains("properties");
    const json* additional = schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    const bool closed = additional != nullptr && additional->is_boolean() && !additional->get<bool>();
    if (declared && additional != nullptr && !closed) {
      // An extra member's key could repeat a declared one with a value of another type.
      return Refuse(path + "/additionalProperties",
                    "other members beside declared properties are not supported (set it to "
                    "false, or drop properties for a map)");
    }
    if (additional == nullptr ? !declared : !closed) {
      int32_t value = 0;
      if (additional == nullptr || additional->is_boolean()) {
        value = AnyValue();
      } else {
        absl::StatusOr<int32_t> rule = Value(*additional, path + "/additionalProperties");
        if (!rule.ok()) return rule.status();
        value = *rule;
      }
      extra = Member({B::Ref(StringOf(0, -1))}, value, Where(path + "/additionalProperties"));
    }
    return ObjectOf(members, extra, Where(path));
  }

  // Any JSON value (and any_object_, any JSON object).
  int32_t AnyValue() {
    if (any_value_ < 0) {
      any_value_ = b_.DeclareRule("any value");
      const int32_t member = Member({B::Ref(StringOf(0, -1))}, any_value_, "any member");
      any_object_ = ObjectOf({}, member, "any object");
      const int32_t array = ArrayOf(any_value_, 0, -1, "any array");
      for (const int32_t rule : {any_object_, array, StringOf(0, -1), Number(), Boolean(), Keyword("null")}) {
        b_.AddAlternative(any_value_, {B::Ref(rule)});
      }
    }
    return any_value_;
  }

  const json& root_;
  const std::map<std::string, std::string>& number_texts_;
  GrammarBuilder b_;
  int32_t ws_ = 0;
  std::map<std::string, int32_t> refs_;
  int ref_depth_ = 0;
  std::map<std::string, int32_t> keywords_;
  std::map<std::pair<int32_t, int32_t>, int32_t> strings_;
  std::map<std::string, int32_t> formats_;
  std::map<std::string, int32_t> patterns_;
  std::optional<int32_t> boolean_, digits_, integer_, number_, character_;
  int32_t any_value_ = -1;
  int32_t any_object_ = -1;
};

absl::StatusOr<JsonWithNumberTexts> ParseSchema(std::string_view schema_text) {
  if (models::JsonDepth(schema_text, kMaxJsonSchemaDepth) > kMaxJsonSchemaDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("json_schema: nested deeper than ", kMaxJsonSchemaDepth, " levels"));
  }
  absl::StatusOr<JsonWithNumberTexts> parsed = ParseJsonWithNumberTexts(schema_text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("json_schema: not valid JSON: ", parsed.status().message()));
  }
  return parsed;
}

}  // namespace

absl::StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_text) {
  TANDEM_ASSIGN_OR_RETURN(JsonWithNumberTexts schema, ParseSchema(schema_text));
  return SchemaCompiler(schema.value, schema.number_texts).Compile(schema.value);
}

absl::StatusOr<Grammar> FramedJsonSchemaGrammar(std::string_view schema_text,
                                                const JsonFrame& frame) {
  TANDEM_ASSIGN_OR_RETURN(JsonWithNumberTexts schema, ParseSchema(schema_text));
  return SchemaCompiler(schema.value, schema.number_texts).CompileFramed(schema.value, frame);
}

Grammar JsonObjectGrammar() {
  const json unused;
  const std::map<std::string, std::string> no_numbers;
  return SchemaCompiler(unused, no_numbers).AnyObjectGrammar();
}

}  // namespace tandem::engine
