#include "models/safetensors.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/json_depth.h"
#include "nlohmann/json.hpp"

namespace tandem::models {
namespace {

// Abseil here is built with its own string_view type; bridge from std::string_view.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

using Json = nlohmann::json;

// Legitimate headers nest three deep (root / tensor / shape). A small cap keeps a hostile
// header from building a huge tree before the structure checks reject it.
constexpr int kMaxJsonDepth = 16;

// Tensor names and dtype strings come from untrusted bytes: escape and bound them.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 200;
  std::string out = absl::StrCat("\"", absl::CHexEscape(Sv(s.substr(0, kMax))), "\"");
  if (s.size() > kMax) absl::StrAppend(&out, "...");
  return out;
}

absl::Status FileError(std::string_view path, std::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(path), ": ", Sv(msg)));
}

absl::Status TensorError(std::string_view path, std::string_view name, std::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(Sv(path), ": tensor ", Quote(name), ": ", Sv(msg)));
}

// A JSON value as a non-negative integer (floats, negatives and strings rejected).
bool AsNonNegative(const Json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < 0) return false;
    *out = static_cast<uint64_t>(x);
    return true;
  }
  return false;
}

std::string JsonSnippet(const Json& v) {
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
  if (s.size() > 64) s = s.substr(0, 64) + "...";
  return s;
}

absl::StatusOr<TensorInfo> ParseTensor(std::string_view path, const std::string& name,
                                       const Json& entry, uint64_t data_start, uint64_t data_size) {
  if (!entry.is_object()) {
    return TensorError(path, name, absl::StrCat("entry is not an object: ", JsonSnippet(entry)));
  }
  TensorInfo info;
  info.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) return TensorError(path, name, "missing \"dtype\"");
  if (!dtype_it->is_string()) {
    return TensorError(path, name,
                       absl::StrCat("\"dtype\" is not a string: ", JsonSnippet(*dtype_it)));
  }
  absl::StatusOr<DType> dtype = ParseDType(dtype_it->get_ref<const std::string&>());
  if (!dtype.ok()) return TensorError(path, name, std::string(dtype.status().message()));
  info.dtype = *dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) return TensorError(path, name, "missing \"shape\"");
  if (!shape_it->is_array()) {
    return TensorError(path, name,
                       absl::StrCat("\"shape\" is not an array: ", JsonSnippet(*shape_it)));
  }
  uint64_t num_elements = 1;
  for (const Json& dim_json : *shape_it) {
    uint64_t dim;
    if (!AsNonNegative(dim_json, &dim) ||
        dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(path, name,
                         absl::StrCat("shape ", JsonSnippet(*shape_it),
                                      " has a dimension that is not a non-negative integer: ",
                                      JsonSnippet(dim_json)));
    }
    info.shape.push_back(static_cast<int64_t>(dim));
    if (__builtin_mul_overflow(num_elements, dim, &num_elements) ||
        num_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(path, name,
                         absl::StrCat("shape ", JsonSnippet(*shape_it), " overflows 64 bits"));
    }
  }
  info.num_elements = static_cast<int64_t>(num_elements);
  uint64_t expected_bytes;
  if (__builtin_mul_overflow(num_elements, DTypeSize(info.dtype), &expected_bytes)) {
    return TensorError(path, name,
                       absl::StrCat("shape ", ShapeToString(info.shape), " of ",
                                    Sv(DTypeName(info.dtype)), " overflows 64 bits of bytes"));
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) return TensorError(path, name, "missing \"data_offsets\"");
  uint64_t begin, end;
  if (!offsets_it->is_array() || offsets_it->size() != 2 ||
      !AsNonNegative((*offsets_it)[0], &begin) || !AsNonNegative((*offsets_it)[1], &end)) {
    return TensorError(path, name,
                       absl::StrCat("\"data_offsets\" is not a pair of non-negative integers: ",
                                    JsonSnippet(*offsets_it)));
  }
  if (end < begin) {
    return TensorError(path, name,
                       absl::StrCat("data_offsets [", begin, ", ", end, "] end before they begin"));
  }
  if (end - begin != expected_bytes) {
    return TensorError(path, name,
                       absl::StrCat("data_offsets [", begin, ", ", end, "] hold ", end - begin,
                                    " bytes but shape ", ShapeToString(info.shape), " of ",
                                    Sv(DTypeName(info.dtype)), " needs ", expected_bytes));
  }
  if (end > data_size) {
    return TensorError(
        path, name,
        absl::StrCat("data_offsets [", begin, ", ", end, "] reach beyond the end of the data (",
                     data_size, " bytes): the file is truncated"));
  }
  info.file_offset = data_start + begin;
  info.byte_size = expected_bytes;
  return info;
}

absl::StatusOr<SafetensorsHeader> ParseUnguarded(std::span<const uint8_t> bytes,
                                                 std::string_view path) {
  if (bytes.size() < 8) {
    return FileError(path, absl::StrCat("file is ", bytes.size(),
                                        " bytes, too short for the 8-byte header length"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  const uint64_t available = bytes.size() - 8;
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return FileError(path, absl::StrCat("header length ", header_len, " exceeds the limit of ",
                                        kMaxSafetensorsHeaderBytes,
                                        " bytes (corrupt or not a safetensors file)"));
  }
  if (header_len > available) {
    return FileError(path, absl::StrCat("header length ", header_len, " exceeds the ", available,
                                        " bytes after it (truncated file?)"));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_len);
  if (JsonDepth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    return FileError(path, absl::StrCat("header JSON nests deeper than ", kMaxJsonDepth));
  }

  // nlohmann silently keeps the last of duplicated keys; a duplicated tensor name is corrupt.
  std::set<std::string> seen_keys;
  std::string duplicate;
  Json::parser_callback_t on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  Json root = Json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  if (root.is_discarded()) return FileError(path, "header is not valid JSON");
  if (!root.is_object()) return FileError(path, "header JSON is not an object");
  if (!duplicate.empty()) {
    return FileError(path, absl::StrCat("header names tensor ", Quote(duplicate), " twice"));
  }

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = bytes.size() - data_start;
  SafetensorsHeader header;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object()) {
        for (auto m = it->begin(); m != it->end(); ++m) {
          if (m->is_string()) header.metadata[m.key()] = m->get<std::string>();
        }
      }
      continue;
    }
    absl::StatusOr<TensorInfo> info = ParseTensor(path, it.key(), *it, data_start, data_size);
    if (!info.ok()) return info.status();
    header.tensors.push_back(*std::move(info));
  }

  // Overlapping byte ranges mean a corrupt file; empty tensors occupy nothing.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : header.tensors) {
    if (t.byte_size > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->file_offset < b->file_offset;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& cur = *by_offset[i];
    if (cur.file_offset < prev.file_offset + prev.byte_size) {
      return TensorError(
          path, cur.name,
          absl::StrCat("data_offsets [", cur.file_offset - data_start, ", ",
                       cur.file_offset - data_start + cur.byte_size, "] overlap those of tensor ",
                       Quote(prev.name), " [", prev.file_offset - data_start, ", ",
                       prev.file_offset - data_start + prev.byte_size, "]"));
    }
  }
  // nlohmann objects iterate in key order already; sort anyway so Find can rely on it.
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return header;
}

}  // namespace

std::string ShapeToString(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<SafetensorsHeader> ParseSafetensors(std::span<const uint8_t> bytes,
                                                   std::string_view path) {
  // nlohmann is used without exceptions, but allocation can still throw: keep any exception
  // inside this module.
  try {
    return ParseUnguarded(bytes, path);
  } catch (const std::exception& e) {
    return FileError(path, absl::StrCat("cannot parse header: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  std::shared_ptr<const MappedFile> mapping = *std::move(mapped);
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensors(mapping->bytes(), path);
  if (!header.ok()) return header.status();
  return std::unique_ptr<SafetensorsFile>(
      new SafetensorsFile(std::move(mapping), *std::move(header)));
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(
      header_.tensors.begin(), header_.tensors.end(), name,
      [](const TensorInfo& t, std::string_view n) { return std::string_view(t.name) < n; });
  if (it == header_.tensors.end() || it->name != name) return nullptr;
  return &*it;
}

}  // namespace tandem::models
