// A small template-heavy C++ program compiled (and run) by case_gcc_compile.sh:
// the compiler's own memory use is the point as much as the program's.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

template <class K, class V>
std::vector<std::pair<K, V>> top(const std::unordered_map<K, V>& m, std::size_t n) {
  std::vector<std::pair<K, V>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  v.resize(std::min(n, v.size()));
  return v;
}

int main() {
  std::unordered_map<std::string, int> counts;
  std::map<int, std::vector<std::unique_ptr<std::string>>> by_length;
  unsigned x = 777;
  for (int i = 0; i < 100000; ++i) {
    x = x * 1664525u + 1013904223u;
    std::string w(1 + (x >> 20) % 5, 'a');
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = static_cast<char>('a' + (x >> (k * 4 + 2)) % 5);
    ++counts[w];
    by_length[static_cast<int>(w.size())].push_back(std::make_unique<std::string>(w));
  }
  for (const auto& [word, count] : top(counts, 5)) std::printf("%s %d\n", word.c_str(), count);
  for (const auto& [len, words] : by_length) {
    std::size_t chars = std::accumulate(words.begin(), words.end(), std::size_t{0},
                                        [](std::size_t s, const auto& p) { return s + p->size(); });
    std::printf("length %d: %zu words, %zu chars\n", len, words.size(), chars);
  }
}
