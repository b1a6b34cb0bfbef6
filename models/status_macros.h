// Early-return helpers for absl::Status / absl::StatusOr.
#ifndef TANDEM_MODELS_STATUS_MACROS_H_
#define TANDEM_MODELS_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TANDEM_STATUS_CONCAT_INNER(a, b) a##b
#define TANDEM_STATUS_CONCAT(a, b) TANDEM_STATUS_CONCAT_INNER(a, b)

// lhs = value of `expr` (a StatusOr), or return its status.
#define TANDEM_ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL(TANDEM_STATUS_CONCAT(_tandem_or_, __LINE__), lhs, expr)
#define TANDEM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = *std::move(tmp)

#define TANDEM_RETURN_IF_ERROR(expr)                        \
  do {                                                      \
    if (absl::Status _tandem_s = (expr); !_tandem_s.ok()) { \
      return _tandem_s;                                     \
    }                                                       \
  } while (0)

#endif  // TANDEM_MODELS_STATUS_MACROS_H_
