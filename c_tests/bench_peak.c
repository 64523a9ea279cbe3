// This machine's peaks, for reading the MUL_MAT figures as fractions of them (one thread, best
// of a few runs; the compute peaks in thread CPU time, so time spent descheduled on a shared
// machine does not count; the bandwidth in wall time, which a loaded machine lowers):
//   vnni: int8 multiply-adds per second of AVX-512 VNNI (vpdpbusd on 512-bit registers, 12
//         independent accumulators, so throughput rather than latency bounds it)
//   fma:  f32 multiply-adds per second of AVX-512 FMA (12 independent accumulators)
//   mem:  read bandwidth, summing a 512 MiB buffer (beyond the last-level cache)
// Prints `peak vnni GOPS`, `peak fma GFLOPS`, `peak mem GB/s` lines (an op = one multiply-add
// counted as 2, as test-backend-ops counts FLOPs).
//
// Build: cc -O2 -mavx512f -mavx512bw -mavx512vnni bench_peak.c

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define ITERS 20000000L

// the statement S for I = 0 .. 11
#define STEP12(S) \
    do { \
        { enum { I = 0 }; S; } { enum { I = 1 }; S; } { enum { I = 2 }; S; } { enum { I = 3 }; S; } \
        { enum { I = 4 }; S; } { enum { I = 5 }; S; } { enum { I = 6 }; S; } { enum { I = 7 }; S; } \
        { enum { I = 8 }; S; } { enum { I = 9 }; S; } { enum { I = 10 }; S; } { enum { I = 11 }; S; } \
    } while (0)

static double vnni(void) {
    __m512i acc[12];
    for (int i = 0; i < 12; i++) {
        acc[i] = _mm512_set1_epi32(i);
    }
    __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
    double t0 = cpu_now();
    for (long it = 0; it < ITERS; it++) {
        // unrolled by hand: a loop over the array keeps the accumulators in memory at -O2
        STEP12(acc[I] = _mm512_dpbusd_epi32(acc[I], x, y));
        // keep x, y opaque so the loop is not folded
        __asm__ volatile("" : "+v"(x), "+v"(y));
    }
    double t = cpu_now() - t0;
    __m512i s = acc[0];
    for (int i = 1; i < 12; i++) {
        s = _mm512_add_epi32(s, acc[i]);
    }
    volatile int sink = _mm512_reduce_add_epi32(s);
    (void) sink;
    // 12 instructions × 64 multiply-adds × 2 ops
    return ITERS * 12.0 * 64 * 2 / t;
}

static double fma_peak(void) {
    __m512 acc[12];
    for (int i = 0; i < 12; i++) {
        acc[i] = _mm512_set1_ps((float) i);
    }
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
    double t0 = cpu_now();
    for (long it = 0; it < ITERS; it++) {
        STEP12(acc[I] = _mm512_fmadd_ps(acc[I], x, y));
        __asm__ volatile("" : "+v"(x), "+v"(y));
    }
    double t = cpu_now() - t0;
    __m512 s = acc[0];
    for (int i = 1; i < 12; i++) {
        s = _mm512_add_ps(s, acc[i]);
    }
    volatile float sink = _mm512_reduce_add_ps(s);
    (void) sink;
    return ITERS * 12.0 * 16 * 2 / t;
}

static double mem(void) {
    size_t n = (size_t) 512 << 20;
    uint8_t * buf = aligned_alloc(64, n);
    if (!buf) {
        return 0;
    }
    memset(buf, 1, n);
    double best = 0;
    for (int r = 0; r < 3; r++) {
        __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
        double t0 = now();
        for (size_t i = 0; i < n; i += 256) {
            s0 = _mm512_add_epi64(s0, _mm512_load_si512(buf + i));
            s1 = _mm512_add_epi64(s1, _mm512_load_si512(buf + i + 64));
            s2 = _mm512_add_epi64(s2, _mm512_load_si512(buf + i + 128));
            s3 = _mm512_add_epi64(s3, _mm512_load_si512(buf + i + 192));
        }
        double t = now() - t0;
        volatile long long sink = _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
        (void) sink;
        if (n / t > best) {
            best = n / t;
        }
    }
    free(buf);
    return best;
}

int main(void) {
    double v = 0, f = 0;
    for (int r = 0; r < 3; r++) {
        double x = vnni(), y = fma_peak();
        v = x > v ? x : v;
        f = y > f ? y : f;
    }
    printf("peak vnni %.1f\n", v * 1e-9);
    printf("peak fma %.1f\n", f * 1e-9);
    printf("peak mem %.1f\n", mem() * 1e-9);
    return 0;
}
