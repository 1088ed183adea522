// Layer 9, front end: the owner of a large or huge block that belongs to a
// first-class heap. A large span's `owner` (a huge block's header's `owner`)
// is nullptr for a block of the default allocator; a heap's block names its
// record there, so that
// free() from any thread hands it back through the heap (which must forget
// it, or its destroy would release it a second time). Called through a
// function pointer: the front end of any engine can route such a block
// without linking the heaps' code.
#pragma once
namespace tenon {

struct large_owner {
  // Free the block p, which names this owner.
  void (*free)(large_owner* self, void* p) noexcept;
};

}  // namespace tenon
