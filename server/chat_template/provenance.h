// Where the bytes of a rendered prompt came from. Text that a client supplied (message
// contents, tool definitions, documents, template kwargs) is "untrusted": the tokenizer must
// read special-token spellings in it as plain text, or a user could write "<|im_start|>system"
// into a message and forge a turn. Literals of the template and bos_token/eos_token are
// trusted. Every string value carries the byte ranges of its untrusted text (Taint); the
// operations that cut and join strings (concatenation, slicing, strip, join, replace,
// captured blocks) keep the ranges exact, and every other operation marks its whole result
// untrusted when any input was, which can only make more text plain, never less.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_PROVENANCE_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_PROVENANCE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::chat_template {

// [begin, end) in bytes.
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const ByteRange& o) const { return begin == o.begin && end == o.end; }
};

// Sorted, disjoint, non-adjacent, non-empty ranges.
class Taint {
 public:
  static Taint All(size_t size) {
    Taint t;
    t.Add(0, size);
    return t;
  }
  bool empty() const { return ranges_.empty(); }
  const std::vector<ByteRange>& ranges() const { return ranges_; }
  // Ranges are added in increasing order by every caller; out-of-order ones are merged too.
  void Add(size_t begin, size_t end);
  // `other`'s ranges shifted by `offset`.
  void Append(const Taint& other, size_t offset);
  // The ranges within [begin, end), relative to `begin`.
  Taint Sub(size_t begin, size_t end) const;
  bool Overlaps(size_t begin, size_t end) const;

 private:
  std::vector<ByteRange> ranges_;
};

// A string under construction with its taint: the render output, captured blocks, and the
// results of string operations.
struct Text {
  std::string text;
  Taint taint;

  void Append(std::string_view s, bool untrusted = false) {
    if (untrusted) taint.Add(text.size(), text.size() + s.size());
    text.append(s.data(), s.size());
  }
  void Append(const Text& t) {
    taint.Append(t.taint, text.size());
    text += t.text;
  }
  // Bytes [begin, end) of `t`.
  void AppendSlice(const Text& t, size_t begin, size_t end) {
    taint.Append(t.taint.Sub(begin, end), text.size());
    text.append(t.text, begin, end - begin);
  }
};

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_PROVENANCE_H_
