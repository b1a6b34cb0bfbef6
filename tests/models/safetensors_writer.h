// Test helpers: build safetensors files byte by byte, and a self-deleting temporary directory.
#ifndef TANDEM_TESTS_MODELS_SAFETENSORS_WRITER_H_
#define TANDEM_TESTS_MODELS_SAFETENSORS_WRITER_H_

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::models::testing {

struct TestTensor {
  std::string name;
  std::string dtype;  // safetensors spelling, e.g. "BF16"
  std::vector<int64_t> shape;
  std::string bytes;  // raw little-endian data
};

inline std::string F32Bytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline std::string U16Bytes(const std::vector<uint16_t>& values) {
  std::string out(values.size() * 2, '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// The 8-byte little-endian length, `header`, then `data`.
inline std::string RawSafetensors(std::string_view header, std::string_view data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.append(header);
  out.append(data);
  return out;
}

// A well-formed file holding `tensors` back to back in the given order. Like the reference
// writer, the header is padded with spaces to a multiple of 8 unless `pad_header` is false.
inline std::string SafetensorsBytes(const std::vector<TestTensor>& tensors,
                                    bool pad_header = true) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const TestTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  if (pad_header) {
    while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  }
  return RawSafetensors(text, data);
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A fresh directory under the test temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tandem_models_XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }
  // Writes `bytes` to `name` inside the directory and returns the full path.
  std::string Write(std::string_view name, std::string_view bytes) const {
    const std::string p = File(name);
    WriteFile(p, bytes);
    return p;
  }

 private:
  std::string path_;
};

}  // namespace tandem::models::testing

#endif  // TANDEM_TESTS_MODELS_SAFETENSORS_WRITER_H_
