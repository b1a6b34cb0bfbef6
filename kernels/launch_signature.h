// What a recorded pass launched, as bytes: each launch's name and every argument it was given
// (addresses, sizes, flags, scalars), field by field. Two passes with equal signatures issue
// the same launches with the same arguments; a device backend relies on that to replay a CUDA
// graph captured from the first instead of launching the second (kernels/cuda/cuda_ops.h), so
// a field left out would replay a stale argument. The argument structs' fields are listed in
// launch_signature.cc, where a size check fails when a struct gains one that is not listed.
//
// Field by field, not the structs' raw bytes: their padding is indeterminate and would make
// equal passes differ.
#ifndef TANDEM_KERNELS_LAUNCH_SIGNATURE_H_
#define TANDEM_KERNELS_LAUNCH_SIGNATURE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "kernels/ops.h"

namespace tandem::kernels {

class LaunchSignature {
 public:
  // A number, an enum, a flag or an address (the value of the pointer, not what it points to).
  template <typename T>
    requires(std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_pointer_v<T>)
  void Add(T value) {
    AddBytes(&value, sizeof(value));
  }
  // A span's address and length (a host list read at launch time is identified by both).
  template <typename T>
  void Add(std::span<const T> list) {
    Add(static_cast<const void*>(list.data()));
    Add(list.size());
  }
  void Add(const WeightMatrix& w);
  void Add(const PagedKv& kv);
  void Add(const VarlenSequences& sequences);
  void Add(const SelectiveScanArgs& args);
  void Add(const SsdScanArgs& args);
  void Add(const CausalConvArgs& args);
  void Add(const AttentionArgs& args);
  void Add(const PartialAttentionArgs& args);
  void Add(const AttentionPart& part);

  void Clear() { bytes_.clear(); }  // keeps the memory
  std::span<const std::byte> bytes() const { return bytes_; }
  bool empty() const { return bytes_.empty(); }
  // A key for looking signatures up (not a proof of equality: that compares the bytes).
  uint64_t Hash() const;
  bool operator==(const LaunchSignature& other) const { return bytes_ == other.bytes_; }

 private:
  void AddBytes(const void* p, size_t n);
  std::vector<std::byte> bytes_;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_LAUNCH_SIGNATURE_H_
