// The random numbers of the fuzz tests and benchmarks: xorshift64, seeded explicitly, so that a
// seed always gives the same graph.
#pragma once

#include <stdint.h>

static uint64_t g_rng = 1;

static inline void rng_seed(uint64_t seed) { g_rng = seed * 0x9E3779B97F4A7C15ull | 1; }

static inline uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

// uniform in [0, n) (n > 0)
static inline int below(int n) { return (int) (rnd() % (uint64_t) n); }
