#include "server/grpc/pinned_prefixes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::server {

absl::Status ValidatePrefixName(const std::string& name) {
  constexpr size_t kMaxName = 64;
  if (name.empty() || name.size() > kMaxName) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: must be 1..", kMaxName, " characters, got ", name.size()));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("name: character ", i, " is not one of [A-Za-z0-9._-] (byte ",
                       static_cast<int>(static_cast<unsigned char>(c)), ")"));
    }
  }
  return absl::OkStatus();
}

PinnedPrefixes::PinnedPrefixes(engine::Engine& engine, int32_t max_per_caller)
    : engine_(engine), max_per_caller_(max_per_caller), thread_([this] { Run(); }) {}

PinnedPrefixes::~PinnedPrefixes() { Stop(); }

void PinnedPrefixes::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status PinnedPrefixes::Pin(const std::string& caller, const std::string& name,
                                 std::vector<int32_t> tokens, Done done) {
  const int64_t length = static_cast<int64_t>(tokens.size());
  const Key key{caller, name};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    if (auto it = entries_.find(key); it != entries_.end()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "name: \"", name, it->second.pinned ? "\" is already pinned" : "\" is being pinned"));
    }
    int32_t& held = per_caller_[caller];
    if (held >= max_per_caller_) {
      return absl::ResourceExhaustedError(absl::StrCat("this caller already holds ", held,
                                                       " pinned prefixes, the most allowed (",
                                                       max_per_caller_, "); unpin one first"));
    }
    ++held;
    entries_[key] = Entry{.tokens = length, .order = next_order_++};
    ++submitting_;  // Run may not end before this pin is queued or dropped
  }
  engine::Request request;
  request.prompt = std::move(tokens);
  request.max_new_tokens = 0;
  request.pin_prefix = true;
  request.client_id = absl::StrCat("pin:", name);
  absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream =
      engine_.Submit(std::move(request));
  std::lock_guard<std::mutex> lock(mu_);
  --submitting_;
  wake_.notify_all();
  if (!stream.ok()) {
    entries_.erase(key);
    Release(caller);
    return stream.status();
  }
  waiting_.push_back({caller, name, *std::move(stream), std::move(done)});
  return absl::OkStatus();
}

absl::Status PinnedPrefixes::Unpin(const std::string& caller, const std::string& name) {
  uint64_t pin = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(Key{caller, name});
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("name: no pinned prefix \"", name, "\""));
    }
    if (!it->second.pinned) {
      return absl::FailedPreconditionError(absl::StrCat(
          "name: \"", name, "\" is still being pinned; unpin it once PinPrefix has answered"));
    }
    pin = it->second.pin;
    entries_.erase(it);
    Release(caller);
  }
  engine_.UnpinPrefix(pin);
  return absl::OkStatus();
}

std::vector<PinnedPrefixes::Prefix> PinnedPrefixes::List(const std::string& caller) const {
  std::vector<std::pair<uint64_t, Prefix>> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, entry] : entries_) {
      if (key.first == caller && entry.pinned) {
        found.push_back({entry.order, Prefix{key.second, entry.tokens}});
      }
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Prefix> out;
  for (auto& [order, prefix] : found) out.push_back(std::move(prefix));
  return out;
}

void PinnedPrefixes::Release(const std::string& caller) {
  auto it = per_caller_.find(caller);
  if (it != per_caller_.end() && --it->second <= 0) per_caller_.erase(it);
}

void PinnedPrefixes::Run() {
  for (;;) {
    Waiting w;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return !waiting_.empty() || (stopping_ && submitting_ == 0); });
      if (waiting_.empty()) return;  // stopping, and nothing left to answer
      w = std::move(waiting_.front());
      waiting_.pop_front();
    }
    absl::StatusOr<Prefix> result = Settle(w);
    w.done(std::move(result));
  }
}

absl::StatusOr<PinnedPrefixes::Prefix> PinnedPrefixes::Settle(Waiting& w) {
  engine::Event finished;
  engine::Event e;
  while (w.stream->Next(&e)) {
    if (e.kind == engine::Event::Kind::kFinished) finished = std::move(e);
  }
  const Key key{w.caller, w.name};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (finished.pinned_prefix.has_value() && it != entries_.end()) {
    it->second.pinned = true;
    it->second.pin = *finished.pinned_prefix;
    return Prefix{w.name, it->second.tokens};
  }
  if (it != entries_.end()) {
    entries_.erase(it);
    Release(w.caller);
  }
  if (finished.pinned_prefix.has_value()) engine_.UnpinPrefix(*finished.pinned_prefix);
  if (finished.finish_reason == engine::FinishReason::kCancelled) {
    return absl::UnavailableError("the server shut down before the prefix was pinned");
  }
  if (!finished.error.ok()) return finished.error;
  return absl::InternalError("the engine finished the pin without pinning");
}

}  // namespace tandem::server
