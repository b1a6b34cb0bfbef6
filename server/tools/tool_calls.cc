#include "server/tools/tool_calls.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "models/json_depth.h"

namespace tandem::server {
namespace {

// std::string_view helpers (this Abseil's string_view is its own type).
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view StripLeading(std::string_view text) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  return text;
}

std::string_view Strip(std::string_view text) {
  text = StripLeading(text);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

bool ConsumePrefix(std::string_view* text, std::string_view prefix) {
  if (!text->starts_with(prefix)) return false;
  text->remove_prefix(prefix.size());
  return true;
}

void ConsumeSuffix(std::string_view* text, std::string_view suffix) {
  if (text->ends_with(suffix)) text->remove_suffix(suffix.size());
}

// After `opening` ("<function=", "<parameter="), the name up to '>', consumed with it; null when
// the text does not open so or the name is empty.
std::optional<std::string> TagName(std::string_view* text, std::string_view opening) {
  if (!ConsumePrefix(text, opening)) return std::nullopt;
  const size_t end = text->find('>');
  if (end == std::string_view::npos) return std::nullopt;
  std::string name(Strip(text->substr(0, end)));
  if (name.empty()) return std::nullopt;
  text->remove_prefix(end + 1);
  return name;
}

// Object members in the order the model wrote them: arguments keep their order.
using ordered = nlohmann::ordered_json;

// Deeper JSON is not a call: parsing and printing it recurse per level.
constexpr int kMaxCallDepth = 64;

std::optional<ordered> ParseJson(std::string_view text) {
  if (models::JsonDepth(text, kMaxCallDepth) > kMaxCallDepth) return std::nullopt;
  ordered parsed = ordered::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed;
}

std::string Dump(const ordered& value) {
  return value.dump(-1, ' ', false, ordered::error_handler_t::replace);
}

// {"name": "f", "arguments": {...}} (or "parameters", as some models write it; arguments may
// also come as the text of an object, as OpenAI sends them).
std::optional<ToolCall> CallFromObject(const ordered& object) {
  if (!object.is_object()) return std::nullopt;
  auto name = object.find("name");
  if (name == object.end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::nullopt;
  }
  auto arguments = object.find("arguments");
  if (arguments == object.end()) arguments = object.find("parameters");
  ToolCall call{name->get<std::string>(), "{}"};
  if (arguments == object.end() || arguments->is_null()) return call;
  if (arguments->is_object()) {
    call.arguments = Dump(*arguments);
    return call;
  }
  if (!arguments->is_string()) return std::nullopt;
  std::optional<ordered> inner = ParseJson(arguments->get<std::string>());
  if (!inner || !inner->is_object()) return std::nullopt;
  call.arguments = Dump(*inner);
  return call;
}

// The JSON Schema `type` of parameter `parameter` of tool `function`, or null.
const nlohmann::json* ParameterType(const nlohmann::json& tools, const std::string& function,
                                    const std::string& parameter) {
  if (!tools.is_array()) return nullptr;
  for (const nlohmann::json& tool : tools) {
    const nlohmann::json* f =
        tool.is_object() && tool.contains("function") ? &tool["function"] : &tool;
    // Compared, never converted: a client's "name": 5 must not throw.
    if (!f->is_object() || !f->contains("name") || (*f)["name"] != function) continue;
    const nlohmann::json* properties = nullptr;
    if (auto p = f->find("parameters"); p != f->end() && p->is_object()) {
      if (auto q = p->find("properties"); q != p->end() && q->is_object()) properties = &*q;
    }
    if (properties == nullptr) return nullptr;
    auto it = properties->find(parameter);
    if (it == properties->end() || !it->is_object()) return nullptr;
    auto type = it->find("type");
    return type == it->end() ? nullptr : &*type;
  }
  return nullptr;
}

bool AdmitsString(const nlohmann::json* type) {
  if (type == nullptr) return false;
  if (type->is_string()) return *type == "string";
  if (type->is_array()) {
    for (const nlohmann::json& t : *type) {
      if (t == "string") return true;
    }
  }
  return false;
}

// One value of the XML format: text for string parameters, else the JSON it spells (text when
// it spells none).
ordered XmlValue(std::string_view raw, const nlohmann::json* type) {
  if (!AdmitsString(type)) {
    if (std::optional<ordered> parsed = ParseJson(raw)) return *parsed;
  }
  return ordered(std::string(raw));
}

// <function=f>\n<parameter=p>\nvalue\n</parameter>\n...</function>, one or more.
std::optional<std::vector<ToolCall>> XmlCalls(std::string_view inner, const nlohmann::json& tools) {
  std::vector<ToolCall> calls;
  for (;;) {
    inner = StripLeading(inner);
    if (inner.empty()) break;
    const std::optional<std::string> name = TagName(&inner, "<function=");
    if (!name) return std::nullopt;
    ordered arguments = ordered::object();
    for (;;) {
      inner = StripLeading(inner);
      if (ConsumePrefix(&inner, "</function>")) break;
      const std::optional<std::string> key = TagName(&inner, "<parameter=");
      if (!key) return std::nullopt;
      const size_t value_end = inner.find("</parameter>");
      if (value_end == std::string_view::npos) return std::nullopt;
      std::string_view value = inner.substr(0, value_end);
      // The template puts the value on lines of its own.
      ConsumePrefix(&value, "\n");
      ConsumeSuffix(&value, "\n");
      arguments[*key] = XmlValue(value, ParameterType(tools, *name, *key));
      inner.remove_prefix(value_end + sizeof("</parameter>") - 1);
    }
    calls.push_back(ToolCall{*name, Dump(arguments)});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::optional<std::vector<ToolCall>> JsonCalls(std::string_view inner) {
  std::optional<ordered> parsed = ParseJson(inner);
  if (!parsed) return std::nullopt;
  std::vector<ToolCall> calls;
  // A list of calls, or (as some models write a single one) the call itself.
  const ordered list = parsed->is_array() ? *std::move(parsed) : ordered::array({*parsed});
  for (const ordered& element : list) {
    std::optional<ToolCall> call = CallFromObject(element);
    if (!call) return std::nullopt;
    calls.push_back(*std::move(call));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// The length of the longest proper prefix of `marker` that `text` ends with.
size_t PartialMarker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ToolCallStream::ToolCallStream(ToolCallFormat format, nlohmann::json tools)
    : format_(format), tools_(std::move(tools)) {}

void ToolCallStream::AddContent(std::string_view text, ToolCallPiece* out) {
  if (!called_) {
    out->content.append(text);
    return;
  }
  // Trailing whitespace waits, however the text was cut: the stream and the whole parse agree.
  size_t body = text.size();
  while (body > 0 && IsSpace(text[body - 1])) --body;
  if (body > 0) {
    out->content += held_space_;
    held_space_.clear();
    out->content.append(text.substr(0, body));
  }
  held_space_.append(text.substr(body));
}

void ToolCallStream::TakeBlock(std::string_view block, bool closed, ToolCallPiece* out) {
  const ToolCallMarkers markers = MarkersOf(format_);
  std::string_view inner = block.substr(markers.start.size());
  if (closed) inner.remove_suffix(markers.end.size());
  std::optional<std::vector<ToolCall>> calls =
      format_ == ToolCallFormat::kXmlFunction ? XmlCalls(inner, tools_) : JsonCalls(inner);
  if (!calls) {
    AddContent(block, out);
    return;
  }
  for (ToolCall& call : *calls) out->calls.push_back(std::move(call));
  called_ = true;
  held_space_.clear();  // whitespace between two calls separates them: it is not content
}

std::vector<ToolCallPiece> ToolCallStream::Feed(std::string_view text) {
  held_.append(text);
  std::vector<ToolCallPiece> pieces(1);
  const ToolCallMarkers markers = MarkersOf(format_);
  for (;;) {
    ToolCallPiece& out = pieces.back();
    if (!in_block_) {
      const size_t start = markers.start.empty() ? std::string::npos : held_.find(markers.start);
      if (start == std::string::npos) {
        const size_t keep = markers.start.empty() ? 0 : PartialMarker(held_, markers.start);
        AddContent(std::string_view(held_).substr(0, held_.size() - keep), &out);
        held_.erase(0, held_.size() - keep);
        break;
      }
      AddContent(std::string_view(held_).substr(0, start), &out);
      held_.erase(0, start);
      in_block_ = true;
    }
    // Only the new text can complete the end marker: a long block is scanned once.
    const size_t rescan = markers.end.size() - 1;
    const size_t from =
        std::max(markers.start.size(), scanned_ > rescan ? scanned_ - rescan : size_t{0});
    const size_t end = held_.find(markers.end, from);
    if (end == std::string::npos) {
      scanned_ = held_.size();
      break;
    }
    const size_t block = end + markers.end.size();
    TakeBlock(std::string_view(held_).substr(0, block), /*closed=*/true, &out);
    held_.erase(0, block);
    in_block_ = false;
    scanned_ = 0;
    // What follows the calls comes after them.
    if (!out.calls.empty()) pieces.emplace_back();
  }
  if (pieces.size() > 1 && pieces.back().content.empty()) pieces.pop_back();
  return pieces;
}

ToolCallPiece ToolCallStream::Finish() {
  ToolCallPiece out;
  if (in_block_) {
    TakeBlock(held_, /*closed=*/false, &out);
  } else {
    AddContent(held_, &out);
  }
  held_.clear();
  held_space_.clear();
  scanned_ = 0;
  in_block_ = false;
  return out;
}

ToolCallPiece ParseToolCalls(ToolCallFormat format, const nlohmann::json& tools,
                             std::string_view text) {
  ToolCallStream stream(format, tools);
  std::vector<ToolCallPiece> pieces = stream.Feed(text);
  pieces.push_back(stream.Finish());
  ToolCallPiece whole;
  for (ToolCallPiece& piece : pieces) {
    whole.content += piece.content;
    for (ToolCall& call : piece.calls) whole.calls.push_back(std::move(call));
  }
  return whole;
}

std::string NewToolCallId() {
  static constexpr char kDigits[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  thread_local std::mt19937_64 random(std::random_device{}());
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kDigits[random() % (sizeof(kDigits) - 1)];
  return id;
}

}  // namespace tandem::server
