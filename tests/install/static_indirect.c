/* A fully static program whose own code calls no allocation function: its
 * only block comes from libc's strdup. Linked with libtenon-override.a, it
 * is tenon's block only when the link has -Wl,-u,malloc; without it, libc.a
 * keeps its own malloc (the control that shows the -u is needed, and that
 * the check can tell the two apart). argv[1]: "tenon" or "glibc", the
 * allocator expected. Exits 0 when it is the one. */
#include <stdio.h>
#include <string.h>
#include <tenon/tenon.h>

int main(int argc, char** argv) {
  int expect_tenon = argc > 1 && strcmp(argv[1], "tenon") == 0;
  char* s = strdup("allocated by libc's strdup");
  int is_tenon = s && tenon_owns(s);
  printf("static_indirect: strdup's block is %s's (expected %s's)\n", is_tenon ? "tenon" : "glibc",
         expect_tenon ? "tenon" : "glibc");
  return is_tenon == expect_tenon ? 0 : 1;
}
