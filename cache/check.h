// Invariant checks for programming errors inside cache/ (a double free, a foreign handle): they
// abort with a message even in release builds, because continuing would corrupt memory that
// other requests own. Bad *input* never reaches these; it gets an absl::Status instead.
// (Debian's Abseil 20220623 predates absl/log/check.h.)
#ifndef TANDEM_CACHE_CHECK_H_
#define TANDEM_CACHE_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <sstream>

#define TANDEM_CHECK(cond, msg)                                                        \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   (msg));                                                             \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)


// The streaming form, for messages that need values: CACHE_CHECK(cond) << "index " << i;
// CACHE_DCHECK compiles to nothing under NDEBUG (hot paths only).

namespace tandem::cache::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Makes `cond ? (void)0 : Voidify() & stream` well-typed.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace tandem::cache::internal

#define CACHE_CHECK(condition)                        \
  (condition) ? (void)0                               \
              : ::tandem::cache::internal::Voidify() & \
                    ::tandem::cache::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#ifdef NDEBUG
#define CACHE_DCHECK(condition) \
  while (false) CACHE_CHECK(condition)
#else
#define CACHE_DCHECK(condition) CACHE_CHECK(condition)
#endif

#endif  // TANDEM_CACHE_CHECK_H_
