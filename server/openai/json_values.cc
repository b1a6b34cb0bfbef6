#include "server/openai/json_values.h"

#include "absl/strings/str_cat.h"

namespace tandem::server {

void ToProtoValue(const nlohmann::json& value, google::protobuf::Value* out) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      out->set_null_value(google::protobuf::NULL_VALUE);
      return;
    case nlohmann::json::value_t::boolean:
      out->set_bool_value(value.get<bool>());
      return;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      out->set_number_value(value.get<double>());
      return;
    case nlohmann::json::value_t::string:
      out->set_string_value(value.get_ref<const std::string&>());
      return;
    case nlohmann::json::value_t::array: {
      google::protobuf::ListValue* list = out->mutable_list_value();
      for (const nlohmann::json& element : value) ToProtoValue(element, list->add_values());
      return;
    }
    case nlohmann::json::value_t::object: {
      auto* fields = out->mutable_struct_value()->mutable_fields();
      for (const auto& [key, element] : value.items()) ToProtoValue(element, &(*fields)[key]);
      return;
    }
    case nlohmann::json::value_t::binary:
      out->set_null_value(google::protobuf::NULL_VALUE);  // the parser never makes these
      return;
  }
}

absl::Status ToProtoStruct(const nlohmann::json& value, const std::string& field,
                           google::protobuf::Struct* out) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be an object, got ", value.type_name()));
  }
  google::protobuf::Value wrapped;
  ToProtoValue(value, &wrapped);
  *out = std::move(*wrapped.mutable_struct_value());
  return absl::OkStatus();
}

}  // namespace tandem::server
