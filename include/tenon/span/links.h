// The free-list link policy of the engines: how the link that chains free
// blocks (on a span's local and remote lists, in outboxes and inboxes) is
// written into and read out of a free block's first word. Every link of a
// block of span s is written and read through the policy with s, so that a
// policy can key its encoding by span.
// A policy may also have a static before_carve(), which carve calls before
// it writes the links of fresh blocks (secure/links.h draws its secret there).
//   plain_links (the default): the link is the next block's address.
#pragma once
#include "tenon/span/span.h"

namespace tenon {

struct plain_links {
  static block* next(const block* b, const span*) { return b->next; }
  static void set_next(block* b, block* next, const span*) { b->next = next; }
};

}  // namespace tenon
