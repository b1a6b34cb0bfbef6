#include "server/openai/openai_request.h"

#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "models/json_depth.h"
#include "models/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/openai/json_values.h"
#include "server/openai/openai_json.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status Unsupported(const std::string& field) {
  return Invalid(field, "not supported by this server");
}

// The members of one JSON object, each read at most through Get, so that what nobody read can
// be refused by name afterwards.
class Fields {
 public:
  Fields(const json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  // The member's value, or null when absent or JSON null.
  const json* Get(const std::string& key) {
    read_.insert(key);
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  // Read and dropped: parameters that change nothing tandem generates (`user`).
  void Ignore(const std::string& key) { read_.insert(key); }
  std::string Name(const std::string& key) const {
    return prefix_.empty() ? key : absl::StrCat(prefix_, ".", key);
  }
  // INVALID_ARGUMENT naming the first member nobody read (null, [] and {} pass: clients echo
  // back the fields of a response message, e.g. "refusal": null or "annotations": []).
  absl::Status CheckAllRead() const {
    for (const auto& [key, value] : object_.items()) {
      if (read_.count(key) != 0 || value.is_null()) continue;
      if ((value.is_array() || value.is_object()) && value.empty()) continue;
      return Invalid(Name(key), "unknown parameter, or one this server does not support");
    }
    return absl::OkStatus();
  }

 private:
  const json& object_;
  const std::string prefix_;
  std::set<std::string> read_;
};

absl::Status WrongType(const std::string& field, const char* want, const json& got) {
  return Invalid(field, absl::StrCat("must be ", want, ", got ", got.type_name()));
}

absl::StatusOr<std::optional<bool>> Bool(Fields& f, const std::string& key) {
  const json* v = f.Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return WrongType(f.Name(key), "a boolean", *v);
  return v->get<bool>();
}

absl::StatusOr<std::optional<double>> Number(Fields& f, const std::string& key) {
  const json* v = f.Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return WrongType(f.Name(key), "a number", *v);
  return v->get<double>();
}

// An integer JSON value; unsigned ones past int64's range become its maximum (get<int64_t>()
// would wrap them to negative numbers).
int64_t SaturatedInt64(const json& v) {
  if (!v.is_number_unsigned()) return v.get<int64_t>();
  return static_cast<int64_t>(
      std::min<uint64_t>(v.get<uint64_t>(), std::numeric_limits<int64_t>::max()));
}

absl::StatusOr<std::optional<int64_t>> Integer(Fields& f, const std::string& key) {
  const json* v = f.Get(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return SaturatedInt64(*v);
  // 16.0 is 16 (some clients send every number as a float).
  if (v->is_number_float()) {
    const double x = v->get<double>();
    if (std::trunc(x) == x && std::fabs(x) < 9.007199254740992e15) return static_cast<int64_t>(x);
  }
  return WrongType(f.Name(key), "an integer", *v);
}

absl::StatusOr<std::optional<std::string>> String(Fields& f, const std::string& key) {
  const json* v = f.Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return WrongType(f.Name(key), "a string", *v);
  return v->get<std::string>();
}

// Out-of-range values become the nearest int32, which the validation then refuses with the
// value's own bound in the message.
int32_t SaturatedInt32(int64_t x) {
  return static_cast<int32_t>(std::clamp<int64_t>(x, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

absl::Status ReadModel(Fields& f, const OpenAiRequestOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(auto model, String(f, "model"));
  if (!model) {
    return Invalid("model", absl::StrCat("required; this server serves '", options.model_name,
                                         "' (GET /v1/models)"));
  }
  if (*model != options.model_name) {
    return absl::NotFoundError(absl::StrCat("model: '", *model, "' is not served here; this ",
                                            "server serves '", options.model_name, "'"));
  }
  return absl::OkStatus();
}

absl::Status ReadStreaming(Fields& f, OpenAiRequest* out) {
  TANDEM_ASSIGN_OR_RETURN(auto stream, Bool(f, "stream"));
  out->stream = stream.value_or(false);
  if (const json* options = f.Get("stream_options")) {
    if (!out->stream) return Invalid("stream_options", "only allowed with stream: true");
    if (!options->is_object()) return WrongType("stream_options", "an object", *options);
    Fields o(*options, "stream_options");
    TANDEM_ASSIGN_OR_RETURN(auto usage, Bool(o, "include_usage"));
    out->include_usage = usage.value_or(false);
    TANDEM_RETURN_IF_ERROR(o.CheckAllRead());
  }
  return absl::OkStatus();
}

absl::Status ReadStop(Fields& f, v1::SamplingParams* out) {
  const json* stop = f.Get("stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    out->add_stop_strings(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) return WrongType("stop", "a string or an array of strings", *stop);
  for (size_t i = 0; i < stop->size(); ++i) {
    if (!(*stop)[i].is_string())
      return WrongType(absl::StrCat("stop[", i, "]"), "a string", (*stop)[i]);
    out->add_stop_strings((*stop)[i].get<std::string>());
  }
  return absl::OkStatus();
}

// logit_bias: {"token id": amount, ...}, ids as decimal strings; the ranges are the validation's.
absl::Status ReadLogitBias(Fields& f, v1::SamplingParams* out) {
  const json* bias = f.Get("logit_bias");
  if (bias == nullptr || bias->is_null()) return absl::OkStatus();
  if (!bias->is_object()) return WrongType("logit_bias", "an object of token ids", *bias);
  for (const auto& [key, value] : bias->items()) {
    int64_t token = -1;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) token = std::stoll(key);
    // logit_bias[5] as the validation names it; a key that is no id, quoted.
    const std::string field =
        absl::StrCat("logit_bias[", digits ? std::to_string(token) : json(key).dump(), "]");
    if (!digits || token > std::numeric_limits<int32_t>::max()) {
      return Invalid(field, "a key must be a token id (a decimal integer)");
    }
    if (!value.is_number()) return WrongType(field, "a number", value);
    constexpr double kFloatMax = std::numeric_limits<float>::max();
    (*out->mutable_logit_bias())[static_cast<int32_t>(token)] =
        static_cast<float>(std::clamp(value.get<double>(), -kFloatMax, kFloatMax));
  }
  return absl::OkStatus();
}

// The parameters both endpoints share: sampling, stopping, n, streaming, and those ignored.
absl::Status ReadCommon(Fields& f, int32_t default_max_tokens, OpenAiRequest* request,
                        v1::SamplingParams* out) {
  TANDEM_ASSIGN_OR_RETURN(auto max_tokens, Integer(f, "max_tokens"));
  TANDEM_ASSIGN_OR_RETURN(auto max_completion, Integer(f, "max_completion_tokens"));
  if (max_tokens && max_completion && *max_tokens != *max_completion) {
    return Invalid("max_completion_tokens", "differs from max_tokens; give one of them");
  }
  out->set_max_new_tokens(
      SaturatedInt32(max_tokens.value_or(max_completion.value_or(default_max_tokens))));
  struct FloatParam {
    const char* key;
    void (v1::SamplingParams::*set)(float);
  };
  for (const FloatParam& p :
       {FloatParam{"temperature", &v1::SamplingParams::set_temperature},
        FloatParam{"top_p", &v1::SamplingParams::set_top_p},
        FloatParam{"min_p", &v1::SamplingParams::set_min_p},
        FloatParam{"presence_penalty", &v1::SamplingParams::set_presence_penalty},
        FloatParam{"frequency_penalty", &v1::SamplingParams::set_frequency_penalty},
        FloatParam{"repetition_penalty", &v1::SamplingParams::set_repetition_penalty}}) {
    TANDEM_ASSIGN_OR_RETURN(auto value, Number(f, p.key));
    // Clamped into float's range first (casting 1e300 is undefined); the validation then
    // refuses the value with the parameter's own bounds.
    constexpr double kFloatMax = std::numeric_limits<float>::max();
    if (value) (out->*p.set)(static_cast<float>(std::clamp(*value, -kFloatMax, kFloatMax)));
  }
  TANDEM_ASSIGN_OR_RETURN(auto top_k, Integer(f, "top_k"));
  // vLLM spells "all tokens" -1; the proto 0.
  if (top_k) out->set_top_k(*top_k == -1 ? 0 : SaturatedInt32(*top_k));
  // A seed may use the whole uint64 range of the proto's field, which Integer would saturate.
  if (const json* v = f.Get("seed"); v != nullptr && v->is_number_unsigned()) {
    out->set_seed(v->get<uint64_t>());
  } else {
    TANDEM_ASSIGN_OR_RETURN(auto seed, Integer(f, "seed"));
    if (seed && *seed < 0) return Invalid("seed", absl::StrCat("must be >= 0, got ", *seed));
    if (seed) out->set_seed(static_cast<uint64_t>(*seed));
  }
  TANDEM_RETURN_IF_ERROR(ReadStop(f, out));
  TANDEM_ASSIGN_OR_RETURN(auto ignore_eos, Bool(f, "ignore_eos"));
  if (ignore_eos) out->set_ignore_eos(*ignore_eos);
  TANDEM_ASSIGN_OR_RETURN(auto skip_special, Bool(f, "skip_special_tokens"));
  if (skip_special) out->set_skip_special_tokens(*skip_special);

  TANDEM_ASSIGN_OR_RETURN(auto n, Integer(f, "n"));
  if (n && (*n < 1 || *n > engine::kMaxChoices)) {
    return Invalid("n", absl::StrCat("must be in [1, ", engine::kMaxChoices, "], got ", *n));
  }
  request->n = static_cast<int32_t>(n.value_or(1));
  request->best_of = request->n;
  TANDEM_RETURN_IF_ERROR(ReadLogitBias(f, out));
  TANDEM_RETURN_IF_ERROR(ReadStreaming(f, request));
  // Nothing generated depends on these.
  for (const char* key : {"user", "metadata", "store", "service_tier"}) f.Ignore(key);
  return absl::OkStatus();
}

absl::StatusOr<json> ParseObject(absl::string_view body) {
  if (models::JsonDepth(std::string_view(body.data(), body.size()), kMaxRequestJsonDepth) >
      kMaxRequestJsonDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body nests arrays and objects deeper than ", kMaxRequestJsonDepth, " levels"));
  }
  json parsed;
  try {
    parsed = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    // The parser says where it went wrong ("parse error at line 1, column 12: ...").
    return absl::InvalidArgumentError(absl::StrCat("the request body is not JSON: ", e.what()));
  }
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request body must be a JSON object, got ", parsed.type_name()));
  }
  return parsed;
}

absl::Status ReadContent(const json& content, const std::string& field, v1::ChatMessage* out) {
  if (content.is_string()) {
    out->set_content(content.get<std::string>());
    return absl::OkStatus();
  }
  if (!content.is_array()) return WrongType(field, "a string or an array of parts", content);
  // Text parts joined by newlines, as vLLM joins them.
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_field = absl::StrCat(field, "[", i, "]");
    if (!content[i].is_object()) return WrongType(part_field, "an object", content[i]);
    Fields part(content[i], part_field);
    const json* type = part.Get("type");
    if (type == nullptr) return Invalid(part.Name("type"), "required");
    if (*type != "text") {
      return Invalid(part.Name("type"),
                     absl::StrCat(DumpJson(*type), " parts are not supported; only \"text\""));
    }
    TANDEM_ASSIGN_OR_RETURN(auto part_text, String(part, "text"));
    if (!part_text) return Invalid(part.Name("text"), "required in a text part");
    TANDEM_RETURN_IF_ERROR(part.CheckAllRead());
    if (i > 0) text += "\n";
    text += *part_text;
  }
  out->set_content(std::move(text));
  return absl::OkStatus();
}

// prediction: {"type": "content", "content": text or text parts}, OpenAI's predicted output.
absl::Status ReadPrediction(Fields& f, std::string* out) {
  const json* prediction = f.Get("prediction");
  if (prediction == nullptr) return absl::OkStatus();
  if (!prediction->is_object()) return WrongType("prediction", "an object", *prediction);
  Fields p(*prediction, "prediction");
  TANDEM_ASSIGN_OR_RETURN(auto type, String(p, "type"));
  if (type != "content") {
    return Invalid(p.Name("type"), type ? absl::StrCat("\"", *type, "\" is not \"content\"")
                                        : std::string("required (\"content\")"));
  }
  const json* content = p.Get("content");
  if (content == nullptr) return Invalid(p.Name("content"), "required");
  v1::ChatMessage text;
  TANDEM_RETURN_IF_ERROR(ReadContent(*content, p.Name("content"), &text));
  TANDEM_RETURN_IF_ERROR(p.CheckAllRead());
  *out = text.content();
  return absl::OkStatus();
}

absl::Status ReadStructs(Fields& f, const std::string& key,
                         google::protobuf::RepeatedPtrField<google::protobuf::Struct>* out) {
  const json* list = f.Get(key);
  if (list == nullptr) return absl::OkStatus();
  if (!list->is_array()) return WrongType(f.Name(key), "an array of objects", *list);
  for (size_t i = 0; i < list->size(); ++i) {
    TANDEM_RETURN_IF_ERROR(
        ToProtoStruct((*list)[i], absl::StrCat(f.Name(key), "[", i, "]"), out->Add()));
  }
  return absl::OkStatus();
}

// An assistant message's calls. OpenAI sends each call's arguments as the text of a JSON
// object; templates write them with `tojson` or walk their items, so they get the object (as
// vLLM gives it). Arguments that are not an object's text stay text.
absl::Status ReadToolCalls(Fields& f, v1::ChatMessage* out) {
  const json* list = f.Get("tool_calls");
  if (list == nullptr) return absl::OkStatus();
  if (!list->is_array()) return WrongType(f.Name("tool_calls"), "an array of objects", *list);
  for (size_t i = 0; i < list->size(); ++i) {
    json call = (*list)[i];
    if (call.is_object() && call.contains("function") && call["function"].is_object()) {
      json& arguments = call["function"]["arguments"];
      // Deeper than the body may nest, it stays text (converting it would recurse per level).
      if (arguments.is_string() &&
          models::JsonDepth(arguments.get_ref<const std::string&>(), kMaxRequestJsonDepth) <=
              kMaxRequestJsonDepth) {
        const std::string text = arguments.get<std::string>();
        json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_discarded() && parsed.is_object()) arguments = std::move(parsed);
      } else if (arguments.is_null()) {
        call["function"].erase("arguments");
      }
    }
    TANDEM_RETURN_IF_ERROR(ToProtoStruct(call, absl::StrCat(f.Name("tool_calls"), "[", i, "]"),
                                         out->add_tool_calls()));
  }
  return absl::OkStatus();
}

absl::Status ReadMessage(const json& message, const std::string& field, v1::ChatMessage* out) {
  if (!message.is_object()) return WrongType(field, "an object", message);
  Fields f(message, field);
  TANDEM_ASSIGN_OR_RETURN(auto role, String(f, "role"));
  if (role) out->set_role(*role);
  if (const json* content = f.Get("content")) {
    TANDEM_RETURN_IF_ERROR(ReadContent(*content, f.Name("content"), out));
  }
  TANDEM_ASSIGN_OR_RETURN(auto name, String(f, "name"));
  if (name) out->set_name(*name);
  TANDEM_ASSIGN_OR_RETURN(auto tool_call_id, String(f, "tool_call_id"));
  if (tool_call_id) out->set_tool_call_id(*tool_call_id);
  // What an answer's reasoning_content was, sent back with it.
  TANDEM_ASSIGN_OR_RETURN(auto reasoning, String(f, "reasoning_content"));
  if (reasoning) out->set_reasoning_content(*reasoning);
  TANDEM_RETURN_IF_ERROR(ReadToolCalls(f, out));
  return f.CheckAllRead();
}

// tool_choice: "none", "auto" (the default with tools), "required", or {"type": "function",
// "function": {"name": ...}}.
absl::Status ReadToolChoice(Fields& f, const nlohmann::ordered_json& tools, ToolCallFormat format,
                            ToolUse* out) {
  TANDEM_ASSIGN_OR_RETURN(auto parallel, Bool(f, "parallel_tool_calls"));
  const json* choice = f.Get("tool_choice");
  ToolChoice mode = ToolChoice::kAuto;
  std::string function;
  if (choice != nullptr && choice->is_string()) {
    const std::string name = choice->get<std::string>();
    if (name == "none") {
      mode = ToolChoice::kNone;
    } else if (name == "required") {
      mode = ToolChoice::kRequired;
    } else if (name != "auto") {
      return Invalid("tool_choice",
                     absl::StrCat("must be \"none\", \"auto\", \"required\" or {\"type\": "
                                  "\"function\", \"function\": {\"name\": ...}}, got \"",
                                  name, "\""));
    }
  } else if (choice != nullptr) {
    if (!choice->is_object()) return WrongType("tool_choice", "a string or an object", *choice);
    Fields c(*choice, "tool_choice");
    TANDEM_ASSIGN_OR_RETURN(auto type, String(c, "type"));
    if (type != "function") return Invalid("tool_choice.type", "must be \"function\"");
    const json* fn_json = c.Get("function");
    if (fn_json == nullptr || !fn_json->is_object()) {
      return Invalid("tool_choice.function", "required, an object with the function's name");
    }
    Fields fn(*fn_json, "tool_choice.function");
    TANDEM_ASSIGN_OR_RETURN(auto name, String(fn, "name"));
    if (!name || name->empty()) return Invalid("tool_choice.function.name", "required");
    TANDEM_RETURN_IF_ERROR(fn.CheckAllRead());
    TANDEM_RETURN_IF_ERROR(c.CheckAllRead());
    mode = ToolChoice::kFunction;
    function = *name;
  }
  TANDEM_ASSIGN_OR_RETURN(*out, ResolveToolUse(mode, function, "tool_choice.function.name",
                                               parallel.value_or(true), tools, format));
  return absl::OkStatus();
}

absl::Status ReadTools(Fields& f, const OpenAiRequestOptions& options, absl::string_view body,
                       OpenAiRequest* request) {
  v1::ChatRequest* out = &request->chat;
  TANDEM_RETURN_IF_ERROR(ReadStructs(f, "tools", out->mutable_tools()));
  // Kept in the client's order: a forced call's arguments follow its schema's property order.
  nlohmann::ordered_json tools;
  if (out->tools_size() > 0)
    tools = nlohmann::ordered_json::parse(body.begin(), body.end())["tools"];
  TANDEM_RETURN_IF_ERROR(
      ReadToolChoice(f, std::move(tools), options.tool_call_format, &request->tool_use));
  TANDEM_RETURN_IF_ERROR(ReadStructs(f, "documents", out->mutable_documents()));
  if (const json* kwargs = f.Get("chat_template_kwargs")) {
    return ToProtoStruct(*kwargs, "chat_template_kwargs", out->mutable_chat_template_kwargs());
  }
  return absl::OkStatus();
}

// response_format: text (the default), json_object, or json_schema with its schema. The schema
// is taken from `body` again, in an order-keeping parse: `json` sorts object members, and the
// order of a schema's properties is the order the model writes them in.
absl::Status ReadResponseFormat(const json* format, absl::string_view body,
                                v1::SamplingParams* sampling) {
  if (format == nullptr) return absl::OkStatus();
  if (!format->is_object()) return WrongType("response_format", "an object", *format);
  Fields f(*format, "response_format");
  TANDEM_ASSIGN_OR_RETURN(auto type, String(f, "type"));
  if (!type) return Invalid("response_format.type", "required");
  if (*type == "json_object") {
    sampling->set_json_object(true);
  } else if (*type == "json_schema") {
    const json* spec = f.Get("json_schema");
    if (spec == nullptr) return Invalid("response_format.json_schema", "required");
    if (!spec->is_object()) return WrongType(f.Name("json_schema"), "an object", *spec);
    Fields s(*spec, "response_format.json_schema");
    TANDEM_ASSIGN_OR_RETURN(auto name, String(s, "name"));
    TANDEM_ASSIGN_OR_RETURN(auto description, String(s, "description"));
    TANDEM_ASSIGN_OR_RETURN(auto strict, Bool(s, "strict"));  // tandem is always strict
    (void)name, (void)description, (void)strict;
    if (s.Get("schema") == nullptr) return Invalid("response_format.json_schema.schema", "required");
    TANDEM_RETURN_IF_ERROR(s.CheckAllRead());
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body.begin(), body.end());
    sampling->set_json_schema(ordered["response_format"]["json_schema"]["schema"].dump());
  } else if (*type != "text") {
    return Invalid("response_format.type",
                   absl::StrCat("must be \"text\", \"json_object\" or \"json_schema\", got \"",
                                *type, "\""));
  }
  return f.CheckAllRead();
}

absl::Status ReadChat(const json& messages, Fields& f, const OpenAiRequestOptions& options,
                      absl::string_view body, OpenAiRequest* request) {
  v1::ChatRequest& chat = request->chat;
  if (!messages.is_array()) return WrongType("messages", "an array of messages", messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(
        ReadMessage(messages[i], absl::StrCat("messages[", i, "]"), chat.add_messages()));
  }
  TANDEM_RETURN_IF_ERROR(
      ReadCommon(f, options.default_chat_max_tokens, request, chat.mutable_sampling()));
  if (chat.sampling().max_new_tokens() == 0) {
    return Invalid("max_tokens", "must be at least 1: a chat answer has no prompt to echo");
  }
  TANDEM_RETURN_IF_ERROR(ReadTools(f, options, body, request));
  TANDEM_RETURN_IF_ERROR(ReadPrediction(f, chat.mutable_prediction()));
  TANDEM_ASSIGN_OR_RETURN(auto generation_prompt, Bool(f, "add_generation_prompt"));
  if (generation_prompt) chat.set_add_generation_prompt(*generation_prompt);
  TANDEM_ASSIGN_OR_RETURN(auto logprobs, Bool(f, "logprobs"));
  TANDEM_ASSIGN_OR_RETURN(auto top_logprobs, Integer(f, "top_logprobs"));
  if (top_logprobs.value_or(0) != 0 && !logprobs.value_or(false)) {
    return Invalid("top_logprobs", "only allowed with logprobs: true");
  }
  if (logprobs.value_or(false)) chat.mutable_sampling()->set_logprobs(true);
  // Its range is the validation's (sampling.top_logprobs, which the error renames back).
  if (top_logprobs) chat.mutable_sampling()->set_top_logprobs(SaturatedInt32(*top_logprobs));
  TANDEM_RETURN_IF_ERROR(
      ReadResponseFormat(f.Get("response_format"), body, chat.mutable_sampling()));
  if (request->tool_use.forced &&
      chat.sampling().response_format_case() != v1::SamplingParams::RESPONSE_FORMAT_NOT_SET) {
    return Invalid("response_format",
                   "cannot be combined with a tool_choice that forces tool calls");
  }
  return absl::OkStatus();
}

// One prompt, named `field`: a string or an array of token ids.
absl::Status ReadOnePrompt(const json& prompt, const std::string& field, v1::GenerateRequest* out) {
  if (prompt.is_string()) {
    out->set_text(prompt.get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt.is_array()) return WrongType(field, "a string or an array of token ids", prompt);
  out->mutable_token_ids();  // even when empty, which the validation refuses as such
  for (size_t i = 0; i < prompt.size(); ++i) {
    const json& id = prompt[i];
    if (!id.is_number_integer() || SaturatedInt64(id) != SaturatedInt32(SaturatedInt64(id))) {
      return Invalid(absl::StrCat(field, "[", i, "]"), "must be a token id (an integer)");
    }
    out->mutable_token_ids()->add_ids(static_cast<int32_t>(SaturatedInt64(id)));
  }
  return absl::OkStatus();
}

// A string, an array of token ids, or a list of several of either (each its own prompt, as
// OpenAI takes a batch): the first into request->generate, the others' prompts alone into
// request->more_prompts.
absl::Status ReadPrompts(const json& prompt, OpenAiRequest* request) {
  request->prompt_list = prompt.is_array() && !prompt.empty() && !prompt[0].is_number();
  if (!request->prompt_list) return ReadOnePrompt(prompt, "prompt", &request->generate);
  if (prompt.size() > static_cast<size_t>(kMaxPromptsPerRequest)) {
    return Invalid("prompt", absl::StrCat("a list of ", prompt.size(), " prompts; at most ",
                                          kMaxPromptsPerRequest, " per request"));
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    // A list holds prompts of one kind: strings, or arrays of ids.
    if (!prompt[i].is_string() && !prompt[i].is_array()) {
      return WrongType(absl::StrCat("prompt[", i, "]"),
                       "a string or an array of token ids, as the list's other prompts", prompt[i]);
    }
    if (prompt[i].type() != prompt[0].type()) {
      return Invalid(absl::StrCat("prompt[", i, "]"),
                     "a list of prompts holds only strings or only arrays of token ids");
    }
    v1::GenerateRequest* into = i == 0 ? &request->generate : &request->more_prompts.emplace_back();
    TANDEM_RETURN_IF_ERROR(ReadOnePrompt(prompt[i], absl::StrCat("prompt[", i, "]"), into));
  }
  return absl::OkStatus();
}

absl::Status ReadCompletion(const json& prompt, Fields& f, OpenAiRequest* request) {
  v1::GenerateRequest& generate = request->generate;
  TANDEM_RETURN_IF_ERROR(ReadPrompts(prompt, request));
  TANDEM_RETURN_IF_ERROR(
      ReadCommon(f, /*default_max_tokens=*/16, request, generate.mutable_sampling()));
  TANDEM_ASSIGN_OR_RETURN(auto add_special, Bool(f, "add_special_tokens"));
  if (add_special) generate.set_add_special_tokens(*add_special);
  TANDEM_RETURN_IF_ERROR(ReadPrediction(f, generate.mutable_prediction()));
  // logprobs: N asks for the chosen token's logprob and the N likeliest tokens' (0 too).
  TANDEM_ASSIGN_OR_RETURN(auto logprobs, Integer(f, "logprobs"));
  if (logprobs) {
    constexpr int kMaxTop = engine::SampleResult::kMaxTop;
    if (*logprobs < 0 || *logprobs > kMaxTop) {
      return Invalid("logprobs", absl::StrCat("must be in [0, ", kMaxTop, "], got ", *logprobs));
    }
    generate.mutable_sampling()->set_logprobs(true);
    generate.mutable_sampling()->set_top_logprobs(static_cast<int32_t>(*logprobs));
  }
  // echo: the answer's text starts with the prompt; with logprobs, the prompt's tokens are
  // scored too (the first has none), as evaluation harnesses read them.
  TANDEM_ASSIGN_OR_RETURN(auto echo, Bool(f, "echo"));
  request->echo = echo.value_or(false);
  // max_tokens 0 answers with the prompt alone: only an echo has anything to say then.
  const bool generates_nothing = generate.sampling().max_new_tokens() == 0;
  if (generates_nothing && !request->echo) {
    return Invalid("max_tokens",
                   "0 generates nothing, which only an echo of the prompt asks for (with "
                   "\"logprobs\", to score it): send \"echo\": true");
  }
  // The engine runs a request that generates nothing only to score its prompt; without logprobs
  // the scores are not shown.
  if (request->echo && (logprobs || generates_nothing)) {
    generate.mutable_sampling()->set_prompt_logprobs(static_cast<int32_t>(logprobs.value_or(0)));
  }
  TANDEM_ASSIGN_OR_RETURN(auto best_of, Integer(f, "best_of"));
  if (best_of) {
    if (*best_of < request->n || *best_of > engine::kMaxChoices) {
      return Invalid("best_of", absl::StrCat("must be in [n, ", engine::kMaxChoices, "] (n is ",
                                             request->n, "), got ", *best_of));
    }
    request->best_of = static_cast<int32_t>(*best_of);
    if (request->best_of > request->n && request->stream) {
      return Invalid("best_of",
                     "the best answers are known only once all are generated, so they cannot be "
                     "streamed; send \"stream\": false");
    }
  }
  TANDEM_ASSIGN_OR_RETURN(auto suffix, String(f, "suffix"));
  if (!suffix.value_or("").empty()) return Unsupported("suffix");
  const size_t prompts = 1 + request->more_prompts.size();
  if (prompts * static_cast<size_t>(request->best_of) >
      static_cast<size_t>(kMaxChoicesPerRequest)) {
    return Invalid("prompt", absl::StrCat(prompts, " prompts of ", request->best_of,
                                          " choices each are more than the ", kMaxChoicesPerRequest,
                                          " choices one request may ask for"));
  }
  // The other prompts are the same request for their own prompt: they keep only the prompt, and
  // how to tokenize it.
  if (generate.has_add_special_tokens()) {
    for (v1::GenerateRequest& other : request->more_prompts) {
      other.set_add_special_tokens(generate.add_special_tokens());
    }
  }
  return absl::OkStatus();
}

// Both endpoints: a JSON object naming the served model, with its main member (`messages` or
// `prompt`) and the rest as `read` takes them, and no member left unread.
template <class Read>
absl::StatusOr<OpenAiRequest> ParseRequest(absl::string_view body,
                                           const OpenAiRequestOptions& options,
                                           const std::string& main, Read read) {
  TANDEM_ASSIGN_OR_RETURN(json object, ParseObject(body));
  Fields f(object, "");
  TANDEM_RETURN_IF_ERROR(ReadModel(f, options));
  const json* value = f.Get(main);
  if (value == nullptr) return Invalid(main, "required");
  OpenAiRequest request;
  TANDEM_RETURN_IF_ERROR(read(*value, f, &request));
  TANDEM_RETURN_IF_ERROR(f.CheckAllRead());
  return request;
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(absl::string_view body,
                                                         const OpenAiRequestOptions& options) {
  return ParseRequest(body, options, "messages",
                      [&](const json& messages, Fields& f, OpenAiRequest* request) {
                        return ReadChat(messages, f, options, body, request);
                      });
}

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(absl::string_view body,
                                                     const OpenAiRequestOptions& options) {
  return ParseRequest(body, options, "prompt", ReadCompletion);
}

}  // namespace tandem::server
