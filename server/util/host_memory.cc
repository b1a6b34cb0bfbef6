#include "server/util/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "server/util/small_file.h"

namespace tandem::server {
namespace {

// A cgroup limit file's number; nullopt for "max", absent files and anything unparsable.
std::optional<uint64_t> CgroupLimit(const char* path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, 4096);
  if (!text.ok()) return std::nullopt;
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &bytes)) return std::nullopt;
  return bytes;
}

}  // namespace

size_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  uint64_t bytes = pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : UINT64_MAX;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    // cgroup v1 reports "no limit" as a huge number, which the min leaves alone.
    if (std::optional<uint64_t> limit = CgroupLimit(path)) bytes = std::min(bytes, *limit);
  }
  return static_cast<size_t>(bytes);
}

}  // namespace tandem::server
