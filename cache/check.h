// Invariant checks for programming errors inside cache/ (a double free, a foreign handle): they
// abort with a message even in release builds, because continuing would corrupt memory that
// other requests own. Bad *input* never reaches these; it gets an absl::Status instead.
// (Debian's Abseil 20220623 predates absl/log/check.h.)
#ifndef TANDEM_CACHE_CHECK_H_
#define TANDEM_CACHE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define TANDEM_CHECK(cond, msg)                                                        \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   (msg));                                                             \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

#endif  // TANDEM_CACHE_CHECK_H_
