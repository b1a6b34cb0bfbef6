#include "engine/json_number_texts.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tandem::engine {
namespace {

using json = nlohmann::ordered_json;

// Builds the document as the DOM parser would, tracking where each value goes.
class Builder : public nlohmann::json_sax<json> {
 public:
  JsonWithNumberTexts& out() { return out_; }
  const std::string& error() const { return error_; }

  bool null() override { return Add(nullptr); }
  bool boolean(bool value) override { return Add(value); }
  bool number_integer(number_integer_t value) override { return Add(value); }
  bool number_unsigned(number_unsigned_t value) override { return Add(value); }
  bool number_float(number_float_t value, const string_t& text) override {
    out_.number_texts[NextPointer()] = text;
    return Add(value);
  }
  bool string(string_t& value) override { return Add(std::move(value)); }
  bool binary(binary_t& value) override { return Add(json::binary(std::move(value))); }
  bool start_object(std::size_t) override { return Open(json::object()); }
  bool key(string_t& key) override {
    frames_.back().key = std::move(key);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(json::array()); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return false;
  }

 private:
  struct Frame {
    json* container;
    std::string pointer;
    std::string key;   // objects: the member being read
    size_t index = 0;  // arrays: the next element's
  };

  // Where the next value goes.
  std::string NextPointer() const {
    if (frames_.empty()) return "";
    const Frame& f = frames_.back();
    return absl::StrCat(f.pointer, "/",
                        f.container->is_array() ? std::to_string(f.index) : PointerSegment(f.key));
  }

  // Places `value` and returns where it went.
  json* Place(json value) {
    if (frames_.empty()) {
      out_.value = std::move(value);
      return &out_.value;
    }
    Frame& f = frames_.back();
    if (f.container->is_array()) {
      ++f.index;
      f.container->push_back(std::move(value));
      return &f.container->back();
    }
    json& slot = (*f.container)[f.key];
    slot = std::move(value);
    return &slot;
  }

  bool Add(json value) {
    Place(std::move(value));
    return true;
  }

  // A container stays where it was placed while it is open: its parent grows only after it.
  bool Open(json empty) {
    std::string pointer = NextPointer();
    json* container = Place(std::move(empty));
    frames_.push_back({container, std::move(pointer), "", 0});
    return true;
  }

  bool Close() {
    frames_.pop_back();
    return true;
  }

  JsonWithNumberTexts out_;
  std::vector<Frame> frames_;
  std::string error_;
};

}  // namespace

std::string PointerSegment(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

absl::StatusOr<JsonWithNumberTexts> ParseJsonWithNumberTexts(std::string_view text) {
  Builder builder;
  const bool ok = json::sax_parse(text.begin(), text.end(), &builder);
  if (!ok) return absl::InvalidArgumentError(builder.error());
  return std::move(builder.out());
}

std::string DumpWithNumberTexts(const json& value, const std::string& pointer,
                                const std::map<std::string, std::string>& number_texts) {
  if (value.is_number_float()) {
    auto it = number_texts.find(pointer);
    return it != number_texts.end() ? it->second : value.dump();
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ",";
      out += DumpWithNumberTexts(value[i], absl::StrCat(pointer, "/", i), number_texts);
    }
    return out + "]";
  }
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      if (!first) out += ",";
      first = false;
      out += json(key).dump() + ":" +
             DumpWithNumberTexts(member, absl::StrCat(pointer, "/", PointerSegment(key)),
                                 number_texts);
    }
    return out + "}";
  }
  return value.dump();
}

}  // namespace tandem::engine
