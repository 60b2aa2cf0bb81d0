// Like page_distance.c, but the destination page is chosen at random,
// independently of the source page: only (dst - src) mod 4096 is fixed.
// Environment: SHSRC=1 / SHDST=1 put the source / destination in a shared
// anonymous mapping; HUGE=1 / NOHUGE=1 madvise both MADV_HUGEPAGE /
// MADV_NOHUGEPAGE (the runs in page_distance.txt).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
#include <sys/mman.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t n=64<<20, len=argc>1?atoi(argv[1]):8000;
  char*src=getenv("SHSRC")?mmap(0,n+8192,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0):aligned_alloc(4096,n+8192);char*dst=getenv("SHDST")?mmap(0,n+8192,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0):aligned_alloc(4096,n+8192);
  if(getenv("HUGE")||getenv("NOHUGE")){ int adv=getenv("NOHUGE")?MADV_NOHUGEPAGE:MADV_HUGEPAGE; madvise(src,n+8192,adv); madvise(dst,n+8192,adv); }
  memset(src,1,n+8192);memset(dst,2,n+8192);
  size_t pages=(n-len-8192)/4096; srand(1);
  int offs[]={0,8,16,24,64,1024};
  for(int i=0;i<6;i++){int off=offs[i];
    for(int mode=0;mode<2;mode++){
      double t0=now(); size_t pos=0;
      for(int r=0;r<20000;r++){ size_t s=(pos%pages)*4096; pos+=7919;
        size_t d=mode? ((size_t)rand()%pages)*4096 : s;
        memcpy(dst+d+off,src+s,len); }
      double t=now()-t0; printf("(dst-src)&0xFFF=%4d, %s: %.0f ns per %zu B copy\n",off,mode?"random dst page":"same page index",t/20000*1e9,len);
    }
  }
  return dst[12345]==7;
}
