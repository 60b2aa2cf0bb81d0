// Does the run's total memory footprint slow memory down on this VM?
// K buffers of BUF_MB each (the stores of K key-value servers alive at
// once), in 2 MiB hugepages when HUGE is 1, each a random cycle over its
// cache lines; then each is chased in turn, 3 rounds: ns per step.
//
// usage: footprint K BUF_MB HUGE
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static uint64_t *make(size_t bytes, int huge) {
  size_t lines = bytes / 64;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (huge ? MAP_HUGETLB : 0);
  uint64_t *b = mmap(0, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (b == MAP_FAILED) { perror("mmap"); exit(1); }
  uint32_t *order = malloc(lines * sizeof *order);
  for (size_t i = 0; i < lines; i++) order[i] = i;
  for (size_t i = lines - 1; i > 0; i--) { size_t j = next() % (i + 1); uint32_t t = order[i]; order[i] = order[j]; order[j] = t; }
  for (size_t i = 0; i < lines; i++) b[(size_t)order[i] * 8] = (uint64_t)order[(i + 1) % lines] * 8;
  free(order);
  return b;
}

static double chase(uint64_t *b, long steps) {
  uint64_t at = 0;
  double t0 = now();
  for (long i = 0; i < steps; i++) at = b[at];
  double t = now() - t0;
  if (at == 12345678901ull) puts("");
  return t / steps * 1e9;
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: footprint K BUF_MB HUGE\n"); return 2; }
  int k = atoi(argv[1]), huge = atoi(argv[3]);
  size_t buf = strtoull(argv[2], 0, 10) << 20;
  uint64_t *b[64];
  double t0 = now();
  for (int i = 0; i < k && i < 64; i++) b[i] = make(buf, huge);
  printf("%d x %zu MB (%s), made in %.1f s; ns per step, buffer by buffer in start order:\n", k, buf >> 20,
         huge ? "hugepages" : "4 KiB pages", now() - t0);
  for (int r = 0; r < 3; r++) {
    printf("  round %d:", r + 1);
    for (int i = 0; i < k; i++) printf(" %.0f", chase(b[i], 2000000));
    puts("");
  }
  return 0;
}
