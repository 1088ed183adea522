/* A small C program compiled (and run) by case_gcc_compile.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
  struct node* next;
  char* word;
  int count;
};

static unsigned hash(const char* s) {
  unsigned h = 2166136261u;
  while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
  return h;
}

static int by_count(const void* a, const void* b) {
  const struct node* x = *(const struct node* const*)a;
  const struct node* y = *(const struct node* const*)b;
  if (x->count != y->count) return y->count - x->count;
  return strcmp(x->word, y->word);
}

int main(void) {
  enum { BUCKETS = 1024 };
  struct node* table[BUCKETS] = {0};
  unsigned x = 12345;
  int distinct = 0;
  for (int i = 0; i < 200000; ++i) {
    char word[16];
    x = x * 1103515245u + 12345u;
    int len = 1 + (x >> 16) % 4;
    for (int k = 0; k < len; ++k) word[k] = 'a' + (x >> (k * 5 + 3)) % 6;
    word[len] = 0;
    struct node** slot = &table[hash(word) % BUCKETS];
    while (*slot && strcmp((*slot)->word, word)) slot = &(*slot)->next;
    if (!*slot) {
      *slot = calloc(1, sizeof **slot);
      (*slot)->word = strdup(word);
      ++distinct;
    }
    (*slot)->count++;
  }
  struct node** all = malloc(distinct * sizeof *all);
  int n = 0;
  for (int b = 0; b < BUCKETS; ++b)
    for (struct node* e = table[b]; e; e = e->next) all[n++] = e;
  qsort(all, n, sizeof *all, by_count);
  printf("distinct %d\n", distinct);
  for (int i = 0; i < 5 && i < n; ++i) printf("%s %d\n", all[i]->word, all[i]->count);
  for (int i = 0; i < n; ++i) {
    free(all[i]->word);
    free(all[i]);
  }
  free(all);
  return 0;
}
