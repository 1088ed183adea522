/* The protocol's one-byte read and write (bench/security/misuse.h: ACCESS before the
 * access, DONE after it), for the probes of this folder written in C. */
#ifndef TENON_TESTS_ACCESS_PROBE_H
#define TENON_TESTS_ACCESS_PROBE_H
#include <stdio.h>

static inline void access_read(const char* what, char* at) {
  printf("ACCESS read %s %p\n", what, (void*)at);
  fflush(stdout);
  volatile char c = *(volatile char*)at;
  (void)c;
  printf("DONE\n");
}

/* The same for a one-byte write (the byte flipped). */
static inline void access_write(const char* what, char* at) {
  printf("ACCESS write %s %p\n", what, (void*)at);
  fflush(stdout);
  *(volatile char*)at ^= 1;
  printf("DONE\n");
}

#endif
