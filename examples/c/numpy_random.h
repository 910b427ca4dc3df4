/*
 * numpy_random.h: the random numbers Gymnasium's environments draw, in plain
 * C (header-only): NumPy's SeedSequence, its PCG64 bit generator and
 * Generator.random()'s doubles, bit for bit.
 *
 * Gymnasium seeds an env's `np_random` on `reset(seed=s)` with
 * gymnasium.utils.seeding.np_random(s):
 *   np.random.Generator(np.random.PCG64(np.random.SeedSequence(s)))
 * and CartPole-v1 then draws its start state with
 * `np_random.uniform(low, high, size=(4,))`: low + (high - low) * random()
 * for each component. numpy_pcg64_seed() makes the same generator from a
 * seed, numpy_uniform() draws as uniform() does, so a simulator written in C
 * starts every seeded episode where Gymnasium's does (and an unseeded reset
 * continues the stream, as Gymnasium's does).
 *
 * Sources: numpy/random/bit_generator.pyx (SeedSequence: the hashmix and mix
 * functions with their constants, a pool of 4 uint32 words,
 * generate_state), numpy/random/_pcg64.pyx and src/pcg64/pcg64.h (seeded
 * from generate_state(4, uint64): state from words 0-1, increment from 2-3;
 * a 128-bit LCG with the XSL-RR output), numpy/random/src/distributions
 * (next_double: the top 53 bits of a 64-bit output times 2^-53).
 * The 128-bit arithmetic uses two uint64 halves (no compiler extension).
 */
#ifndef NUMPY_RANDOM_H
#define NUMPY_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* ---- SeedSequence (bit_generator.pyx) */

#define NUMPY_SS_POOL_SIZE 4
#define NUMPY_SS_INIT_A 0x43b0d7e5u
#define NUMPY_SS_MULT_A 0x931e8875u
#define NUMPY_SS_INIT_B 0x8b51f9ddu
#define NUMPY_SS_MULT_B 0x58f38dedu
#define NUMPY_SS_MIX_MULT_L 0xca01f9ddu
#define NUMPY_SS_MIX_MULT_R 0x4973f715u
#define NUMPY_SS_XSHIFT 16 /* 4 bytes * 8 / 2 */

static inline uint32_t numpy_ss_hashmix(uint32_t value, uint32_t *hash_const) {
    value ^= *hash_const;
    *hash_const *= NUMPY_SS_MULT_A;
    value *= *hash_const;
    value ^= value >> NUMPY_SS_XSHIFT;
    return value;
}

static inline uint32_t numpy_ss_mix(uint32_t x, uint32_t y) {
    uint32_t result = NUMPY_SS_MIX_MULT_L * x - NUMPY_SS_MIX_MULT_R * y;
    result ^= result >> NUMPY_SS_XSHIFT;
    return result;
}

/* SeedSequence(entropy).pool for an entropy given as its uint32 words,
 * least significant first (how NumPy splits a Python int), no spawn key. */
static inline void numpy_ss_pool(const uint32_t *entropy, size_t n,
                                 uint32_t pool[NUMPY_SS_POOL_SIZE]) {
    uint32_t hash_const = NUMPY_SS_INIT_A;
    for (size_t i = 0; i < NUMPY_SS_POOL_SIZE; i++)
        pool[i] = numpy_ss_hashmix(i < n ? entropy[i] : 0u, &hash_const);
    for (size_t src = 0; src < NUMPY_SS_POOL_SIZE; src++)
        for (size_t dst = 0; dst < NUMPY_SS_POOL_SIZE; dst++)
            if (src != dst)
                pool[dst] = numpy_ss_mix(pool[dst], numpy_ss_hashmix(pool[src], &hash_const));
    for (size_t src = NUMPY_SS_POOL_SIZE; src < n; src++)
        for (size_t dst = 0; dst < NUMPY_SS_POOL_SIZE; dst++)
            pool[dst] = numpy_ss_mix(pool[dst], numpy_ss_hashmix(entropy[src], &hash_const));
}

/* SeedSequence.generate_state(n_words * 2, uint32) (viewed as uint64 on a
 * little-endian machine: word 2k is the low half of uint64 k). */
static inline void numpy_ss_generate_state(const uint32_t pool[NUMPY_SS_POOL_SIZE],
                                           uint32_t *out, size_t n_words) {
    uint32_t hash_const = NUMPY_SS_INIT_B;
    for (size_t i = 0; i < n_words; i++) {
        uint32_t v = pool[i % NUMPY_SS_POOL_SIZE];
        v ^= hash_const;
        hash_const *= NUMPY_SS_MULT_B;
        v *= hash_const;
        v ^= v >> NUMPY_SS_XSHIFT;
        out[i] = v;
    }
}

/* ---- PCG64 (pcg64.h: pcg_setseq_128_xsl_rr_64) */

typedef struct NumpyU128 {
    uint64_t hi, lo;
} NumpyU128;

static inline NumpyU128 numpy_u128_add(NumpyU128 a, NumpyU128 b) {
    NumpyU128 r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (r.lo < a.lo);
    return r;
}

/* a * b modulo 2^128. */
static inline NumpyU128 numpy_u128_mul(NumpyU128 a, NumpyU128 b) {
    uint64_t a0 = a.lo & 0xffffffffu, a1 = a.lo >> 32, b0 = b.lo & 0xffffffffu, b1 = b.lo >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    NumpyU128 r;
    r.lo = (mid << 32) | (p00 & 0xffffffffu);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32) + a.hi * b.lo + a.lo * b.hi;
    return r;
}

typedef struct NumpyPcg64 {
    NumpyU128 state, inc;
} NumpyPcg64;

static inline void numpy_pcg64_step(NumpyPcg64 *g) {
    const NumpyU128 mult = {0x2360ed051fc65da4ull, 0x4385df649fccf645ull};
    g->state = numpy_u128_add(numpy_u128_mul(g->state, mult), g->inc);
}

/* pcg64_set_seed (pcg_setseq_128_srandom_r). */
static inline void numpy_pcg64_set_seed(NumpyPcg64 *g, NumpyU128 initstate, NumpyU128 initseq) {
    g->state.hi = 0;
    g->state.lo = 0;
    g->inc.hi = (initseq.hi << 1) | (initseq.lo >> 63);
    g->inc.lo = (initseq.lo << 1) | 1u;
    numpy_pcg64_step(g);
    g->state = numpy_u128_add(g->state, initstate);
    numpy_pcg64_step(g);
}

/* One 64-bit output: step, then XSL-RR of the new state. */
static inline uint64_t numpy_pcg64_next64(NumpyPcg64 *g) {
    numpy_pcg64_step(g);
    uint64_t value = g->state.hi ^ g->state.lo;
    unsigned rot = (unsigned)(g->state.hi >> 58);
    return (value >> rot) | (value << ((64u - rot) & 63u));
}

/* np.random.PCG64(np.random.SeedSequence(seed)) for a seed >= 0 (a Python
 * int of at most 64 bits: one uint32 word, or two when it needs them). */
static inline void numpy_pcg64_seed(NumpyPcg64 *g, uint64_t seed) {
    uint32_t entropy[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t pool[NUMPY_SS_POOL_SIZE], words[8];
    numpy_ss_pool(entropy, entropy[1] ? 2 : 1, pool);
    numpy_ss_generate_state(pool, words, 8);
    uint64_t v[4];
    for (int i = 0; i < 4; i++) v[i] = (uint64_t)words[2 * i] | ((uint64_t)words[2 * i + 1] << 32);
    NumpyU128 initstate = {v[0], v[1]}, initseq = {v[2], v[3]};
    numpy_pcg64_set_seed(g, initstate, initseq);
}

/* Generator.random(): a double in [0, 1) from the top 53 bits. */
static inline double numpy_random(NumpyPcg64 *g) {
    return (double)(numpy_pcg64_next64(g) >> 11) * (1.0 / 9007199254740992.0);
}

/* Generator.uniform(low, high): low + (high - low) * random(). */
static inline double numpy_uniform(NumpyPcg64 *g, double low, double high) {
    return low + (high - low) * numpy_random(g);
}

#endif
