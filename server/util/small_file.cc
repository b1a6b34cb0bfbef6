#include "server/util/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::server {
namespace {

absl::Status Refuse(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("'", path, "': ", why));
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever before fstat could
  // tell us what it is.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Refuse(path, std::strerror(errno));
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return Refuse(path, std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return Refuse(path, absl::StrCat("is ", KindOf(info.st_mode), ", not a regular file"));
  }
  if (static_cast<size_t>(info.st_size) > max_bytes) {
    close(fd);
    return Refuse(path, absl::StrCat(info.st_size, " bytes, more than the limit of ", max_bytes));
  }
  std::string text;
  char buffer[8192];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return Refuse(path, std::strerror(error));
    }
    if (n == 0) break;
    // The size is checked again while reading: a file that grows after fstat (a log being
    // written) must not take more than the limit either.
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      close(fd);
      return Refuse(path, absl::StrCat("more than the limit of ", max_bytes, " bytes"));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace tandem::server
