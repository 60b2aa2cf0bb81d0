#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sched.h>
#include <stdint.h>
static inline uint64_t now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ull+t.tv_nsec;}
int main(int c,char**v){int core=atoi(v[1]);double secs=atof(v[2]);cpu_set_t s;CPU_ZERO(&s);CPU_SET(core,&s);sched_setaffinity(0,sizeof s,&s);
 static uint64_t at[200000],len[200000];int n=0;uint64_t t0=now(),prev=t0,end=t0+(uint64_t)(secs*1e9);
 while(1){uint64_t t=now();if(t-prev>20000&&n<200000){at[n]=prev-t0;len[n]=t-prev;n++;}prev=t;if(t>end)break;}
 // histogram of lengths
 int h[8]={0};for(int i=0;i<n;i++){uint64_t l=len[i]/1000;int b=l<30?0:l<50?1:l<100?2:l<200?3:l<500?4:l<1000?5:l<5000?6:7;h[b]++;}
 printf("core %d gaps %d: 20-30us %d 30-50 %d 50-100 %d 100-200 %d 200-500 %d 0.5-1ms %d 1-5ms %d >5ms %d\n",core,n,h[0],h[1],h[2],h[3],h[4],h[5],h[6],h[7]);
 // inter-gap interval histogram in 0.5ms bins up to 10ms
 int ih[21]={0};for(int i=1;i<n;i++){uint64_t d=(at[i]-at[i-1])/500000;if(d>20)d=20;ih[d]++;}
 printf("intervals (0.5 ms bins):");for(int i=0;i<21;i++)printf(" %d",ih[i]);printf("\n");
 for(int i=0;i<30&&i<n;i++)printf("%.3f ms +%.1f us\n",at[i]/1e6,len[i]/1e3);
}
