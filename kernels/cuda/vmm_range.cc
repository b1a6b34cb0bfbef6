#include "kernels/cuda/vmm_range.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/handled_error.h"

namespace tandem::kernels::cuda {
namespace {

// The driver functions this file uses, looked up once through the runtime.
struct Driver {
  decltype(&cuMemAddressReserve) address_reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuGetErrorString) error_string = nullptr;
  std::string error;  // why loading failed, empty when every function was found
};

// The oldest driver API version whose signatures these are (VMM arrived in 10.2, stable since).
constexpr unsigned kDriverApiVersion = 12000;

template <typename Fn>
bool Lookup(const char* name, Fn* fn, std::string* error) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status =
      cudaGetDriverEntryPointByVersion(name, &p, kDriverApiVersion, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    *error = std::string("CUDA driver function ") + name + " is unavailable (" +
             cudaGetErrorString(status) + ")";
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

const Driver& GetDriver() {
  static const Driver driver = [] {
    Driver d;
    std::string& e = d.error;
    (void)(Lookup("cuMemAddressReserve", &d.address_reserve, &e) &&
           Lookup("cuMemAddressFree", &d.address_free, &e) &&
           Lookup("cuMemCreate", &d.create, &e) && Lookup("cuMemRelease", &d.release, &e) &&
           Lookup("cuMemMap", &d.map, &e) && Lookup("cuMemUnmap", &d.unmap, &e) &&
           Lookup("cuMemSetAccess", &d.set_access, &e) &&
           Lookup("cuMemGetAllocationGranularity", &d.granularity, &e) &&
           Lookup("cuGetErrorString", &d.error_string, &e));
    return d;
  }();
  return driver;
}

// True on CUDA_SUCCESS; otherwise `error` = "<what>: <driver message>".
bool Ok(CUresult result, const char* what, std::string* error) {
  if (result == CUDA_SUCCESS) return true;
  const char* message = nullptr;
  if (GetDriver().error_string != nullptr) GetDriver().error_string(result, &message);
  if (error != nullptr) {
    *error = std::string(what) + ": " + (message != nullptr ? message : "CUDA driver error") +
             " (" + std::to_string(static_cast<int>(result)) + ")";
  }
  return false;
}

CUmemAllocationProp DeviceMemory(int device) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

std::unique_ptr<VmmRange> VmmRange::Create(int device, size_t bytes, std::string* error) {
  const Driver& driver = GetDriver();
  if (!driver.error.empty()) {
    *error = driver.error;
    return nullptr;
  }
  // The runtime creates and binds the device's primary context, which the driver calls use.
  if (cudaError_t s = Handled(cudaSetDevice(device));
      s != cudaSuccess || (s = Handled(cudaFree(nullptr))) != cudaSuccess) {
    *error = std::string("cannot use CUDA device ") + std::to_string(device) + ": " +
             cudaGetErrorString(s);
    return nullptr;
  }
  const CUmemAllocationProp prop = DeviceMemory(device);
  size_t granularity = 0;
  if (!Ok(driver.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity", error)) {
    return nullptr;
  }
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUdeviceptr base = 0;
  if (size > 0 && !Ok(driver.address_reserve(&base, size, granularity, 0, 0),
                      "cuMemAddressReserve", error)) {
    return nullptr;
  }
  return std::unique_ptr<VmmRange>(new VmmRange(device, base, size, granularity));
}

VmmRange::VmmRange(int device, uint64_t base, size_t bytes, size_t granularity)
    : device_(device),
      base_(base),
      bytes_(bytes),
      granularity_(granularity),
      handles_(bytes / granularity, 0) {}

VmmRange::~VmmRange() {
  std::string ignored;
  for (size_t i = 0; i < handles_.size(); ++i) UnmapGranule(i, &ignored);
  if (bytes_ > 0) GetDriver().address_free(base_, bytes_);
}

bool VmmRange::CheckRange(size_t offset, size_t bytes, std::string* error) const {
  if (offset % granularity_ != 0 || bytes % granularity_ != 0 || offset > bytes_ ||
      bytes > bytes_ - offset) {
    *error = "range [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
             ") is not granule-aligned (" + std::to_string(granularity_) + ") inside " +
             std::to_string(bytes_);
    return false;
  }
  return true;
}

bool VmmRange::Map(size_t offset, size_t bytes, std::string* error) {
  if (!CheckRange(offset, bytes, error)) return false;
  const Driver& driver = GetDriver();
  const CUmemAllocationProp prop = DeviceMemory(device_);
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::vector<size_t> mapped_now;
  bool ok = true;
  for (size_t i = offset / granularity_; ok && i < (offset + bytes) / granularity_; ++i) {
    if (handles_[i] != 0) continue;
    const CUdeviceptr at = base_ + i * granularity_;
    CUmemGenericAllocationHandle handle = 0;
    ok = Ok(driver.create(&handle, granularity_, &prop, 0), "cuMemCreate", error);
    if (!ok) break;
    ok = Ok(driver.map(at, granularity_, 0, handle, 0), "cuMemMap", error);
    if (!ok) {
      driver.release(handle);
      break;
    }
    handles_[i] = handle;
    ++mapped_granules_;
    mapped_now.push_back(i);
    ok = Ok(driver.set_access(at, granularity_, &access, 1), "cuMemSetAccess", error);
    if (ok) {
      // New physical memory holds whatever was there before: zero it, as the backing contract
      // promises (and as host pages arrive).
      const cudaError_t s = cudaMemset(reinterpret_cast<void*>(at), 0, granularity_);
      if (s != cudaSuccess) {
        *error = std::string("zeroing mapped memory: ") + cudaGetErrorString(s);
        ok = false;
      }
    }
  }
  if (!ok) {
    std::string ignored;
    for (size_t i : mapped_now) UnmapGranule(i, &ignored);
  }
  return ok;
}

bool VmmRange::Unmap(size_t offset, size_t bytes, std::string* error) {
  if (!CheckRange(offset, bytes, error)) return false;
  // Work queued on the device may still use the memory.
  if (const cudaError_t s = cudaDeviceSynchronize(); s != cudaSuccess) {
    *error = std::string("cudaDeviceSynchronize before unmapping: ") + cudaGetErrorString(s);
    return false;
  }
  bool ok = true;
  for (size_t i = offset / granularity_; i < (offset + bytes) / granularity_; ++i) {
    ok = UnmapGranule(i, error) && ok;
  }
  return ok;
}

bool VmmRange::UnmapGranule(size_t index, std::string* error) {
  if (handles_[index] == 0) return true;
  const Driver& driver = GetDriver();
  const CUdeviceptr at = base_ + index * granularity_;
  const bool unmapped = Ok(driver.unmap(at, granularity_), "cuMemUnmap", error);
  const bool released = Ok(driver.release(handles_[index]), "cuMemRelease", error);
  handles_[index] = 0;
  --mapped_granules_;
  return unmapped && released;
}

}  // namespace tandem::kernels::cuda
