// Counts the C++ heap allocations of the process (every operator new), for `ontrain bench`'s "allocations
// per step". Linked into the ontrain binary only (tools/); memory that C code or OpenBLAS gets from malloc
// directly is not seen.
#pragma once

#include <cstdint>

namespace ontrain {
namespace cli {

int64_t HeapAllocations();

}  // namespace cli
}  // namespace ontrain
