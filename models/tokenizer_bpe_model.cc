#include "models/tokenizer_bpe_model.h"

#include <queue>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/status_macros.h"
#include "models/unicode_utf8.h"

namespace tandem::models {
namespace {

using json = nlohmann::json;

// Debian's Abseil has its own string_view type; the flat_hash_maps are looked up through it.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

absl::Status Bad(const std::string& source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

const json& Get(const json& j, const char* key) {
  static const json kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

absl::Status ReadBool(const json& j, const std::string& source, const char* key, bool fallback,
                      bool* out) {
  const json& v = Get(j, key);
  if (v.is_null()) {
    *out = fallback;
  } else if (v.is_boolean()) {
    *out = v.get<bool>();
  } else {
    return Bad(source, absl::StrCat("model.", key, " is not a boolean"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BpeModel::ParseInto(const json& m, const std::string& source, BpeModel* model) {
  if (!m.is_object()) return Bad(source, "no \"model\" object");
  const std::string type = m.value("type", "BPE");
  if (type != "BPE") {
    return absl::UnimplementedError(absl::StrCat(source, ": unsupported model \"", type, "\""));
  }
  if (!Get(m, "dropout").is_null() && !(Get(m, "dropout").is_number() && Get(m, "dropout") == 0)) {
    return Bad(source, "BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json& v = Get(m, key);
    if (!v.is_null() && !(v.is_string() && v.get<std::string>().empty())) {
      return Bad(source, absl::StrCat("BPE ", key, " is not supported"));
    }
  }
  const json& vocab = Get(m, "vocab");
  if (!vocab.is_object() || vocab.empty()) return Bad(source, "model.vocab is missing or empty");
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 30)) {
      return Bad(source, absl::StrCat("model.vocab[\"", token, "\"] is not a valid id"));
    }
    model->vocab_[token] = id.get<int32_t>();
    max_id = std::max(max_id, id.get<int32_t>());
  }
  model->id_to_token_.assign(max_id + 1, std::string());
  for (const auto& [token, id] : model->vocab_) model->id_to_token_[id] = token;

  const json& merges = Get(m, "merges");
  if (!merges.is_array() && !merges.is_null()) return Bad(source, "model.merges is not a list");
  int32_t rank = 0;
  for (const json& merge : merges.is_array() ? merges : json::array()) {
    std::string a, b;
    if (merge.is_string()) {
      // "a b": exactly one space, as `tokenizers` requires.
      const std::string s = merge.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return Bad(source, absl::StrCat("model.merges[", rank, "] \"", s, "\" is not \"a b\""));
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      a = merge[0].get<std::string>();
      b = merge[1].get<std::string>();
    } else {
      return Bad(source, absl::StrCat("model.merges[", rank, "] is neither \"a b\" nor [a, b]"));
    }
    auto ia = model->vocab_.find(a), ib = model->vocab_.find(b), ic = model->vocab_.find(a + b);
    if (ia == model->vocab_.end() || ib == model->vocab_.end() || ic == model->vocab_.end()) {
      return Bad(source, absl::StrCat("model.merges[", rank, "] (\"", a, "\", \"", b,
                                      "\") uses a token missing from model.vocab"));
    }
    // The first occurrence of a pair keeps its rank.
    model->merges_.try_emplace(PairKey(ia->second, ib->second), rank, ic->second);
    ++rank;
  }

  TANDEM_RETURN_IF_ERROR(ReadBool(m, source, "byte_fallback", false, &model->byte_fallback_));
  TANDEM_RETURN_IF_ERROR(ReadBool(m, source, "fuse_unk", false, &model->fuse_unk_));
  TANDEM_RETURN_IF_ERROR(ReadBool(m, source, "ignore_merges", false, &model->ignore_merges_));
  model->byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const std::string piece =
        absl::StrCat("<0x", std::string(1, kHex[b >> 4]), std::string(1, kHex[b & 15]), ">");
    if (auto it = model->vocab_.find(piece); it != model->vocab_.end())
      model->byte_ids_[b] = it->second;
  }
  const json& unk = Get(m, "unk_token");
  if (unk.is_string()) {
    auto it = model->vocab_.find(unk.get<std::string>());
    if (it == model->vocab_.end()) return Bad(source, "model.unk_token is not in model.vocab");
    model->unk_id_ = it->second;
  }
  return absl::OkStatus();
}

absl::StatusOr<BpeModel> BpeModel::FromJson(const json& m, const std::string& source) {
  BpeModel model;
  try {
    TANDEM_RETURN_IF_ERROR(ParseInto(m, source, &model));
  } catch (const std::exception& e) {
    return Bad(source, e.what());
  }
  return model;
}

int32_t BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(AV(token));
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (ignore_merges_) {
    if (auto it = vocab_.find(AV(word)); it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool removed;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto push = [&](int32_t id) {
    const int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, false});
  };
  bool last_is_unk = false;
  for (size_t i = 0; i < word.size();) {
    size_t n = Utf8SequenceLength(word, i);
    if (n == 0) n = 1;  // unreachable: input is validated
    const std::string_view ch = word.substr(i, n);
    i += n;
    if (auto it = vocab_.find(AV(ch)); it != vocab_.end()) {
      push(it->second);
      last_is_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : ch) push(byte_ids_[static_cast<unsigned char>(c)]);
        last_is_unk = false;
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (!(fuse_unk_ && last_is_unk)) push(unk_id_);
      last_is_unk = true;
    }
    // Without an unk token the character is dropped, as `tokenizers` does.
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Merge {
    int32_t pos, rank, new_id;
  };
  // Lowest rank first, then leftmost.
  const auto later = [](const Merge& x, const Merge& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  std::priority_queue<Merge, std::vector<Merge>, decltype(later)> queue(later);
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (auto it = merges_.find(PairKey(symbols[i].id, symbols[i + 1].id)); it != merges_.end()) {
      queue.push({static_cast<int32_t>(i), it->second.first, it->second.second});
    }
  }
  const int32_t count = static_cast<int32_t>(symbols.size());
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.second != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    right.removed = true;
    left.next = right.next;
    if (right.next >= 0 && right.next < count) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (auto m = merges_.find(PairKey(symbols[left.prev].id, left.id)); m != merges_.end()) {
        queue.push({left.prev, m->second.first, m->second.second});
      }
    }
    if (left.next >= 0 && left.next < count) {
      if (auto m = merges_.find(PairKey(left.id, symbols[left.next].id)); m != merges_.end()) {
        queue.push({top.pos, m->second.first, m->second.second});
      }
    }
  }
  for (int32_t i = 0; i >= 0 && i < count; i = symbols[i].next) ids->push_back(symbols[i].id);
}

#undef RETURN_IF_ERROR_

}  // namespace tandem::models
