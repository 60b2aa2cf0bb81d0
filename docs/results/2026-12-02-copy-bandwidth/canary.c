#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sched.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#define SEG 8000
static size_t N=64<<20; static uint8_t *buf;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static uint64_t gen=1;
static void* writer(void*a){pin(0);for(size_t i=0;i<N;i+=8)*(uint64_t*)(buf+i)=i*gen;return 0;}
int main(int argc,char**argv){
  int rounds=argc>1?atoi(argv[1]):120;
  buf=mmap(0,N,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  static uint8_t dst[64][SEG] __attribute__((aligned(64)));
  size_t nseg=N/SEG; srand(1);
  for(int r=0;r<rounds;r++){
    gen=r*2+1; pthread_t t; double w0=now(); pthread_create(&t,0,writer,0); pthread_join(t,0); double wt=now()-w0;
    pin(1); double t0=now(); uint64_t sink=0; int M=100000;
    for(int i=0;i<M;i++){const uint8_t*p=buf+(size_t)((rand()*(uint64_t)rand())%nseg)*SEG; memcpy(dst[i&63],p,SEG); sink+=dst[i&63][100];}
    double dt=now()-t0;
    // one core's compute: a dependent chain
    double c0=now(); uint64_t x=r; for(long k=0;k<200000000;k++) x=x*6364136223846793005ull+1442695040888963407ull; double ct=now()-c0;
    time_t tt=time(0); struct tm *tm=gmtime(&tt);
    printf("%02d:%02d:%02d copy %.2f GB/s write %.2f GB/s compute %.1f ms (%lu)\n",tm->tm_hour,tm->tm_min,tm->tm_sec,(double)M*SEG/dt/1e9,N/wt/1e9,ct*1e3,(sink+x)&1);
    fflush(stdout); sleep(3);
  }
}
