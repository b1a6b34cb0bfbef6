#include "models/tokenizer_config.h"

#include <exception>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "models/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem::models {
namespace {

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// bos_token etc. are a string, an {"content": "..."} object (AddedToken), or null.
absl::Status ReadTokenString(const nlohmann::json& j, const char* key, const std::string& path,
                             std::string* out) {
  if (!j.contains(key) || j[key].is_null()) return absl::OkStatus();
  const nlohmann::json& v = j[key];
  if (v.is_string()) {
    *out = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    *out = v["content"].get<std::string>();
  } else {
    return Bad(path, absl::StrCat("\"", key, "\" is neither a string nor {\"content\": string}"));
  }
  return absl::OkStatus();
}

absl::Status ReadBool(const nlohmann::json& j, const char* key, const std::string& path,
                      std::optional<bool>* out) {
  if (!j.contains(key) || j[key].is_null()) return absl::OkStatus();
  if (!j[key].is_boolean()) return Bad(path, absl::StrCat("\"", key, "\" is not a boolean"));
  *out = j[key].get<bool>();
  return absl::OkStatus();
}

absl::StatusOr<TokenizerConfig> Parse(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return Bad(path, "top level is not an object");
  TokenizerConfig c;
  TANDEM_RETURN_IF_ERROR(ReadBool(j, "add_bos_token", path, &c.add_bos_token));
  TANDEM_RETURN_IF_ERROR(ReadBool(j, "add_eos_token", path, &c.add_eos_token));
  TANDEM_RETURN_IF_ERROR(
      ReadBool(j, "clean_up_tokenization_spaces", path, &c.clean_up_tokenization_spaces));
  TANDEM_RETURN_IF_ERROR(ReadTokenString(j, "bos_token", path, &c.bos_token));
  TANDEM_RETURN_IF_ERROR(ReadTokenString(j, "eos_token", path, &c.eos_token));
  TANDEM_RETURN_IF_ERROR(ReadTokenString(j, "pad_token", path, &c.pad_token));
  TANDEM_RETURN_IF_ERROR(ReadTokenString(j, "unk_token", path, &c.unk_token));
  if (j.contains("chat_template")) {
    const nlohmann::json& t = j["chat_template"];
    if (t.is_string()) {
      c.chat_template = t.get<std::string>();
    } else if (t.is_array()) {
      for (const nlohmann::json& e : t) {
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
            e["template"].is_string()) {
          c.chat_template = e["template"].get<std::string>();
        }
      }
    } else if (!t.is_null()) {
      return Bad(path, "\"chat_template\" is neither a string nor a list");
    }
  }
  if (j.contains("added_tokens_decoder")) {
    const nlohmann::json& d = j["added_tokens_decoder"];
    if (!d.is_object()) return Bad(path, "\"added_tokens_decoder\" is not an object");
    for (const auto& [key, value] : d.items()) {
      int32_t id;
      if (!absl::SimpleAtoi(key, &id) || id < 0) {
        return Bad(path, absl::StrCat("added_tokens_decoder key \"", key, "\" is not an id"));
      }
      if (!value.is_object() || !value.contains("content") || !value["content"].is_string()) {
        return Bad(path, absl::StrCat("added_tokens_decoder[", key, "] has no string content"));
      }
      TokenizerConfig::AddedToken t;
      t.content = value["content"].get<std::string>();
      if (value.contains("special") && value["special"].is_boolean()) {
        t.special = value["special"].get<bool>();
      }
      c.added_tokens[id] = std::move(t);
    }
  }
  return c;
}


}  // namespace

absl::StatusOr<nlohmann::json> ReadTokenizerJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  nlohmann::json j = nlohmann::json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(path, "invalid JSON (truncated or corrupt?)");
  return j;
}

absl::StatusOr<TokenizerConfig> ReadTokenizerConfig(const std::string& path) {
  absl::StatusOr<nlohmann::json> j = ReadTokenizerJson(path);
  if (!j.ok()) return j.status();
  try {
    return Parse(*j, path);
  } catch (const std::exception& e) {
    return Bad(path, e.what());
  }
}

}  // namespace tandem::models
