// Geometry of the allocator. Every layer takes its sizes from here so that the
// relations between them (a chunk holds 64 slices, a small span fits in a
// chunk, ...) are checked in one place.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tenon {

// A chunk is the unit the address-space layer takes from the OS: 4 MiB,
// aligned to its size, so that masking any interior pointer finds its header.
constexpr unsigned kChunkShift = 22;
constexpr std::size_t kChunkSize = std::size_t{1} << kChunkShift;

// A chunk is cut into 64 slices of 64 KiB, so one 64-bit word is the whole
// chunk's occupancy bitmap and a run of slices is taken with one CAS.
constexpr unsigned kSliceShift = 16;
constexpr std::size_t kSliceSize = std::size_t{1} << kSliceShift;
constexpr unsigned kSlicesPerChunk = 64;
static_assert(kSliceSize * kSlicesPerChunk == kChunkSize);

// Slice 0 holds the chunk header (descriptors), so a span has at most 63.
constexpr unsigned kMaxSpanSlices = kSlicesPerChunk - 1;

// Requests up to kMaxSmall are served from size-class spans owned by thread
// heaps; up to kMaxLarge from page-granular runs of slices; above, from
// dedicated mappings (huge).
constexpr std::size_t kMaxSmall = 32 * 1024;
constexpr std::size_t kMaxLarge = 2 * 1024 * 1024;

// User-space addresses are below 2^48 on x86-64 and aarch64 (48-bit VA).
constexpr unsigned kAddressBits = 48;
constexpr std::size_t kMapUnits = std::size_t{1} << (kAddressBits - kChunkShift);

// The free fast path finds a chunk in a direct-mapped table indexed by the
// unit number modulo its size: 2^16 slots of 8 bytes (512 KiB of address
// space) hold every chunk of any 256 GiB window. A chunk whose slot another
// chunk holds (256 GiB apart) is found through the unit map instead.
constexpr unsigned kChunkTableBits = 16;

// The unit map says what every other unit holds (a huge block and its range,
// or a chunk without a table slot): a directory in .bss and leaves of 2^13
// units (64 KiB, for 32 GiB of address space) reserved when first needed and
// never unmapped. Directory: 2^13 entries, 64 KiB.
constexpr unsigned kUnitLeafBits = 13;
constexpr unsigned kUnitDirBits = kAddressBits - kChunkShift - kUnitLeafBits;

// Minimum alignment of every block of 16 bytes or more.
constexpr std::size_t kMinAlign = 16;

// Free slices whose pages are still resident, kept per chunk for reuse
// without page faults; past this many the oldest are purged (the rest go
// after TENON_PURGE_DELAY_MS). 8 of 63: an eighth (16 cost 1.2x glibc's peak
// RSS on glibc-thread, 4 doubled its system time).
constexpr unsigned kMaxDirtyPerChunk = 8;

// ...but only slices free for at least this long, in ticks of the coarse
// clock (4 ms at HZ=250): the frees of a bulk free come within it, and a
// refill right after reuses those pages. Purging at once faulted 7/8 of them
// back in (20M x 64 B: 0.71 s a refill, 0.18-0.22 s with the grace) and put
// an madvise on the free path (free p99.99 21,021 cycles, 980 with it). A
// longer grace was faster still on churn (mstress T16 0.96 of glibc's time
// at 50 ms, 1.62 at 4 ms) but kept whole free runs resident where their
// next users touch only part of them: suite peak RSS 0.98 of glibc's at
// 50 ms, 0.87 at 4 ms, 0.89 with no grace; 8 ms already took mstress T1
// from 23.7 to 32.6 MiB (see architecture.md, known limits).
constexpr std::uint32_t kDirtyGraceMs = 4;

// TENON_HUGE_PAGES=4 advises a new chunk MADV_HUGEPAGE only when the
// arena's newest this-many chunks are all at least 7/8 used: a program that
// already filled 16 MiB of chunks and asks for more is likely to fill the
// next one too, so its pages come in 2 MiB at a time; a program smaller
// than that keeps 64 KiB granularity (the first half of an advised chunk is
// resident whole at its header's first write). See architecture.md,
// "Pre-faulting and huge pages".
constexpr unsigned kHugeChunksAfter = 4;
constexpr unsigned kHugeChunkMinUsed = kSlicesPerChunk - kSlicesPerChunk / 8;
// ...and advises a fresh huge block while the last unadvised one was
// written densely, leaving one in this many unadvised to learn from.
constexpr unsigned kHugeProbeEvery = 8;
// ...only up to this size: a fresh huge page costs here far more than its
// 2 MiB of zeroing (size-sweep's malloc and touch of 128 MiB-1 GiB took
// 2.8-10x as long advised, the 2-64 MiB cells 0.4-1.0x).
constexpr std::size_t kHugeAdviseMax = std::size_t{64} << 20;

// Slices over the cap are marked by the release that finds them and purged
// by the purge pass, which runs as soon as this many are marked in all
// chunks together (or when due): at most 256 KiB wait for their purge, and
// one over-cap release in this many makes the system calls, for all of
// them, adjacent slices in one call.
constexpr unsigned kMaxMarkedSlices = kMaxDirtyPerChunk / 2;

// The background purger (arena/purger.cpp) is started lazily by a release
// that keeps at least this many slices resident in one run (1 MiB), or that
// leaves a chunk over kMaxDirtyPerChunk, or by a huge block cached: a program
// that only ever keeps a few free slices (ls: one 32 KiB directory buffer)
// gets no thread.
constexpr unsigned kPurgerStartSlices = 16;

// The purger sleeps until the next purge pass is due, but never less than
// this (TENON_PURGE_DELAY_MS=0 would otherwise wake it every millisecond).
constexpr std::uint32_t kPurgerMinSleepMs = 10;

// Taking slices looks for already-dirty ("warm") runs in this many chunks
// before it uses clean ones, of those the warm map says hold a free resident
// slice, reading at most kWarmScanWords words of the map (bounded, so a huge
// heap does not make every span take a full scan).
constexpr unsigned kWarmScanChunks = 64;
constexpr unsigned kWarmScanWords = 64;

// Owned-chunk registry (for reuse scans and the purge pass): 1 TiB of chunks,
// in blocks of 2^13 slots (64 KiB, and the warm map's 1 KiB after them: arena.h)
// reserved as the count reaches them.
constexpr std::size_t kMaxChunks = std::size_t{1} << 18;
constexpr std::size_t kChunkRegistryBlock = std::size_t{1} << 13;

// Thread heaps live in segments of 64 (about 146 KiB), reserved as the heap
// count reaches them and never unmapped, and are recycled.
constexpr std::size_t kMaxHeaps = std::size_t{1} << 16;
constexpr std::size_t kHeapsPerSegment = 64;

// Huge mappings kept after free for reuse (the lesson of malloc-large), at
// most this many and this much; given back after TENON_PURGE_DELAY_MS. 96 MiB
// made 20 threads x 33 MiB (thread-chunks) fault every block in: 162 ms a
// round against tcmalloc's 47; 256 MiB: 25 ms, and a lower peak RSS.
constexpr unsigned kHugeCacheSlots = 32;
// Freed huge blocks that a malloc_usable_size was reading in place when
// they were freed (a use after free by the program), kept mapped until it is
// done: at most this many at once, past which one more stays mapped and
// held for good (huge_maps::defer).
constexpr unsigned kHugeDeferSlots = 8;
constexpr std::size_t kHugeCacheMaxBlock = 64u << 20;
constexpr std::size_t kHugeCacheMaxTotal = 256u << 20;
// Beside them, one bigger block at a time (outside that total), if it fits in
// half of the memory free (machine and cgroup), for a shorter time: the purge
// delay times kHugeCacheMaxBlock / its size, so that it holds no more
// byte-milliseconds than the biggest ordinary block. A loop over one big
// buffer (size-sweep's 128 MiB ... 1 GiB steps) then reuses its pages instead
// of faulting them all in again (architecture.md, layer 7).

// calloc of a reused block (a cached huge mapping) of at least this many
// bytes drops its pages (MADV_DONTNEED) instead of clearing them: the kernel
// then zeroes only the pages the program touches, at a page fault each.
// Below it, memset. 32 MiB is where glibc stops reusing heap memory for a
// request and maps fresh pages (DEFAULT_MMAP_THRESHOLD_MAX), so on both
// sides tenon does the work glibc does (see architecture.md, huge blocks).
constexpr std::size_t kCallocDropMin = std::size_t{32} << 20;
// ... unless the block is resident: its first kCallocProbePages pages all, and
// all but 1/kCallocDenseShare of the whole (mincore). Such a block was written
// by its last user and is cleared with memset, which costs a fraction of the
// page faults that dropping it would bring a caller that writes it again.
constexpr std::size_t kCallocProbePages = 16;
constexpr std::size_t kCallocDenseShare = 8;

// A cached huge block reused for a request at least kHugeSplitMin smaller
// than its capacity, while no other block is cached, has the excess split
// off and cached on its own when the excess's first kHugeSplitProbePages
// pages are all resident (huge.cpp, cache_take and split_tail); otherwise the
// excess stays with the block. Twice the large limit: a tail that can hold a
// huge request.
constexpr std::size_t kHugeSplitMin = 2 * kMaxLarge;
constexpr std::size_t kHugeSplitProbePages = 16;

// A heap keeps one emptied span per class instead of returning it at once
// when the class has at most this many blocks per span (4 KiB and up): such
// spans go empty all the time, and forming them again and again spreads them
// over ever more slices (glibc-thread formed each 1,000-1,500 times).
constexpr unsigned kKeepEmptyMaxBlocks = 16;

// A heap about to form a new span takes unowned spans of that class first,
// one at a time, at most this many, until one has a free block...
constexpr unsigned kAdoptPerGrowth = 8;

// ...and once per kSweepEvery times absorbs up to kSweepPerClass unowned
// spans of every class (a class nobody allocates any more is reclaimed too;
// bounded, so that no one thread takes a whole stack while others grow).
constexpr unsigned kSweepEvery = 64;
constexpr unsigned kSweepPerClass = 16;

// tenon's thread-exit key takes this slot (or the lowest free one above),
// so that the destructors of the program's first keys (below it) run before
// tenon's in every round, and a heap one of them attaches in glibc's last
// round is still released. 31 is the last slot of the block glibc keeps in
// each thread: a key past it needs a second-level array, a calloc at each
// thread's first pthread_setspecific, which can fail (at 64, under memory
// pressure, the key then held nothing and the thread's heap stayed attached
// for good: preload.thread_key_under_limit). Finding the slot creates and
// deletes up to 31 keys, once (about 5 thousand instructions; the last slot,
// 1,023, took 4.8 million at every process's start).
constexpr unsigned kThreadKeyMinSlot = 31;

// The first-class heaps' thread-exit key (it gives a thread's heap-thread id
// back) takes the slot just below, for the same reason: a heap call made by
// a program key's destructor in glibc's last round gets its id back in that
// round. Below tenon's rather than above: a slot past kThreadKeyMinSlot
// needs the second-level array. Each finds its slot whichever is made
// first.
constexpr unsigned kHeapsThreadKeyMinSlot = kThreadKeyMinSlot - 1;

// A heap parked at its thread's exit waits this long for a new thread to
// take it over before a heap about to form a span may give it up (and
// absorb its spans). Giving up any parked heap at once broke the hand-over:
// a round's first threads formed spans before the last ones had started,
// and dissolved the heaps those were to take over (larson T2: 9 of 16).
constexpr std::uint32_t kParkedGraceMs = 50;

// The block cache's bound of a class (include/tenon/heap/block_cache.h) is
// a heap's share of this many bytes, divided among the heaps attached to
// threads, between the fixed bound (kBlockCacheClassBytes) and
// kBlockCacheMaxClassBytes: a program of a few threads gets the bigger
// caches that glibc-thread gains from, one of many threads keeps today's
// (512 KiB for all heaps cost thread_scaling 1.13 of its CPU and 1.15 of
// its peak RSS, mstress T16 1.10 and 1.07: architecture.md, block cache).
constexpr std::size_t kBlockCacheBudgetBytes = 2048 * 1024;
constexpr std::size_t kBlockCacheMaxClassBytes = 512 * 1024;

// Each thread heap keeps a few runs of slices that its thread's frees of
// large blocks gave up, for its next large blocks of the same slice count
// (arena/run_cache.h): a large free and malloc then touch no word that other
// threads write (the chunk's occupancy and dirty words). At most
// kRunCacheSlots runs of at most kRunCacheMaxRunSlices slices each, and at
// most a heap's share of kRunCacheBudgetSlices (divided among the heaps
// attached to threads) between 1 and kRunCacheHeapSlices slices in all.
// Figures in architecture.md, layer 6.
constexpr unsigned kRunCacheSlots = 8;
constexpr unsigned kRunCacheMaxRunSlices = 4;
constexpr unsigned kRunCacheHeapSlices = 8;
constexpr unsigned kRunCacheBudgetSlices = 32;

// Remote frees bound for one owner heap are gathered by the freeing thread
// (in an outbox) up to this many blocks before they go to its inbox in one CAS.
constexpr unsigned kRemoteBatchMax = 64;

}  // namespace tenon
