#include "models/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/mapped_file.h"

namespace tandem::models {
namespace {

// Abseil here is built with its own string_view type; bridge from std::string_view.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kAlign = 64;
// numpy leaves room for the first dimension to grow to this many digits in place.
constexpr size_t kGrowthAxisMaxDigits = 21;

absl::Status Error(std::string_view path, std::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(path), ": ", Sv(msg)));
}

// Python's repr of a tuple of ints: "()", "(5,)", "(2, 3)".
std::string TupleRepr(std::span<const int64_t> shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

// A cursor over the header's Python dict literal; accepts exactly what numpy writes for simple
// dtypes (string, bool and tuple-of-int values) with arbitrary spacing.
class DictParser {
 public:
  explicit DictParser(std::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  std::optional<std::string> String() {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return std::nullopt;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  std::optional<bool> Bool() {
    SkipSpace();
    for (auto [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    return std::nullopt;
  }
  std::optional<int64_t> Int() {
    SkipSpace();
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const int digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) return std::nullopt;
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long literal
    return value;
  }
  // "(a, b, ...)" with an optional trailing comma.
  std::optional<std::vector<int64_t>> Tuple() {
    if (!Consume('(')) return std::nullopt;
    std::vector<int64_t> out;
    while (!Consume(')')) {
      std::optional<int64_t> v = Int();
      if (!v.has_value()) return std::nullopt;
      out.push_back(*v);
      if (!Consume(',') && !Peek(')')) return std::nullopt;
    }
    return out;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

absl::StatusOr<NpyHeader> ParseHeaderDict(std::string_view text, std::string_view path) {
  DictParser p(text);
  NpyHeader header;
  bool have_descr = false, have_order = false, have_shape = false;
  const auto bad = [&](std::string_view what) {
    std::string shown(text.substr(0, 200));
    return Error(
        path, absl::StrCat("malformed header (", Sv(what), "): \"", absl::CHexEscape(shown), "\""));
  };
  if (!p.Consume('{')) return bad("no opening brace");
  while (!p.Consume('}')) {
    std::optional<std::string> key = p.String();
    if (!key.has_value() || !p.Consume(':')) return bad("expected a quoted key and ':'");
    if (*key == "descr") {
      std::optional<std::string> v = p.String();
      if (!v.has_value()) return bad("'descr' is not a string");
      header.descr = *std::move(v);
      have_descr = true;
    } else if (*key == "fortran_order") {
      std::optional<bool> v = p.Bool();
      if (!v.has_value()) return bad("'fortran_order' is not True or False");
      header.fortran_order = *v;
      have_order = true;
    } else if (*key == "shape") {
      std::optional<std::vector<int64_t>> v = p.Tuple();
      if (!v.has_value()) return bad("'shape' is not a tuple of non-negative integers");
      header.shape = *std::move(v);
      have_shape = true;
    } else {
      return bad(absl::StrCat("unexpected key '", absl::CHexEscape(*key), "'"));
    }
    if (!p.Consume(',') && !p.Peek('}')) return bad("expected ',' or '}'");
  }
  if (!p.AtEnd()) return bad("trailing characters after the dict");
  if (!have_descr || !have_order || !have_shape) {
    return bad("needs 'descr', 'fortran_order' and 'shape'");
  }
  return header;
}

}  // namespace

std::string NpyFloat32Header(std::span<const int64_t> shape) {
  std::string dict =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': ", TupleRepr(shape), ", }");
  if (!shape.empty()) {
    const size_t digits = absl::StrCat(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  // Version 1.0 stores the header length in 2 bytes; 2.0 in 4 (only for huge ranks).
  const size_t hlen = dict.size() + 1;  // + '\n'
  // Like numpy, this pads a full 64 bytes when the header already ends on a boundary.
  const auto padding = [hlen](size_t prefix) { return kAlign - (prefix + hlen) % kAlign; };
  const bool v1 = hlen + padding(kMagic.size() + 2 + 2) <= 65535;
  const size_t len_bytes = v1 ? 2 : 4;
  const size_t pad = padding(kMagic.size() + 2 + len_bytes);
  const uint32_t stored_len = static_cast<uint32_t>(hlen + pad);

  std::string out(kMagic);
  out.push_back(static_cast<char>(v1 ? 1 : 2));
  out.push_back(0);
  for (size_t i = 0; i < len_bytes; ++i) out.push_back(static_cast<char>(stored_len >> (8 * i)));
  out += dict;
  out.append(pad, ' ');
  out.push_back('\n');
  return out;
}

absl::Status WriteNpy(const std::string& path, std::span<const int64_t> shape,
                      std::span<const float> data) {
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(d), &count)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": invalid shape ", TupleRepr(shape), " for .npy"));
    }
  }
  if (count != data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": shape ", TupleRepr(shape), " holds ",
                                                   count, " floats but ", data.size(),
                                                   " were given"));
  }
  const std::string header = NpyFloat32Header(shape);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    const int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat(path, ": cannot create: ", std::strerror(err)));
  }
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  if (ok && !data.empty())
    ok = std::fwrite(data.data(), sizeof(float), data.size(), f) == data.size();
  const int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(path.c_str());
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat(path, ": write failed: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<NpyArray> ParseNpy(std::span<const uint8_t> bytes, std::string_view path) {
  const std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (all.substr(0, kMagic.size()) != kMagic) {
    return Error(path, "not a .npy file (bad magic)");
  }
  if (bytes.size() < kMagic.size() + 2) return Error(path, "truncated .npy version");
  const int major = bytes[6], minor = bytes[7];
  size_t len_bytes;
  if (major == 1 && minor == 0) {
    len_bytes = 2;
  } else if ((major == 2 || major == 3) && minor == 0) {
    len_bytes = 4;
  } else {
    return Error(path, absl::StrCat("unsupported .npy format version ", major, ".", minor));
  }
  const size_t prefix = 8 + len_bytes;
  if (bytes.size() < prefix) return Error(path, "truncated .npy header length");
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= uint64_t{bytes[8 + i]} << (8 * i);
  if (header_len > bytes.size() - prefix) {
    return Error(path, absl::StrCat(".npy header length ", header_len, " exceeds the file"));
  }
  absl::StatusOr<NpyHeader> header = ParseHeaderDict(all.substr(prefix, header_len), path);
  if (!header.ok()) return header.status();

  size_t item_size;
  if (header->descr == "<f4") {
    item_size = 4;
  } else if (header->descr == "<f8") {
    item_size = 8;
  } else {
    return Error(path, absl::StrCat("unsupported dtype '", absl::CHexEscape(header->descr),
                                    "' (only '<f4' and '<f8' are read)"));
  }
  if (header->fortran_order) {
    return Error(path, "Fortran-order arrays are not supported (save a C-order array)");
  }
  uint64_t count = 1;
  for (int64_t d : header->shape) {
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count)) {
      return Error(path, absl::StrCat("shape ", TupleRepr(header->shape), " overflows"));
    }
  }
  const uint64_t data_bytes = bytes.size() - prefix - header_len;
  uint64_t needed;
  if (__builtin_mul_overflow(count, item_size, &needed) || needed != data_bytes) {
    return Error(path, absl::StrCat("shape ", TupleRepr(header->shape), " of ", header->descr,
                                    " needs ", count, " x ", item_size,
                                    " bytes but the file holds ", data_bytes, " after the header"));
  }
  NpyArray out;
  out.shape = std::move(header->shape);
  out.data.resize(count);
  const uint8_t* src = bytes.data() + prefix + header_len;
  if (item_size == 4) {
    if (count > 0) std::memcpy(out.data.data(), src, count * 4);
  } else {
    for (uint64_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, sizeof(v));
      out.data[i] = static_cast<float>(v);
    }
  }
  return out;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  return ParseNpy((*file)->bytes(), path);
}

}  // namespace tandem::models
