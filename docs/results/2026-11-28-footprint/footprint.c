// Does the run's total memory footprint slow memory down on this VM?
// K buffers of BUF_MB each (the stores of K key-value servers alive at
// once), in 2 MiB hugepages when HUGE is 1, each a random cycle over its
// cache lines; then each is chased in turn, 3 rounds: ns per step.
//
// usage: footprint K BUF_MB HUGE
#define _GNU_SOURCE
#include "../2026-11-28-first-server-chase/chase.h"

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: footprint K BUF_MB HUGE\n"); return 2; }
  int k = atoi(argv[1]), huge = atoi(argv[3]);
  size_t buf = strtoull(argv[2], 0, 10) << 20;
  uint64_t *b[64];
  double t0 = now();
  for (int i = 0; i < k && i < 64; i++) b[i] = make(buf, huge ? MAP_HUGETLB : 0);
  printf("%d x %zu MB (%s), made in %.1f s; ns per step, buffer by buffer in start order:\n", k, buf >> 20,
         huge ? "hugepages" : "4 KiB pages", now() - t0);
  for (int r = 0; r < 3; r++) {
    printf("  round %d:", r + 1);
    for (int i = 0; i < k; i++) printf(" %.0f", chase(b[i], 2000000));
    puts("");
  }
  return 0;
}
