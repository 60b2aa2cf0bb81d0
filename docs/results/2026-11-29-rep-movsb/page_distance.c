// memcpy of 8000 B from a 64 MiB source to a 64 MiB destination, with
// (dst - src) & 0xFFF = the given offset: glibc BZ 30994 says rep movsb on
// AMD Zen 3/4 is slow when that is small.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t n=64<<20, len=argc>2?atoi(argv[2]):8000; int hot=argc>3;
  char*src=aligned_alloc(4096,n+8192),*dst=aligned_alloc(4096,n+8192);
  memset(src,1,n+8192);memset(dst,2,n+8192);
  int offs[]={0,16,64,256,1024,2048,4032,4080};  // second run: {1,3,8,24,32,48,63,4095}
  for(int i=0;i<8;i++){int off=offs[i];
    size_t count=0; double t0=now(); size_t pos=0;
    for(int r=0;r<20000;r++){ size_t s=hot?0:(pos%((n-len-8192)/4096))*4096; pos+=7919;
      memcpy(dst+s+off,src+s,len); count++; }
    double t=now()-t0; printf("(dst-src)&0xFFF=%4d: %.0f ns per %zu B copy\n",off,t/count*1e9,len);
  }
  return dst[12345]==7;
}
