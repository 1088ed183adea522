// Secure layers, engine policy: encoded_links, the `links` policy of the
// secure config. A free block's link is stored XORed with its span's key
// (secret.h: the process secret mixed with the span descriptor's address),
// so a freshly allocated block's first word, or one read after free, is no
// address; and a link read back is checked before it is followed: a forged
// or overwritten link (a write after free into the first word) decodes to an
// address outside tenon's chunks, or misaligned, and ends the program
// instead of handing that address out.
#pragma once
#include <cstdint>

#include "tenon/lookup/chunk_map.h"
#include "tenon/platform/misuse.h"
#include "tenon/secure/secret.h"
#include "tenon/span/span.h"

namespace tenon::secure {

struct encoded_links {
  // In line on the allocation fast path (GCC otherwise outlines it when the
  // code around changes: a call and 10 instructions more a malloc).
  [[gnu::always_inline]] static block* next(const block* b, const span* s) {
    std::uintptr_t raw = reinterpret_cast<std::uintptr_t>(b->next) ^ drawn_key_for(s);
    auto* n = reinterpret_cast<block*>(raw);
    // is_regular first, in line: the common case of in_chunk without its call.
    if (__builtin_expect(n != nullptr && ((raw & 7) != 0 || (!lookup::is_regular(n) && !lookup::in_chunk(n))), 0))
      report_misuse("malloc", b, "free list corrupted (a write after free?)", s->block_size);
    return n;
  }
  [[gnu::always_inline]] static void set_next(block* b, block* next, const span* s) {
    b->next = reinterpret_cast<block*>(reinterpret_cast<std::uintptr_t>(next) ^ drawn_key_for(s));
  }
  // Every link is first written by carve, which calls this first (the
  // engine's hook, heap/spans.ipp): the secret is drawn there, so next and
  // set_next read it with no test (secret.h, drawn_secret). A link read or
  // written later is of a block carved before, on a list the thread took
  // from the carver or was handed the block through.
  static void before_carve() { (void)secret(); }
};

}  // namespace tenon::secure
