/* Loaded by preload_c_api foreign_dl_lock: its constructor runs inside
 * dlopen, where the dynamic linker holds its lock, allocates, says so on one
 * pipe and stays there until a byte arrives on another. A thread stopped
 * inside dlopen (or inside malloc called from dlopen) looks like this to the
 * rest of the process. The pipes' descriptors come in TENON_TEST_PARK_FDS
 * ("ready,go"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void* kept;

__attribute__((constructor)) static void park_inside_dlopen(void) {
  const char* fds = getenv("TENON_TEST_PARK_FDS");
  int ready, go;
  if (!fds || sscanf(fds, "%d,%d", &ready, &go) != 2) return;
  kept = malloc(100);
  if (kept) memset(kept, 1, 100);
  char c = 'r';
  if (write(ready, &c, 1) != 1) return;
  while (read(go, &c, 1) < 0) {}
}

__attribute__((destructor)) static void unpark(void) { free(kept); }
