// A memory source over one region the caller provides (an embedded or
// real-time program that must not map memory after start-up, or that gives
// tenon a pre-faulted, locked region). Ranges are cut from the region's
// start with a CAS on a cursor (lock-free); what is released is not reused
// (tenon keeps its chunks for the life of the process anyway; only huge
// blocks are ever released, and the huge cache keeps recent ones).
#pragma once
#include <cstddef>

#include "tenon/platform/os.h"

namespace tenon::os {

// Installs [base, base + size) as the memory source. The region must be
// anonymous, private, read-write memory that reads as zeros (a fresh mmap'ed
// range, a static array never written):
// tenon drops the pages of free parts with madvise(MADV_DONTNEED). False if
// memory was reserved already, or the region cannot hold one chunk.
bool use_fixed_region(void* base, std::size_t size);

}  // namespace tenon::os
