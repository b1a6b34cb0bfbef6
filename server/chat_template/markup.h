// markupsafe's Markup as jinja2 3.1 uses it with autoescape off (transformers' setting): |safe
// and |escape make one; printing it is unchanged; `Markup + str`, `str + Markup`, `%`,
// str.format and join escape the plain operand; `~` and most filters give a plain str back.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_MARKUP_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_MARKUP_H_

#include "server/chat_template/provenance.h"
#include "server/chat_template/value.h"

namespace tandem::chat_template {

// markupsafe.escape on text: & < > " ' become entities. An escaped byte's entity is
// untrusted when the byte was.
Text HtmlEscape(const Text& text);
// markupsafe.escape(v): a Markup stays as it is, anything else becomes Markup(escaped str(v)).
Value Escape(const Value& v);
// `a + b` where one side is a Markup and the other a str.
Value MarkupConcat(const Value& a, const Value& b);

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_MARKUP_H_
