#include "server/chat_template/markup.h"

#include <string_view>

namespace tandem::chat_template {

Text HtmlEscape(const Text& text) {
  Text out;
  const std::string& s = text.text;
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < s.size(); ++i) {
    std::string_view entity;
    switch (s[i]) {
      case '&':
        entity = "&amp;";
        break;
      case '<':
        entity = "&lt;";
        break;
      case '>':
        entity = "&gt;";
        break;
      case '"':
        entity = "&#34;";
        break;
      case '\'':
        entity = "&#39;";
        break;
      default:
        continue;
    }
    out.AppendSlice(text, run, i);
    out.Append(entity, text.taint.Overlaps(i, i + 1));
    run = i + 1;
  }
  out.AppendSlice(text, run, s.size());
  return out;
}

Value Escape(const Value& v) {
  if (v.is_markup()) return v;
  return Value::Markup(HtmlEscape(v.StrText()));
}

Value MarkupConcat(const Value& a, const Value& b) {
  Text out = Escape(a).StrText();
  out.Append(Escape(b).StrText());
  return Value::Markup(std::move(out));
}

}  // namespace tandem::chat_template
