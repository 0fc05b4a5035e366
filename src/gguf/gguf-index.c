/* gguf-index.c -- open-addressing hash index from names to indices (keys and tensor names). */
#include "gguf-impl.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64-bit. */
uint64_t gguf_hash(const char * s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static bool same_name(const char * a, size_t alen, const char * b, size_t blen) {
    return alen == blen && memcmp(a, b, alen) == 0;
}

/* Slot holding (s, len), or the empty slot where it would go. */
static size_t probe(const struct gguf_index * ix, const char * s, size_t len, gguf_name_fn names_of, const void * ctx) {
    size_t mask = ix->n_slots - 1;
    size_t i = (size_t)gguf_hash(s, len) & mask;
    for (;;) {
        int64_t id = ix->slots[i];
        if (id < 0) return i;
        size_t nlen;
        const char * name = names_of(ctx, id, &nlen);
        if (same_name(name, nlen, s, len)) return i;
        i = (i + 1) & mask;
    }
}

static bool rehash(struct gguf_index * ix, size_t n_slots, gguf_name_fn names_of, const void * ctx) {
    int64_t * slots = malloc(n_slots * sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < n_slots; i++) slots[i] = -1;
    struct gguf_index nx = {slots, n_slots, ix->n_used};
    for (size_t i = 0; i < ix->n_slots; i++) {
        int64_t id = ix->slots[i];
        if (id < 0) continue;
        size_t nlen;
        const char * name = names_of(ctx, id, &nlen);
        slots[probe(&nx, name, nlen, names_of, ctx)] = id;
    }
    free(ix->slots);
    *ix = nx;
    return true;
}

int64_t gguf_index_insert(struct gguf_index * ix, const char * s, size_t len, int64_t id, gguf_name_fn names_of,
                          const void * ctx) {
    /* keep the load factor at most 1/2 */
    if ((ix->n_used + 1) * 2 > ix->n_slots) {
        size_t n = ix->n_slots ? ix->n_slots : 16;
        while ((ix->n_used + 1) * 2 > n) {
            if (n > SIZE_MAX / 2 / sizeof(int64_t)) return -2;
            n *= 2;
        }
        if (!rehash(ix, n, names_of, ctx)) return -2;
    }
    size_t slot = probe(ix, s, len, names_of, ctx);
    if (ix->slots[slot] >= 0) return ix->slots[slot];
    ix->slots[slot] = id;
    ix->n_used++;
    return -1;
}

int64_t gguf_index_find(const struct gguf_index * ix, const char * s, size_t len, gguf_name_fn names_of,
                        const void * ctx) {
    if (!ix->n_slots) return -1;
    return ix->slots[probe(ix, s, len, names_of, ctx)];
}

void gguf_index_free(struct gguf_index * ix) {
    free(ix->slots);
    ix->slots = NULL;
    ix->n_slots = ix->n_used = 0;
}
