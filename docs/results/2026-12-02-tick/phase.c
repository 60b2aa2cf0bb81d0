#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sched.h>
#include <stdint.h>
static inline uint64_t now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ull+t.tv_nsec;}
int main(int c,char**v){int core=atoi(v[1]);cpu_set_t s;CPU_ZERO(&s);CPU_SET(core,&s);sched_setaffinity(0,sizeof s,&s);
 uint64_t prev=now(),end=prev+1000000000ull;int n=0;long hist[40]={0};
 while(1){uint64_t t=now();if(t-prev>20000){hist[(prev%4000000)/100000]++;n++;}prev=t;if(t>end)break;}
 printf("gap starts mod 4 ms, 100us bins (n=%d):\n",n);for(int i=0;i<40;i++)if(hist[i]>5)printf("  %.1f-%.1f ms: %ld\n",i/10.0,(i+1)/10.0,hist[i]);
}
