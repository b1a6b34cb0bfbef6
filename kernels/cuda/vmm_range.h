// A range of device addresses reserved once, under which physical device memory is mapped and
// unmapped in granule-sized pieces (CUDA's virtual memory management: cuMemAddressReserve,
// cuMemCreate, cuMemMap, cuMemSetAccess). This is what lets the AVMP allocator move capacity
// between KV pages and SSM blocks on a GPU without copying or re-reserving: the same contract
// as the host backing's mmap/madvise (cache/memory_backing.h).
//
// The driver API is reached through the runtime's cudaGetDriverEntryPointByVersion, so binaries
// do not link libcuda and still start on machines without a GPU driver.
#ifndef TANDEM_KERNELS_CUDA_VMM_RANGE_H_
#define TANDEM_KERNELS_CUDA_VMM_RANGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem::kernels::cuda {

class VmmRange {
 public:
  // Reserves `bytes` (rounded up to the allocation granularity) on `device`. Null with `error`
  // set when there is no driver or device, or the reservation fails.
  static std::unique_ptr<VmmRange> Create(int device, size_t bytes, std::string* error);
  // Unmaps and releases every mapped granule, then frees the range.
  ~VmmRange();
  VmmRange(const VmmRange&) = delete;
  VmmRange& operator=(const VmmRange&) = delete;

  // Device address of the range's start.
  void* base() const { return reinterpret_cast<void*>(base_); }
  size_t reserved_bytes() const { return bytes_; }
  // Offsets and sizes passed to Map and Unmap are multiples of this (2 MiB on current GPUs).
  size_t granularity() const { return granularity_; }
  size_t mapped_bytes() const { return mapped_granules_ * granularity_; }

  // Backs [offset, offset + bytes) with new physical memory, zero-filled, readable and writable
  // by the device. Granules already mapped are left as they are. False with `error` on bad
  // ranges or when the device is out of memory; then nothing of this call stays mapped.
  bool Map(size_t offset, size_t bytes, std::string* error);
  // Returns the physical memory under [offset, offset + bytes) (unmapped granules are skipped).
  bool Unmap(size_t offset, size_t bytes, std::string* error);

 private:
  VmmRange(int device, uint64_t base, size_t bytes, size_t granularity);
  bool CheckRange(size_t offset, size_t bytes, std::string* error) const;
  bool UnmapGranule(size_t index, std::string* error);

  int device_;
  uint64_t base_;  // a CUdeviceptr
  size_t bytes_;
  size_t granularity_;
  std::vector<uint64_t> handles_;  // per granule: its CUmemGenericAllocationHandle, 0 if unmapped
  size_t mapped_granules_ = 0;
};

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_VMM_RANGE_H_
