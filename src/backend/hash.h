/* hash.h -- a fast fingerprint of word sequences, for the allocator's and scheduler's "is this the
 * graph I planned?" checks. Four independent multiply-xor lanes, so that the multiplications
 * overlap instead of forming one long dependency chain (the checks run on every decode step). */
#ifndef LOOM_BACKEND_HASH_H
#define LOOM_BACKEND_HASH_H

#include <stddef.h>
#include <stdint.h>

struct loom_fp {
    uint64_t lane[4];
    unsigned next;   /* lane that takes the next word */
};

static inline void loom_fp_init(struct loom_fp * f, uint64_t seed) {
    f->lane[0] = seed ^ 0x243F6A8885A308D3ull;
    f->lane[1] = seed ^ 0x13198A2E03707344ull;
    f->lane[2] = seed ^ 0xA4093822299F31D0ull;
    f->lane[3] = seed ^ 0x082EFA98EC4E6C89ull;
    f->next = 0;
}

static inline void loom_fp_add(struct loom_fp * f, uint64_t v) {
    uint64_t * l = &f->lane[f->next & 3];
    *l = (*l ^ v) * 0x9E3779B97F4A7C15ull;
    *l ^= *l >> 29;
    f->next++;
}

static inline uint64_t loom_fp_final(const struct loom_fp * f) {
    uint64_t h = f->lane[0];
    for (int i = 1; i < 4; i++) {
        h = (h ^ f->lane[i]) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h;
}

#endif
