#include "server/openai/openai_logprobs.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/byte_level.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;

// A logprob as JSON: -inf (a token the rule could never pick, e.g. under top-k) is not a JSON
// number, so it becomes OpenAI's floor for "impossible", as vLLM writes it.
json LogprobJson(float logprob) {
  constexpr float kImpossible = -9999.0f;
  return logprob < kImpossible ? kImpossible : logprob;
}

int64_t CodePoints(const std::string& utf8) {
  int64_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

OpenAiLogprobs::OpenAiLogprobs(bool chat, const models::Tokenizer* tokenizer,
                               bool skip_special_tokens)
    : chat_(chat), tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

void OpenAiLogprobs::Add(const engine::Event& event) {
  for (size_t i = 0; i < event.logprobs.size() && i < event.tokens.size(); ++i) {
    if (!event.logprobs[i].empty()) AddToken(event.tokens[i], &event.logprobs[i]);
  }
}

void OpenAiLogprobs::AddPrompt(std::span<const int32_t> prompt,
                               const std::vector<std::vector<engine::TopLogprob>>& scored) {
  for (size_t i = 0; i < prompt.size(); ++i) {
    const bool known = i > 0 && i - 1 < scored.size() && !scored[i - 1].empty();
    AddToken(prompt[i], known ? &scored[i - 1] : nullptr, /*starts_text=*/true);
  }
}

void OpenAiLogprobs::AddToken(int32_t id, const std::vector<engine::TopLogprob>* at,
                              bool starts_text) {
  // The token's exact bytes, and its text as OpenAI shows it.
  auto spell = [&](int32_t token, std::string* bytes) {
    if (tokenizer_ == nullptr) return absl::StrCat("token_id:", token);
    *bytes = tokenizer_->TokenBytes(token);
    return models::Utf8Lossy(*bytes);
  };
  auto bytes_json = [](const std::string& bytes) {
    json list = json::array();
    for (unsigned char c : bytes) list.push_back(static_cast<int>(c));
    return list;
  };
  ++count_;
  std::string bytes;
  const std::string token = spell(id, &bytes);
  if (chat_) {
    json top = json::array();
    for (size_t k = 1; at != nullptr && k < at->size(); ++k) {
      std::string top_bytes;
      const std::string text = spell((*at)[k].token, &top_bytes);
      top.push_back({{"token", text},
                     {"logprob", LogprobJson((*at)[k].logprob)},
                     {"bytes", bytes_json(top_bytes)}});
    }
    entries_.push_back({{"token", token},
                        {"logprob", at != nullptr ? LogprobJson(at->front().logprob) : json()},
                        {"bytes", bytes_json(bytes)},
                        {"top_logprobs", std::move(top)}});
    return;
  }
  // Completions: a map, so tokens spelled alike share a key (the likelier one, listed first,
  // keeps it); the chosen token is always in it. A token without a logprob has null for both.
  if (at != nullptr) {
    json top = json::object();
    for (size_t k = 1; k < at->size(); ++k) {
      std::string unused;
      top.emplace(spell((*at)[k].token, &unused), LogprobJson((*at)[k].logprob));
    }
    top.emplace(token, LogprobJson(at->front().logprob));
    token_logprobs_.push_back(LogprobJson(at->front().logprob));
    top_logprobs_.push_back(std::move(top));
  } else {
    token_logprobs_.push_back(nullptr);
    top_logprobs_.push_back(nullptr);
  }
  tokens_.push_back(token);
  text_offsets_.push_back(text_offset_);
  if (tokenizer_ == nullptr) {
    text_offset_ += CodePoints(token);
    return;
  }
  // Offsets count the characters of the text the bytes make: a character split across tokens
  // counts once, at the token that starts it.
  if (skip_special_tokens_ && tokenizer_->IsSpecial(id)) return;
  // Until the prompt's text has begun (a BOS before it counts nothing).
  if (starts_text && text_offset_ == 0 && pending_bytes_.empty() &&
      models::SettledUtf8Prefix(bytes) == bytes.size()) {
    const int32_t ids[] = {id};
    text_offset_ += CodePoints(tokenizer_->Decode(ids, skip_special_tokens_));
    return;
  }
  pending_bytes_ += bytes;
  const size_t settled = models::SettledUtf8Prefix(pending_bytes_);
  text_offset_ +=
      CodePoints(models::Utf8Lossy(std::string_view(pending_bytes_).substr(0, settled)));
  pending_bytes_.erase(0, settled);
}

json OpenAiLogprobs::Take() {
  json out;
  if (chat_) {
    out = {{"content", entries_.is_null() ? json::array() : std::move(entries_)},
           {"refusal", nullptr}};
  } else {
    auto list = [](json& j) { return j.is_null() ? json::array() : std::move(j); };
    out = {{"tokens", list(tokens_)},
           {"token_logprobs", list(token_logprobs_)},
           {"top_logprobs", list(top_logprobs_)},
           {"text_offset", list(text_offsets_)}};
  }
  entries_ = tokens_ = token_logprobs_ = top_logprobs_ = text_offsets_ = json();
  count_ = 0;
  return out;
}

}  // namespace tandem::server
