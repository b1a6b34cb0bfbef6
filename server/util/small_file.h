// Reads a file an operator names (config file, token file, PEM certificate) that must be small:
// the file must be a regular file (not a directory, a FIFO or a device such as /dev/zero, which
// would block or grow without bound) of at most `max_bytes`. Errors name the file and what was
// wrong with it, so that a typo in a path is reported as such.
#ifndef TANDEM_SERVER_UTIL_SMALL_FILE_H_
#define TANDEM_SERVER_UTIL_SMALL_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace tandem::server {

// INVALID_ARGUMENT "'path': <why>" when the file cannot be read, is not a regular file or is
// larger than max_bytes.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes);

}  // namespace tandem::server

#endif  // TANDEM_SERVER_UTIL_SMALL_FILE_H_
