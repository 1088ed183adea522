/* Counters of tenon's statistics for the C programs run under LD_PRELOAD
 * (tests/preload): read from tenon_stats_print, found with dlsym, so that
 * the program links no tenon library. */
#pragma once
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One number from tenon_stats_print, which writes to stderr: read back
 * through a temporary file put in place of fd 2. */
static long stat_value(const char* name) {
  void (*print)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "tenon_stats_print");
  if (!print) {
    fprintf(stderr, "FAILED: tenon_stats_print not found: run under LD_PRELOAD=libtenon.so\n");
    exit(1);
  }
  FILE* tmp = tmpfile();
  if (!tmp) return -1;
  fflush(stderr);
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  print();
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  char line[256];
  long value = -1;
  while (fgets(line, sizeof line, tmp)) {
    long v;
    char text[200];
    if (sscanf(line, " %ld %199[^\n]", &v, text) == 2 && strcmp(text, name) == 0) value = v;
  }
  fclose(tmp);
  return value;
}

/* -1 if the counters are missing. */
static long heaps_in_use(void) {
  long attached = stat_value("thread heaps attached"), released = stat_value("thread heaps released");
  return attached < 0 || released < 0 ? -1 : attached - released;
}
