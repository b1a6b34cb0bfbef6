// Early-return helpers (Debian's Abseil 20220623 ships none).
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_STATUS_MACROS_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_STATUS_MACROS_H_

#define TMPL_RETURN_IF_ERROR(expr) \
  do {                             \
    absl::Status _st = (expr);     \
    if (!_st.ok()) return _st;     \
  } while (0)

#define TMPL_CONCAT_INNER(a, b) a##b
#define TMPL_CONCAT(a, b) TMPL_CONCAT_INNER(a, b)
#define TMPL_ASSIGN_OR_RETURN(lhs, expr) \
  TMPL_ASSIGN_OR_RETURN_IMPL(TMPL_CONCAT(_res_, __LINE__), lhs, expr)
#define TMPL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(*tmp)

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_STATUS_MACROS_H_
