#include "kernels/cuda/cublas_library.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace tandem::kernels::cuda {
namespace {

template <typename Fn>
bool Lookup(void* handle, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return *fn != nullptr;
}

// The enum's own spelling, which is what one searches for (cublasGetStatusString gives a
// sentence, and is newer than some of the libraries this may load).
const char* StatusEnumName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

// The file the loader actually opened (a bare soname says nothing about which copy it found).
std::string LoadedPath(void* handle, const std::string& name) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return name;
}

// Where cuBLAS 13 sits when the loader's path does not lead to it: the toolkit's directories,
// and the wheels pip installs (nvidia-cublas, beside PyTorch) in the usual site-packages.
std::vector<std::string> WellKnownPaths() {
  std::vector<std::string> paths;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(var);
    if (root != nullptr && root[0] != '\0') {
      paths.push_back(std::string(root) + "/lib64/libcublas.so.13");
      paths.push_back(std::string(root) + "/lib/libcublas.so.13");
    }
  }
  paths.push_back("/usr/local/cuda/lib64/libcublas.so.13");
  paths.push_back("/usr/local/cuda/lib/libcublas.so.13");
  std::vector<std::string> roots = {"/usr/local/lib/python3*/*-packages",
                                    "/usr/lib/python3*/*-packages",
                                    "/usr/lib/python3/dist-packages"};
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const char* root = std::getenv(var);
    if (root != nullptr && root[0] != '\0') {
      roots.push_back(std::string(root) + "/lib/python3*/site-packages");
    }
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    roots.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
  }
  for (const std::string& root : roots) {
    for (const char* wheel :
         {"/nvidia/cu13/lib/libcublas.so.13", "/nvidia/cublas/lib/libcublas.so.13"}) {
      glob_t found = {};
      if (glob((root + wheel).c_str(), 0, nullptr, &found) == 0) {
        for (size_t i = 0; i < found.gl_pathc; ++i) paths.push_back(found.gl_pathv[i]);
      }
      globfree(&found);
    }
  }
  return paths;
}

}  // namespace

bool CublasLibrary::Resolve(void* handle, const std::string& name, std::string* error) {
  const char* missing = nullptr;
  const auto need = [&](const char* symbol, auto* fn) {
    if (!Lookup(handle, symbol, fn) && missing == nullptr) missing = symbol;
  };
  need("cublasCreate_v2", &create);
  need("cublasDestroy_v2", &destroy);
  need("cublasSetStream_v2", &set_stream);
  need("cublasSetWorkspace_v2", &set_workspace);
  need("cublasSetMathMode", &set_math_mode);
  need("cublasGemmEx", &gemm_ex);
  if (missing != nullptr) {
    *error = name + " has no " + missing + " (not cuBLAS 11 or newer?)";
    return false;
  }
  // Optional: only messages use them.
  Lookup(handle, "cublasGetStatusString", &status_string_);
  decltype(&cublasGetProperty) property = nullptr;
  std::string version;
  if (Lookup(handle, "cublasGetProperty", &property)) {
    int major = 0, minor = 0, patch = 0;
    if (property(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        property(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        property(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
      char text[48];
      std::snprintf(text, sizeof(text), " %d.%d.%d", major, minor, patch);
      version = text;
    }
  }
  description_ = "cuBLAS" + version + " (" + LoadedPath(handle, name) + ")";
  return true;
}

std::shared_ptr<const CublasLibrary> CublasLibrary::Open(const std::string& path,
                                                         std::string* error) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    *error = why != nullptr ? why : path + ": cannot be opened";
    return nullptr;
  }
  std::shared_ptr<CublasLibrary> library(new CublasLibrary());
  if (!library->Resolve(handle, path, error)) return nullptr;  // the handle stays open (above)
  return library;
}

std::shared_ptr<const CublasLibrary> CublasLibrary::Default(std::string* error) {
  struct Found {
    std::shared_ptr<const CublasLibrary> library;
    std::string error;
  };
  static const Found found = [] {
    Found f;
    if (const char* path = std::getenv("TANDEM_CUBLAS"); path != nullptr && path[0] != '\0') {
      f.library = Open(path, &f.error);
      if (f.library == nullptr) f.error = "TANDEM_CUBLAS: " + f.error;
      return f;
    }
    // The first failure says most (a soname the loader does not know, or a broken install).
    std::string first;
    for (const std::string& name : {std::string("libcublas.so.13"), std::string("libcublas.so")}) {
      f.library = Open(name, first.empty() ? &first : &f.error);
      if (f.library != nullptr) return f;
    }
    const std::vector<std::string> paths = WellKnownPaths();
    for (const std::string& path : paths) {
      f.library = Open(path, &f.error);
      if (f.library != nullptr) return f;
    }
    f.error = "cuBLAS not found: " + first +
              "; nor in /usr/local/cuda, $CUDA_HOME or pip's nvidia wheels (TANDEM_CUBLAS may "
              "name it)";
    return f;
  }();
  if (found.library == nullptr) *error = found.error;
  return found.library;
}

std::string CublasLibrary::StatusName(cublasStatus_t status) const {
  std::string name = StatusEnumName(status);
  name += " (";
  name += std::to_string(static_cast<int>(status));
  if (const char* text = status_string_ != nullptr ? status_string_(status) : nullptr) {
    name += ": ";
    name += text;
  }
  return name + ")";
}

}  // namespace tandem::kernels::cuda
