/* gguf-index.c -- sorted name index (keys, tensor names): O(n log n) to build, O(log n) lookups,
 * whatever the names. A sorted index rather than a hash table because the names come from
 * hostile files: crafted collisions cannot make it quadratic. */
#include "gguf-impl.h"

#include <stdlib.h>
#include <string.h>

static int cmp_names(const char * a, size_t alen, const char * b, size_t blen) {
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

static int cmp_entries(const void * pa, const void * pb) {
    const struct gguf_index_entry * a = pa;
    const struct gguf_index_entry * b = pb;
    int c = cmp_names(a->name, a->len, b->name, b->len);
    if (c) return c;
    return a->id < b->id ? -1 : a->id > b->id;
}

bool gguf_index_build(struct gguf_index * ix, size_t n, gguf_name_fn names_of, const void * ctx, int64_t * dup) {
    *dup = -1;
    free(ix->entries);
    ix->entries = NULL;
    ix->n = 0;
    if (n == 0) return true;
    ix->entries = malloc(n * sizeof *ix->entries);
    if (!ix->entries) return false;
    for (size_t i = 0; i < n; i++) {
        struct gguf_index_entry * e = &ix->entries[i];
        e->id = (int64_t)i;
        e->name = names_of(ctx, e->id, &e->len);
    }
    ix->n = n;
    qsort(ix->entries, n, sizeof *ix->entries, cmp_entries);
    /* equal names are adjacent, in id order: report the duplicate that comes first in the file */
    for (size_t i = 1; i < n; i++) {
        const struct gguf_index_entry * a = &ix->entries[i - 1];
        const struct gguf_index_entry * b = &ix->entries[i];
        if (!cmp_names(a->name, a->len, b->name, b->len) && (*dup < 0 || b->id < *dup)) *dup = b->id;
    }
    return true;
}

int64_t gguf_index_find(const struct gguf_index * ix, const char * s, size_t len) {
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct gguf_index_entry * e = &ix->entries[mid];
        int c = cmp_names(e->name, e->len, s, len);
        if (c == 0) return e->id;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

int64_t gguf_index_first(const struct gguf_index * ix, const char * s, size_t len) {
    /* lower bound: with duplicates the lowest id sorts first */
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_names(ix->entries[mid].name, ix->entries[mid].len, s, len) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < ix->n && !cmp_names(ix->entries[lo].name, ix->entries[lo].len, s, len)) return ix->entries[lo].id;
    return -1;
}

void gguf_index_free(struct gguf_index * ix) {
    free(ix->entries);
    ix->entries = NULL;
    ix->n = 0;
}
