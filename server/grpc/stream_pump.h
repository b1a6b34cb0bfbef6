// The thread that moves engine events to gRPC streams. It owns every live GenerateStream:
// gRPC's callbacks post signals here, and this thread alone calls into the streams (and so into
// gRPC's write API), deleting each after gRPC reports it done.
//
// The thread sleeps until signalled: by gRPC's callbacks, or by the engine pushing an event into
// a stream's RequestStream (its push listener), so nothing is polled; or until the earliest
// moment a pending write would count as stalled (GenerateStream::stall_deadline).
#ifndef TANDEM_SERVER_GRPC_STREAM_PUMP_H_
#define TANDEM_SERVER_GRPC_STREAM_PUMP_H_

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "server/grpc/generate_stream.h"

namespace tandem::server {

class StreamPump {
 public:
  StreamPump();
  ~StreamPump();  // Stop()
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  // Takes ownership (until gRPC's OnDone) and starts streaming.
  void Add(GenerateStream* stream);
  // Called by a stream's gRPC callbacks and its RequestStream's push listener; a stream that is
  // not (or no longer) registered is ignored.
  void Signal(GenerateStream* stream, const StreamSignals& signals);
  // Waits until every stream is done (gRPC server shut down first), then ends the thread.
  void Stop();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;
  bool stopping_ = false;
  absl::flat_hash_map<GenerateStream*, StreamSignals> streams_;
  std::thread thread_;
};

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_STREAM_PUMP_H_
