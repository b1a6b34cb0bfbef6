#include "engine/heap_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tandem::engine {

bool ReturnFreeHeapToOs() {
#if defined(__GLIBC__)
  return malloc_trim(0) != 0;
#else
  return false;
#endif
}

}  // namespace tandem::engine
