// How much memory this process can have at most: the machine's physical memory, or less when a
// container's cgroup limits it (Kubernetes memory limits arrive this way).
#ifndef TANDEM_SERVER_UTIL_HOST_MEMORY_H_
#define TANDEM_SERVER_UTIL_HOST_MEMORY_H_

#include <cstddef>

namespace tandem::server {

// min(physical memory, cgroup v2 memory.max, cgroup v1 memory.limit_in_bytes), in bytes.
size_t HostMemoryBytes();

}  // namespace tandem::server

#endif  // TANDEM_SERVER_UTIL_HOST_MEMORY_H_
