// st-mixed: single-threaded, mixed sizes, in the spirit of cfrac/espresso:
// short-lived small "bignums" (8-200 bytes) created and dropped at a high
// rate, a longer-lived tree of nodes, occasional realloc growth of buffers.
// usage: st_mixed OPS
#include "common.h"

namespace {
struct Node {
  Node* left;
  Node* right;
  long key;
  char* payload;
};

Node* insert(Node* root, long key, wl::Rng& rng) {
  Node** at = &root;
  while (*at) at = key < (*at)->key ? &(*at)->left : &(*at)->right;
  Node* n = new Node{nullptr, nullptr, key, static_cast<char*>(malloc(16 + rng.below(48)))};
  n->payload[0] = char(key);
  *at = n;
  return root;
}

void destroy(Node* n, uint64_t& sum) {
  while (n) {
    destroy(n->left, sum);
    Node* r = n->right;
    sum += uint8_t(n->payload[0]);
    free(n->payload);
    delete n;
    n = r;
  }
}
}  // namespace

int main(int argc, char** argv) {
  long ops = wl::arg(argc, argv, 1, 3000000);
  wl::Rng rng(42);
  uint64_t sum = 0;
  Node* tree = nullptr;
  long tree_size = 0;
  std::vector<char*> temps;
  size_t buf_cap = 64;
  char* buf = static_cast<char*>(malloc(buf_cap));
  for (long i = 0; i < ops; i++) {
    // A "bignum" operation: a few temporaries, most dropped at once.
    size_t sz = 8 + rng.below(192);
    char* t = static_cast<char*>(malloc(sz));
    t[0] = char(i);
    temps.push_back(t);
    if (temps.size() > 8 || rng.below(4) == 0) {
      for (auto* p : temps) { sum += uint8_t(p[0]); free(p); }
      temps.clear();
    }
    if (rng.below(16) == 0) { tree = insert(tree, long(rng.next() >> 1), rng); tree_size++; }
    if (tree_size > 20000) { destroy(tree, sum); tree = nullptr; tree_size = 0; }
    if (rng.below(64) == 0) {
      // Grow or restart an output buffer, as a string builder does.
      if (buf_cap > (1u << 16)) buf_cap = 64; else buf_cap *= 2;
      buf = static_cast<char*>(realloc(buf, buf_cap));
      buf[buf_cap - 1] = 1;
    }
  }
  for (auto* p : temps) free(p);
  destroy(tree, sum);
  free(buf);
  wl::checksum() += sum;
  wl::done("st-mixed");
}
