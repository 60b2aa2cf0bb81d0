#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sched.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#define SEG 8000
static size_t N; static uint8_t *buf;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static void* writer(void*a){pin(0);for(size_t i=0;i<N;i+=8)*(uint64_t*)(buf+i)=i*0x9E3779B97F4A7C15ull;return 0;}
static void cp_avx(uint8_t*d,const uint8_t*s,size_t n){ for(size_t i=0;i<n;i+=32){ __builtin_memcpy(d+i,s+i,32);} }
int main(int argc,char**argv){
  N=(size_t)415<<20;
  buf=mmap(0,N,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  pthread_t t;pthread_create(&t,0,writer,0);pthread_join(t,0);
  pin(1);
  size_t nseg=N/8192-1; uint32_t *idx=malloc(4*1000001); srand(1);
  for(int i=0;i<1000001;i++) idx[i]=(uint32_t)(((uint64_t)rand()*rand())%nseg);
  size_t RING=4096; uint8_t *ring=aligned_alloc(4096,RING*8192); memset(ring,1,RING*8192);
  static uint8_t hot[64][8192] __attribute__((aligned(4096)));
  const char* names[]={"memcpy hot dst","memcpy cold dst ring 32MB","memcpy cold dst, src+64","memcpy cold dst, dst+64","loop copy (no rep movsb) cold dst","memcpy hot dst src+64"};
  for(int mode=0;mode<6;mode++){
    double t0=now(); uint64_t sink=0; int M=300000;
    for(int i=0;i<M;i++){const uint8_t*p=buf+(size_t)idx[i]*8192; uint8_t*d;
      switch(mode){
      case 0: d=hot[i&63]; memcpy(d,p,SEG); break;
      case 1: d=ring+(size_t)(i%RING)*8192; memcpy(d,p,SEG); break;
      case 2: d=ring+(size_t)(i%RING)*8192; memcpy(d,p+64,SEG); break;
      case 3: d=ring+(size_t)(i%RING)*8192+64; memcpy(d,p,SEG); break;
      case 4: d=ring+(size_t)(i%RING)*8192; cp_avx(d,p,SEG); break;
      default: d=hot[i&63]; memcpy(d,p+64,SEG); break;}
      sink+=d[i%SEG];
    }
    double dt=now()-t0; printf("%-40s %.1f ns/seg %.2f GB/s (%lu)\n",names[mode],dt/M*1e9,(double)M*SEG/dt/1e9,sink&1);
  }
}
