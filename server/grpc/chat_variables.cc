#include "server/grpc/chat_variables.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/unicode_utf8.h"

namespace tandem::server {
namespace {

using json = nlohmann::ordered_json;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Variables the server sets; a kwarg may not replace them.
constexpr const char* kServerVariables[] = {
    "messages",  "tools",     "documents", "add_generation_prompt", "bos_token",
    "eos_token", "unk_token", "pad_token", "raise_exception",       "strftime_now"};

// `field.key`, or `field["key"]` when the key is not a plain identifier.
std::string Child(const std::string& field, const std::string& key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (plain) return field.empty() ? key : absl::StrCat(field, ".", key);
  return absl::StrCat(field, "[", json(key).dump(), "]");
}

// Converts the client's JSON-like values, counting every string and key against the cap.
class Converter {
 public:
  explicit Converter(int64_t max_bytes) : max_bytes_(max_bytes) {}

  absl::Status Text(const std::string& s, const std::string& field) {
    used_ += static_cast<int64_t>(s.size());
    if (used_ > max_bytes_) {
      return Invalid(field,
                     absl::StrCat("the request's text reaches ", used_,
                                  " bytes here, more than the server's limit of ", max_bytes_));
    }
    if (!models::IsValidUtf8(s)) return Invalid(field, "not valid UTF-8");
    return absl::OkStatus();
  }

  absl::StatusOr<json> Value(const google::protobuf::Value& v, const std::string& field,
                             int depth) {
    switch (v.kind_case()) {
      case google::protobuf::Value::kStringValue:
        if (absl::Status s = Text(v.string_value(), field); !s.ok()) return s;
        return json(v.string_value());
      case google::protobuf::Value::kNumberValue: {
        const double x = v.number_value();
        if (!std::isfinite(x)) return Invalid(field, "not a finite number");
        // JSON clients mean 1 when they write 1; Struct stores every number as a double.
        if (std::trunc(x) == x && std::fabs(x) < 9.007199254740992e15) {
          return json(static_cast<int64_t>(x));
        }
        return json(x);
      }
      case google::protobuf::Value::kBoolValue:
        return json(v.bool_value());
      case google::protobuf::Value::kStructValue:
        return Struct(v.struct_value(), field, depth + 1);
      case google::protobuf::Value::kListValue: {
        if (depth + 1 > kMaxChatJsonDepth) {
          return Invalid(field, absl::StrCat("nested deeper than ", kMaxChatJsonDepth, " levels"));
        }
        json out = json::array();
        const auto& values = v.list_value().values();
        for (int i = 0; i < values.size(); ++i) {
          absl::StatusOr<json> e = Value(values[i], absl::StrCat(field, "[", i, "]"), depth + 1);
          if (!e.ok()) return e.status();
          out.push_back(*std::move(e));
        }
        return out;
      }
      default:  // null, or no kind set
        return json(nullptr);
    }
  }

  absl::StatusOr<json> Struct(const google::protobuf::Struct& s, const std::string& field,
                              int depth) {
    if (depth > kMaxChatJsonDepth) {
      return Invalid(field, absl::StrCat("nested deeper than ", kMaxChatJsonDepth, " levels"));
    }
    // A protobuf map has no order; sorted keys render the same prompt every time.
    std::vector<const std::string*> keys;
    for (const auto& [key, value] : s.fields()) keys.push_back(&key);
    std::sort(keys.begin(), keys.end(), [](auto* a, auto* b) { return *a < *b; });
    json out = json::object();
    for (const std::string* key : keys) {
      if (!models::IsValidUtf8(*key)) return Invalid(field, "an object key is not valid UTF-8");
      const std::string child = Child(field, *key);
      if (absl::Status st = Text(*key, child); !st.ok()) return st;
      absl::StatusOr<json> v = Value(s.fields().at(*key), child, depth);
      if (!v.ok()) return v.status();
      out[*key] = *std::move(v);
    }
    return out;
  }

 private:
  const int64_t max_bytes_;
  int64_t used_ = 0;
};

absl::StatusOr<json> Message(const v1::ChatMessage& m, const std::string& field, Converter& c) {
  const std::string& role = m.role();
  if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
    return Invalid(field + ".role",
                   absl::StrCat("unknown role '", models::IsValidUtf8(role) ? role : "?",
                                "' (expected system, user, assistant or tool)"));
  }
  if (absl::Status s = c.Text(m.content(), field + ".content"); !s.ok()) return s;
  json out = {{"role", role}};
  // OpenAI sends content null beside tool calls, and templates test for it.
  out["content"] = !m.has_content() && m.tool_calls_size() > 0 ? json(nullptr) : json(m.content());
  if (m.has_name()) {
    if (absl::Status s = c.Text(m.name(), field + ".name"); !s.ok()) return s;
    out["name"] = m.name();
  }
  if (m.has_tool_call_id()) {
    if (absl::Status s = c.Text(m.tool_call_id(), field + ".tool_call_id"); !s.ok()) return s;
    out["tool_call_id"] = m.tool_call_id();
  }
  if (m.has_reasoning_content()) {
    if (absl::Status s = c.Text(m.reasoning_content(), field + ".reasoning_content"); !s.ok()) {
      return s;
    }
    out["reasoning_content"] = m.reasoning_content();
  }
  if (m.tool_calls_size() > 0) {
    json calls = json::array();
    for (int i = 0; i < m.tool_calls_size(); ++i) {
      absl::StatusOr<json> call =
          c.Struct(m.tool_calls(i), absl::StrCat(field, ".tool_calls[", i, "]"), 1);
      if (!call.ok()) return call.status();
      calls.push_back(*std::move(call));
    }
    out["tool_calls"] = std::move(calls);
  }
  return out;
}

// tools / documents: a list of objects, or None when the request has none.
absl::StatusOr<json> Objects(const google::protobuf::RepeatedPtrField<google::protobuf::Struct>& in,
                             const std::string& field, Converter& c) {
  if (in.empty()) return json(nullptr);
  json out = json::array();
  for (int i = 0; i < in.size(); ++i) {
    absl::StatusOr<json> o = c.Struct(in[i], absl::StrCat(field, "[", i, "]"), 1);
    if (!o.ok()) return o.status();
    out.push_back(*std::move(o));
  }
  return out;
}

}  // namespace

absl::StatusOr<ChatVariables> BuildChatVariables(const v1::ChatRequest& request,
                                                 const models::TokenizerConfig& tokenizer,
                                                 int64_t max_bytes) {
  if (request.messages().empty()) return Invalid("messages", "at least one message is needed");
  Converter c(max_bytes);
  ChatVariables v;
  json messages = json::array();
  for (int i = 0; i < request.messages_size(); ++i) {
    absl::StatusOr<json> m = Message(request.messages(i), absl::StrCat("messages[", i, "]"), c);
    if (!m.ok()) return m.status();
    messages.push_back(*std::move(m));
  }
  v.untrusted["messages"] = std::move(messages);
  for (const auto& [name, field] :
       {std::pair{"tools", &request.tools()}, std::pair{"documents", &request.documents()}}) {
    absl::StatusOr<json> list = Objects(*field, name, c);
    if (!list.ok()) return list.status();
    v.untrusted[name] = *std::move(list);
  }
  if (request.has_chat_template_kwargs()) {
    absl::StatusOr<json> kwargs =
        c.Struct(request.chat_template_kwargs(), "chat_template_kwargs", 1);
    if (!kwargs.ok()) return kwargs.status();
    for (auto it = kwargs->begin(); it != kwargs->end(); ++it) {
      for (const char* reserved : kServerVariables) {
        if (it.key() == reserved) {
          return Invalid(Child("chat_template_kwargs", it.key()),
                         "names a variable the server sets");
        }
      }
      v.untrusted[it.key()] = it.value();
    }
  }
  v.trusted["add_generation_prompt"] =
      !request.has_add_generation_prompt() || request.add_generation_prompt();
  v.trusted["bos_token"] = tokenizer.bos_token;
  v.trusted["eos_token"] = tokenizer.eos_token;
  if (!tokenizer.unk_token.empty()) v.trusted["unk_token"] = tokenizer.unk_token;
  if (!tokenizer.pad_token.empty()) v.trusted["pad_token"] = tokenizer.pad_token;
  return v;
}

absl::StatusOr<json> ChatToolsJson(const v1::ChatRequest& request, int64_t max_bytes) {
  Converter c(max_bytes);
  return Objects(request.tools(), "tools", c);
}

}  // namespace tandem::server
