#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sched.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
static size_t N; static uint8_t *buf;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static void* writer(void*a){pin(0);for(size_t i=0;i<N;i+=8)*(uint64_t*)(buf+i)=i*0x9E3779B97F4A7C15ull;return 0;}
int main(){
  N=(size_t)415<<20;
  buf=mmap(0,N,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  pthread_t t;pthread_create(&t,0,writer,0);pthread_join(t,0);
  pin(1);
  size_t nseg=N/8192-2; uint32_t *idx=malloc(4*1000001); srand(1);
  for(int i=0;i<1000001;i++) idx[i]=(uint32_t)(((uint64_t)rand()*rand())%nseg);
  size_t RING=4096; uint8_t *ring=aligned_alloc(4096,RING*8192+8192); memset(ring,1,RING*8192+8192);
  int offs[]={0,1,8,16,32,40,63};
  for(int a=0;a<7;a++) for(int b=0;b<7;b++){ int so=offs[a], dof=offs[b];
    double t0=now(); uint64_t sink=0; int M=60000;
    for(int i=0;i<M;i++){const uint8_t*p=buf+(size_t)idx[i]*8192+so; uint8_t*d=ring+(size_t)(i%RING)*8192+dof; memcpy(d,p,8000); sink+=d[i%8000];}
    double dt=now()-t0; printf("src+%2d dst+%2d %7.1f ns/8000B%s\n",so,dof,dt/M*1e9,(sink&1)?"":" ");
  }
}
