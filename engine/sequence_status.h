// Where a request stands inside the scheduler. Every decision the scheduler makes about a
// sequence (plan it as a decode row or a prefill chunk, preempt it, requeue it, drop it) reads
// this one field, rather than inferring the phase from whether its token vector is empty or its
// memory is present.
//
//   kWaiting ──admit──▶ kPrefilling ──last prompt token run, token sampled──▶ kDecoding
//      ▲                    │  ▲                                                 │
//      │                    │  └───────────── (readmitted) ◀── kPreempted ◀──────┤ preempt
//      └── (never admitted) │                                                    │
//                           └──────────── finish (length, stop, cancel, error) ──┴──▶ kFinished
//
// kWaiting and kPreempted sequences are in the queue and hold no memory; kPrefilling and
// kDecoding ones are in the batch and hold memory; kFinished ones have emitted their last event
// and hold nothing.
#ifndef TANDEM_ENGINE_SEQUENCE_STATUS_H_
#define TANDEM_ENGINE_SEQUENCE_STATUS_H_

#include <cstdint>

namespace tandem::engine {

enum class SequenceStatus : uint8_t {
  kWaiting,     // queued, never admitted
  kPrefilling,  // in the batch, running prompt tokens (or, after a preemption, recomputing)
  kDecoding,    // in the batch, one sampled token per step
  kPreempted,   // evicted from the batch; queued to resume with its tokens and sampler intact
  kFinished,    // its finish event is out; removed from the scheduler at the next sweep
};

inline const char* SequenceStatusName(SequenceStatus status) {
  switch (status) {
    case SequenceStatus::kWaiting:
      return "waiting";
    case SequenceStatus::kPrefilling:
      return "prefilling";
    case SequenceStatus::kDecoding:
      return "decoding";
    case SequenceStatus::kPreempted:
      return "preempted";
    case SequenceStatus::kFinished:
      return "finished";
  }
  return "?";
}

// In the batch: holds memory and is planned every step.
inline bool IsRunning(SequenceStatus status) {
  return status == SequenceStatus::kPrefilling || status == SequenceStatus::kDecoding;
}

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_SEQUENCE_STATUS_H_
