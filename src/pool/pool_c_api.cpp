// The C API of the typed bulk pool: the same engine as tenon::mass_pool<T>
// (tenon::detail::pool_core), for untyped slots. Built without exceptions.
#include <errno.h>

#include <new>

#include "tenon/mass_pool.h"
#include "tenon/mass_pool.hpp"

// The opaque C handle is the engine itself, placed in its own pages (the
// pool code never calls malloc, so it works inside the allocator too).
struct tenon_pool {
  tenon::detail::pool_core core;
};


extern "C" {

tenon_pool* tenon_pool_new_ex(size_t elem_size, size_t align, unsigned block_shift, unsigned flags) {
  if (elem_size == 0 || align == 0 || (align & (align - 1)) || align > 4096 || block_shift > 24 ||
      elem_size > (size_t{1} << 32) || (flags & ~TENON_POOL_DENSE)) {
    errno = EINVAL;
    return nullptr;
  }
  void* mem = tenon_pool_reserve_block(sizeof(tenon_pool), 0);
  if (!mem) {
    errno = ENOMEM;
    return nullptr;
  }
  auto* pool = ::new (mem) tenon_pool{};
  if (!pool->core.init(elem_size, align, block_shift, (flags & TENON_POOL_DENSE) != 0)) {
    tenon_pool_release_block(mem, sizeof(tenon_pool));
    errno = ENOMEM;
    return nullptr;
  }
  return pool;
}

tenon_pool* tenon_pool_new_shift(size_t elem_size, size_t align, unsigned block_shift) {
  return tenon_pool_new_ex(elem_size, align, block_shift, 0);
}

tenon_pool* tenon_pool_new(size_t elem_size, size_t align) {
  return tenon_pool_new_ex(elem_size, align, 0, 0);
}

void* tenon_pool_alloc(tenon_pool* pool, uint32_t* index_out) {
  const auto c = pool->core.acquire();
  if (!c.slot) {
    errno = c.status == tenon::detail::pool_core::full ? EOVERFLOW : ENOMEM;
    if (index_out) *index_out = TENON_POOL_NO_INDEX;
    return nullptr;
  }
  if (index_out) *index_out = c.index;
  return c.slot;
}

void* tenon_pool_at(const tenon_pool* pool, uint32_t index) { return pool->core.at(index); }

size_t tenon_pool_size(const tenon_pool* pool) { return static_cast<size_t>(pool->core.size()); }

void tenon_pool_clear(tenon_pool* pool) { pool->core.reset(); }

void tenon_pool_clear_keep_memory(tenon_pool* pool) { pool->core.reset(true); }

void tenon_pool_free(tenon_pool* pool) {
  if (!pool) return;
  pool->core.destroy();
  pool->~tenon_pool();
  tenon_pool_release_block(pool, sizeof(tenon_pool));
}

int tenon_pool_set_max_elements(tenon_pool* pool, uint64_t max_elements) {
  return pool->core.set_limit(max_elements) ? 0 : EINVAL;
}

}  // extern "C"
