// The Tandem service's pinned prefixes (PinPrefix, UnpinPrefix, ListPinnedPrefixes): each is an
// engine::Request::pin_prefix the engine ran, known by its owner and a name: an owner sees and
// unpins only its own. The service makes the owner the caller when the server has bearer
// tokens, and one shared owner without them (TandemService::PinOwner).
//
// A pin takes a prefill, so PinPrefix answers when the engine is done with it. Its call must
// not hold one of gRPC's callback threads while it waits: this object's own thread waits for the
// engine's answers (in the order the pins were asked for) and hands each to its call.
#ifndef TANDEM_SERVER_GRPC_PINNED_PREFIXES_H_
#define TANDEM_SERVER_GRPC_PINNED_PREFIXES_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace tandem::server {

// PinPrefixRequest.name: 1..64 characters of [A-Za-z0-9._-]; INVALID_ARGUMENT naming the field.
absl::Status ValidatePrefixName(const std::string& name);

class PinnedPrefixes {
 public:
  struct Prefix {
    std::string name;
    int64_t tokens = 0;
  };
  using Done = std::function<void(absl::StatusOr<Prefix>)>;

  // `max_per_caller`: the pins (and pins in progress) one caller may hold.
  PinnedPrefixes(engine::Engine& engine, int32_t max_per_caller);
  ~PinnedPrefixes();  // Stop()
  PinnedPrefixes(const PinnedPrefixes&) = delete;
  PinnedPrefixes& operator=(const PinnedPrefixes&) = delete;

  // Has the engine pin `tokens` as `caller`'s `name`. `done` runs later on this object's thread
  // with the prefix, or with why the engine could not pin it (the name is then free again).
  // Refused at once, without `done`: ALREADY_EXISTS for a name the caller already uses,
  // RESOURCE_EXHAUSTED past the caller's cap, or the engine's refusal of the request.
  absl::Status Pin(const std::string& caller, const std::string& name, std::vector<int32_t> tokens,
                   Done done);
  // NOT_FOUND for a name the caller has not pinned; FAILED_PRECONDITION while its PinPrefix has
  // not answered yet.
  absl::Status Unpin(const std::string& caller, const std::string& name);
  // The caller's pinned prefixes, in the order they were pinned (not those still in progress).
  std::vector<Prefix> List(const std::string& caller) const;

  // Waits for the pins in progress (the engine must finish them: drained or shut down first),
  // then ends the thread.
  void Stop();

 private:
  struct Entry {
    int64_t tokens = 0;
    bool pinned = false;  // false: the engine is still at it
    uint64_t pin = 0;     // the engine's id, once pinned
    uint64_t order = 0;   // when it was asked for
  };
  struct Waiting {
    std::string caller, name;
    std::shared_ptr<engine::RequestStream> stream;
    Done done;
  };
  using Key = std::pair<std::string, std::string>;  // caller, name

  void Run();
  // One pin (or pin in progress) fewer for `caller`. Under mu_.
  void Release(const std::string& caller);
  // The engine's answer to `w`, recorded; what `w.done` is told.
  absl::StatusOr<Prefix> Settle(Waiting& w);

  engine::Engine& engine_;
  const int32_t max_per_caller_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  absl::flat_hash_map<Key, Entry> entries_;
  absl::flat_hash_map<std::string, int32_t> per_caller_;
  std::deque<Waiting> waiting_;
  uint64_t next_order_ = 0;
  int submitting_ = 0;  // Pin calls between reserving a name and queueing the engine's answer
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_PINNED_PREFIXES_H_
