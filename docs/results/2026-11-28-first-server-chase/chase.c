// Is memory allocated right after other processes freed a lot slower to
// use (for its whole life) than memory allocated later? A pointer chase
// over random cache lines of each buffer (TLB- and cache-miss bound).
//
// usage: chase FREED_MB PRETOUCH_MB BUF_MB [WAIT_MS]
//   1. a child allocates, touches and frees FREED_MB (the previous
//      workload's servers), then exits;
//   2. after WAIT_MS, PRETOUCH_MB are allocated, touched and freed;
//   3. buffers A then B of BUF_MB each are allocated and touched (the
//      first-started server, then a later one) and kept;
//   4. A and B are chased in turns, 3 times each: ns per step.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "chase.h"

static void touch(size_t bytes) {
  if (!bytes) return;
  char *p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) { perror("mmap"); exit(1); }
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  munmap(p, bytes);
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: chase FREED_MB PRETOUCH_MB BUF_MB [WAIT_MS]\n"); return 2; }
  size_t freed = strtoull(argv[1], 0, 10) << 20, pre = strtoull(argv[2], 0, 10) << 20, buf = strtoull(argv[3], 0, 10) << 20;
  long wait_ms = argc > 4 ? atol(argv[4]) : 500;
  pid_t c = fork();
  if (c == 0) { touch(freed); _exit(0); }
  waitpid(c, 0, 0);
  usleep(wait_ms * 1000);
  double t0 = now();
  touch(pre);
  double tp = now() - t0;
  uint64_t *a = make(buf, 0), *b = make(buf, 0);
  printf("freed %zu MB, pretouch %zu MB (%.2f s), buffers %zu MB:", freed >> 20, pre >> 20, tp, buf >> 20);
  for (int r = 0; r < 3; r++) printf("  A %.1f B %.1f", chase(a, 20000000), chase(b, 20000000));
  puts(" ns/step");
  return 0;
}
