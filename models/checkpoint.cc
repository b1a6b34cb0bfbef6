#include "models/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/mapped_file.h"
#include "nlohmann/json.hpp"

namespace tandem::models {
namespace {

// Abseil here is built with its own string_view type; bridge from std::string_view.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr std::string_view kConfigName = "config.json";
constexpr std::string_view kSingleName = "model.safetensors";
constexpr std::string_view kIndexName = "model.safetensors.index.json";

std::string Quote(std::string_view s) {
  constexpr size_t kMax = 200;
  std::string out = absl::StrCat("\"", absl::CHexEscape(Sv(s.substr(0, kMax))), "\"");
  if (s.size() > kMax) absl::StrAppend(&out, "...");
  return out;
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (dir.empty() || dir.back() == '/') return absl::StrCat(Sv(dir), Sv(name));
  return absl::StrCat(Sv(dir), "/", Sv(name));
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// A shard named by the index must be a plain file name inside the checkpoint directory.
bool IsPlainFileName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// Reads the index and returns weight_map as (tensor, shard file name) pairs.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadIndex(
    const std::string& index_path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(index_path);
  if (!file.ok()) return file.status();
  const auto* text = reinterpret_cast<const char*>((*file)->data());
  Json root = Json::parse(text, text + (*file)->size(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": not valid JSON"));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": not a JSON object"));
  }
  auto map_it = root.find("weight_map");
  if (map_it == root.end() || !map_it->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": missing \"weight_map\" object"));
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    if (!it->is_string() || !IsPlainFileName(it->get_ref<const std::string&>())) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map entry for tensor ", Quote(it.key()),
                       " is not a file name in the checkpoint directory"));
    }
    entries.emplace_back(it.key(), it->get<std::string>());
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map is empty"));
  }
  return entries;
}

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  return absl::Status(status.code(), absl::StrCat(Sv(context), ": ", status.message()));
}

}  // namespace

FloatTensor::FloatTensor(std::vector<int64_t> shape, std::vector<float> data)
    : shape_(std::move(shape)), owned_(std::move(data)) {
  num_elements_ = static_cast<int64_t>(owned_.size());
  data_ = owned_.data();
}

FloatTensor::FloatTensor(std::vector<int64_t> shape, const float* data,
                         std::shared_ptr<const void> keep_alive)
    : shape_(std::move(shape)), data_(data), keep_alive_(std::move(keep_alive)) {
  num_elements_ = 1;
  for (int64_t d : shape_) num_elements_ *= d;
}

FloatTensor::FloatTensor(FloatTensor&& other) noexcept { *this = std::move(other); }

FloatTensor& FloatTensor::operator=(FloatTensor&& other) noexcept {
  if (this == &other) return *this;
  shape_ = std::move(other.shape_);
  num_elements_ = std::exchange(other.num_elements_, 0);
  data_ = std::exchange(other.data_, nullptr);
  owned_ = std::move(other.owned_);  // the buffer, and so data_, moves with it
  keep_alive_ = std::move(other.keep_alive_);
  other.shape_.clear();
  other.owned_.clear();
  return *this;
}

std::vector<float> FloatTensor::TakeVector() && {
  std::vector<float> out;
  if (keep_alive_ != nullptr) {
    out.assign(data_, data_ + num_elements_);
  } else {
    out = std::move(owned_);
  }
  *this = FloatTensor();
  return out;
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) {
    return absl::NotFoundError(absl::StrCat(dir, ": checkpoint directory does not exist"));
  }
  if (!fs::is_directory(st)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": is not a directory"));
  }
  const std::string config = JoinPath(dir, kConfigName);
  if (!IsRegularFile(config)) {
    return absl::NotFoundError(
        absl::StrCat(config, ": missing (a checkpoint directory needs config.json)"));
  }

  auto ckpt = std::unique_ptr<Checkpoint>(new Checkpoint());
  ckpt->dir_ = dir;
  const std::string single = JoinPath(dir, kSingleName);
  const std::string index = JoinPath(dir, kIndexName);
  // Like transformers, a single-file checkpoint wins over an index if both exist.
  if (IsRegularFile(single)) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(single);
    if (!file.ok()) return file.status();
    for (const TensorInfo& info : (*file)->tensors()) {
      ckpt->tensors_.emplace(info.name, Entry{file->get(), &info});
    }
    ckpt->files_.push_back(*std::move(file));
    return ckpt;
  }
  if (!IsRegularFile(index)) {
    std::vector<std::string> found;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors") found.push_back(e.path().filename().string());
    }
    std::sort(found.begin(), found.end());
    std::string hint = found.empty() ? std::string(" and no other .safetensors file")
                                     : absl::StrCat(" (found ", absl::StrJoin(found, ", "),
                                                    " but shards need the index)");
    return absl::NotFoundError(
        absl::StrCat(dir, ": no ", Sv(kSingleName), " or ", Sv(kIndexName), hint));
  }

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> entries = ReadIndex(index);
  if (!entries.ok()) return entries.status();
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [tensor, shard] : *entries) shards.emplace(shard, nullptr);
  for (auto& [shard, file_ptr] : shards) {
    const std::string shard_path = JoinPath(dir, shard);
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(shard_path);
    if (!file.ok()) {
      // Name one tensor that needs the shard so the index line is easy to find.
      std::string_view example;
      for (const auto& [tensor, s] : *entries) {
        if (s == shard) {
          example = tensor;
          break;
        }
      }
      return Annotate(file.status(), absl::StrCat(index, ": shard ", Quote(shard),
                                                  " (holding tensor ", Quote(example), ")"));
    }
    file_ptr = file->get();
    ckpt->files_.push_back(*std::move(file));
  }
  for (const auto& [tensor, shard] : *entries) {
    const SafetensorsFile* file = shards.at(shard);
    const TensorInfo* info = file->Find(tensor);
    if (info == nullptr) {
      return absl::NotFoundError(absl::StrCat(file->path(), ": no tensor ", Quote(tensor),
                                              ", which ", index, " places in this shard"));
    }
    ckpt->tensors_.emplace(tensor, Entry{file, info});
  }
  return ckpt;
}

std::string Checkpoint::config_path() const { return JoinPath(dir_, kConfigName); }

std::vector<std::string> Checkpoint::files() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f->path());
  return out;
}

bool Checkpoint::Has(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

std::vector<std::string> Checkpoint::TensorNames() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, entry] : tensors_) out.push_back(name);
  return out;
}

absl::StatusOr<Checkpoint::Entry> Checkpoint::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(dir_, ": checkpoint has no tensor ", Quote(name)));
  }
  return it->second;
}

absl::StatusOr<TensorInfo> Checkpoint::Info(std::string_view name) const {
  absl::StatusOr<Entry> entry = Find(name);
  if (!entry.ok()) return entry.status();
  return *entry->info;
}

absl::StatusOr<Checkpoint::Entry> Checkpoint::FindChecked(
    std::string_view name, std::span<const int64_t> expected_shape) const {
  absl::StatusOr<Entry> entry = Find(name);
  if (!entry.ok()) return entry.status();
  const std::vector<int64_t>& shape = entry->info->shape;
  if (!std::equal(shape.begin(), shape.end(), expected_shape.begin(), expected_shape.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat(entry->file->path(), ": tensor ", Quote(name), ": shape mismatch: expected ",
                     ShapeToString(expected_shape), ", found ", ShapeToString(shape)));
  }
  return entry;
}

void Checkpoint::MarkUsed(std::string_view name) const {
  std::lock_guard<std::mutex> lock(used_mu_);
  if (used_.find(name) == used_.end()) used_.emplace(name);
}

absl::StatusOr<FloatTensor> Checkpoint::LoadFloat(std::string_view name,
                                                  std::span<const int64_t> expected_shape) const {
  absl::StatusOr<Entry> entry = FindChecked(name, expected_shape);
  if (!entry.ok()) return entry.status();
  const TensorInfo& info = *entry->info;
  if (!IsFloatConvertible(info.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        entry->file->path(), ": tensor ", Quote(name), ": dtype ", Sv(DTypeName(info.dtype)),
        " cannot be loaded as float (F32, F16 or BF16 can)"));
  }
  MarkUsed(name);
  const std::span<const uint8_t> bytes = entry->file->Data(info);
  const size_t n = static_cast<size_t>(info.num_elements);
  switch (info.dtype) {
    case DType::kF32: {
      if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
        return FloatTensor(info.shape, reinterpret_cast<const float*>(bytes.data()),
                           entry->file->mapping());
      }
      std::vector<float> out(n);
      if (n > 0) std::memcpy(out.data(), bytes.data(), n * sizeof(float));
      return FloatTensor(info.shape, std::move(out));
    }
    case DType::kBF16: {
      std::vector<float> out(n);
      Bf16ToF32(bytes.data(), out.data(), n);
      return FloatTensor(info.shape, std::move(out));
    }
    case DType::kF16: {
      std::vector<float> out(n);
      F16ToF32(bytes.data(), out.data(), n);
      return FloatTensor(info.shape, std::move(out));
    }
    default:
      break;
  }
  return absl::InternalError("unreachable dtype");
}

absl::StatusOr<FloatTensor> Checkpoint::LoadFloatAnyShape(std::string_view name) const {
  absl::StatusOr<Entry> entry = Find(name);
  if (!entry.ok()) return entry.status();
  return LoadFloat(name, entry->info->shape);
}

absl::StatusOr<RawTensor> Checkpoint::LoadRaw(std::string_view name,
                                              std::span<const int64_t> expected_shape) const {
  absl::StatusOr<Entry> entry = FindChecked(name, expected_shape);
  if (!entry.ok()) return entry.status();
  MarkUsed(name);
  RawTensor raw;
  raw.dtype = entry->info->dtype;
  raw.shape = entry->info->shape;
  raw.bytes = entry->file->Data(*entry->info);
  raw.keep_alive = entry->file->mapping();
  return raw;
}

std::vector<std::string> Checkpoint::UnusedTensors() const {
  std::lock_guard<std::mutex> lock(used_mu_);
  std::vector<std::string> out;
  for (const auto& [name, entry] : tensors_) {
    if (used_.find(name) == used_.end()) out.push_back(name);
  }
  return out;
}

absl::Status Checkpoint::CheckAllUsed() const {
  const std::vector<std::string> unused = UnusedTensors();
  if (unused.empty()) return absl::OkStatus();
  constexpr size_t kShown = 5;
  std::vector<std::string> shown;
  for (size_t i = 0; i < unused.size() && i < kShown; ++i) shown.push_back(Quote(unused[i]));
  return absl::FailedPreconditionError(
      absl::StrCat(dir_, ": ", unused.size(), " tensor(s) in the checkpoint were never loaded: ",
                   absl::StrJoin(shown, ", "), unused.size() > kShown ? ", ..." : ""));
}

}  // namespace tandem::models
