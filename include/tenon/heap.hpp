// C++ adapters over tenon's first-class heaps (docs/heaps.md):
//   tenon::heap           owns a tenon_heap_t; its destructor destroys it
//                         (every block allocated from it is released).
//   tenon::heap_resource  a std::pmr::memory_resource over a heap of its own:
//                         deallocate is a plain free; destroying the resource
//                         releases whatever is still allocated.
//   tenon::allocator<T>   a standard allocator over the default allocator
//                         (tenon_malloc) or over a heap.
// Header-only over the C API of <tenon/tenon.h>; link libtenon.a or
// libtenon.so. Allocation failure throws std::bad_alloc where exceptions are
// enabled, and ends the program otherwise.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory_resource>
#include <new>
#include <utility>

#include "tenon/tenon.h"

namespace tenon {

namespace heap_detail {
[[noreturn]] inline void out_of_memory() {
#if defined(__cpp_exceptions)
  throw std::bad_alloc();
#else
  std::abort();
#endif
}
}  // namespace heap_detail

class heap {
 public:
  // limit: bytes the heap may hold (0: no limit); see tenon_heap_options.
  explicit heap(std::size_t limit = 0) {
    tenon_heap_options options{limit};
    h_ = tenon_heap_new(&options);
    if (!h_) heap_detail::out_of_memory();
  }
  ~heap() { tenon_heap_destroy(h_); }
  heap(heap&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  heap& operator=(heap&& other) noexcept {
    if (this != &other) {
      tenon_heap_destroy(h_);
      h_ = std::exchange(other.h_, nullptr);
    }
    return *this;
  }
  heap(const heap&) = delete;
  heap& operator=(const heap&) = delete;

  // The C API's answers: nullptr (errno set) on failure.
  void* malloc(std::size_t n) noexcept { return tenon_heap_malloc(h_, n); }
  void* calloc(std::size_t count, std::size_t n) noexcept { return tenon_heap_calloc(h_, count, n); }
  void* realloc(void* p, std::size_t n) noexcept { return tenon_heap_realloc(h_, p, n); }
  void* aligned_alloc(std::size_t align, std::size_t n) noexcept { return tenon_heap_aligned_alloc(h_, align, n); }
  void free(void* p) noexcept { tenon_heap_free(h_, p); }
  // Release every block; the heap stays usable.
  void reset() noexcept { tenon_heap_reset(h_); }
  tenon_heap_t* get() const noexcept { return h_; }

 private:
  tenon_heap_t* h_;
};

class heap_resource : public std::pmr::memory_resource {
 public:
  explicit heap_resource(std::size_t limit = 0) : heap_(limit) {}
  // Release everything allocated through this resource (its containers must
  // not be used afterwards).
  void release() noexcept { heap_.reset(); }
  tenon::heap& underlying() noexcept { return heap_; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    void* p = align <= alignof(std::max_align_t) ? heap_.malloc(bytes) : heap_.aligned_alloc(align, bytes);
    if (!p) heap_detail::out_of_memory();
    return p;
  }
  void do_deallocate(void* p, std::size_t, std::size_t) override { heap_.free(p); }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

 private:
  tenon::heap heap_;
};

// Over the default allocator when made without a heap; over `h` otherwise
// (h must outlive every block: a container using it is dropped with the heap,
// or destroyed first). Two allocators are equal when they use the same heap.
template <class T>
class allocator {
 public:
  using value_type = T;

  allocator() noexcept = default;
  explicit allocator(tenon_heap_t* h) noexcept : heap_(h) {}
  explicit allocator(tenon::heap& h) noexcept : heap_(h.get()) {}
  template <class U>
  allocator(const allocator<U>& other) noexcept : heap_(other.heap_handle()) {}

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) heap_detail::out_of_memory();
    std::size_t bytes = n * sizeof(T);
    void* p;
    if (alignof(T) <= alignof(std::max_align_t))
      p = heap_ ? tenon_heap_malloc(heap_, bytes) : tenon_malloc(bytes);
    else
      p = heap_ ? tenon_heap_aligned_alloc(heap_, alignof(T), bytes) : tenon_aligned_alloc(alignof(T), bytes);
    if (!p) heap_detail::out_of_memory();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) noexcept { tenon_heap_free(heap_, p); }

  tenon_heap_t* heap_handle() const noexcept { return heap_; }

  template <class U>
  bool operator==(const allocator<U>& other) const noexcept {
    return heap_ == other.heap_handle();
  }

 private:
  tenon_heap_t* heap_ = nullptr;
};

}  // namespace tenon
