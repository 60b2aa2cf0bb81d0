// The pointer chase shared by chase.c and ../2026-11-28-footprint/footprint.c:
// a buffer whose cache lines form one random cycle, and the time per step
// of following it (TLB- and cache-miss bound).
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

// A buffer of `bytes` (mmap'd with MAP_PRIVATE | MAP_ANONYMOUS | `extra_flags`)
// whose cache lines form one random cycle.
static uint64_t *make(size_t bytes, int extra_flags) {
  size_t lines = bytes / 64;
  uint64_t *b = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
  if (b == MAP_FAILED) { perror("mmap"); exit(1); }
  uint32_t *order = malloc(lines * sizeof *order);
  for (size_t i = 0; i < lines; i++) order[i] = i;
  for (size_t i = lines - 1; i > 0; i--) { size_t j = next() % (i + 1); uint32_t t = order[i]; order[i] = order[j]; order[j] = t; }
  for (size_t i = 0; i < lines; i++) b[(size_t)order[i] * 8] = (uint64_t)order[(i + 1) % lines] * 8;
  free(order);
  return b;
}

// Nanoseconds per step of `steps` steps along `b`'s cycle.
static double chase(uint64_t *b, long steps) {
  uint64_t at = 0;
  double t0 = now();
  for (long i = 0; i < steps; i++) at = b[at];
  double t = now() - t0;
  if (at == 12345678901ull) puts("");
  return t / steps * 1e9;
}
