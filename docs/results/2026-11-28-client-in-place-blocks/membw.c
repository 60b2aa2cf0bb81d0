#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sched.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <immintrin.h>
#define SEG 8000
static size_t N; static uint8_t *buf; static int huge;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static void* writer(void*a){pin(0);for(size_t i=0;i<N;i+=8)*(uint64_t*)(buf+i)=i*0x9E3779B97F4A7C15ull;return 0;}
__attribute__((target("avx512f"))) static uint64_t check(const uint8_t*p,size_t n){__m512i acc=_mm512_setzero_si512();for(size_t i=0;i+64<=n;i+=64)acc=_mm512_or_si512(acc,_mm512_xor_si512(_mm512_loadu_si512(p+i),_mm512_set1_epi64(i)));return _mm512_reduce_or_epi64(acc);}
int main(int argc,char**argv){
  N=(size_t)(argc>2?atoi(argv[2]):415)<<20; huge=argc>1&&atoi(argv[1]);
  buf=mmap(0,N,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS|(huge?MAP_HUGETLB:0),-1,0);
  if(buf==MAP_FAILED){perror("mmap");return 1;}
  pthread_t t;pthread_create(&t,0,writer,0);pthread_join(t,0);
  pin(1);
  size_t nseg=N/SEG; uint32_t *idx=malloc(4*2000000); srand(1);
  for(int i=0;i<2000000;i++) idx[i]=(uint32_t)(((uint64_t)rand()*rand())%nseg);
  static uint8_t dst[64][SEG] __attribute__((aligned(64)));
  for(int mode=0;mode<5;mode++){
    double t0=now(); uint64_t sink=0; int M=1000000;
    for(int i=0;i<M;i++){const uint8_t*p=buf+(size_t)idx[i]*SEG;
      if(mode==0){memcpy(dst[i&63],p,SEG);sink+=check(dst[i&63],SEG);}
      else if(mode==1){sink+=check(p,SEG);}
      else if(mode==2){const uint8_t*q=buf+(size_t)idx[i+1]*SEG;for(int l=0;l<SEG;l+=64)_mm_prefetch((const char*)q+l,_MM_HINT_T0);sink+=check(p,SEG);}
      else if(mode==3){const uint8_t*q=buf+(size_t)idx[i+1]*SEG;for(int l=0;l<SEG;l+=64)_mm_prefetch((const char*)q+l,_MM_HINT_T0);memcpy(dst[i&63],p,SEG);sink+=check(dst[i&63],SEG);}
      else {uint8_t tmp[4096]; for(int o=0;o<SEG;o+=4096){int n=SEG-o<4096?SEG-o:4096;memcpy(tmp,p+o,n);sink+=check(tmp,n);}}
    }
    double dt=now()-t0; printf("huge=%d mode=%d %.1f ns/seg %.2f GB/s (%lu)\n",huge,mode,dt/M*1e9,(double)M*SEG/dt/1e9,sink&1);
  }
}
