// The C++ misuse programs of the security benchmark: deallocation that does
// not match the allocation (sized delete with the wrong size, delete of a
// new[] object). Same protocol as misuse.c (misuse.h). The operators are
// called by name so that the size passed is exactly the one chosen here.
#include <cstddef>
#include <cstring>
#include <new>

#include "misuse.h"

namespace {

constexpr std::size_t kKiB = 1024;

// A 32 B block deleted as 4 KiB, or a 256 KiB one as 16 B: an allocator that
// trusts the size files the block under the wrong class, and a later
// allocation of that size hands it out. As in misuse.c's free_sized_wrong, a
// block of the wrong size allocated first and a live neighbour of p keep a
// correct allocator from handing p's memory out again legitimately.
void sized_delete_wrong(std::size_t n) {
  std::size_t wrong = n <= 64 ? 4096 : 16;
  void* warm = misuse_need(::operator new(wrong), "operator new");
  void* p = misuse_need(::operator new(n), "operator new");
  void* neighbour = misuse_need(::operator new(n), "operator new");
  std::memset(p, 0x5a, n);
  misuse_call("operator delete(void*, size_t)", p);
  ::operator delete(misuse_opaque(p), wrong);
  misuse_done();
  misuse_check_handed_out(p, wrong, 8);
  misuse_opaque(warm);
  misuse_opaque(neighbour);
}

// A non-trivial destructor makes new[] store the element count in front of
// the array, so the block starts 8 bytes before the pointer the program
// holds: `delete` (not `delete[]`) frees an interior pointer, with the size
// of one element.
struct counted {
  char pad[24];
  ~counted() { misuse_opaque(pad); }
};

void delete_new_array(std::size_t) {
  counted* a = static_cast<counted*>(misuse_opaque(new counted[8]));
  char* block = reinterpret_cast<char*>(a) - sizeof(std::size_t);
  misuse_call("delete (not delete[])", a);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
  delete a;
#pragma GCC diagnostic pop
  misuse_done();
  misuse_check_overlap(block, sizeof(std::size_t) + 8 * sizeof(counted), sizeof(counted), 8);
}

const misuse_case kCases[] = {
  {"sized_delete_wrong_32", "sized free", "operator delete(p, 4096) of a 32 B block", sized_delete_wrong, 32},
  {"sized_delete_wrong_256k", "sized free", "operator delete(p, 16) of a 256 KiB block", sized_delete_wrong,
   256 * kKiB},
  {"delete_new_array", "sized free", "delete (not delete[]) of a new[] array with destructors", delete_new_array, 0},
};

}  // namespace

int main(int argc, char** argv) { return misuse_main(kCases, sizeof kCases / sizeof kCases[0], argc, argv); }
