/* galloc-freelist.c -- the graph allocator's best-fit free list over chunks of at most max_size bytes. */
#include "galloc-impl.h"

#include <stdlib.h>
#include <string.h>

void lgal_arena_init(struct lgal_arena * a, size_t alignment, size_t max_size) {
    memset(a, 0, sizeof *a);
    a->alignment = alignment;
    a->max_size = max_size;
}

void lgal_arena_release(struct lgal_arena * a) {
    for (int i = 0; i < a->n_chunks; i++) free(a->chunks[i].blocks);
    free(a->chunks);
    a->chunks = NULL;
    a->n_chunks = a->cap_chunks = 0;
}

/* Makes room for at least 'need' blocks in 'c'. */
static enum loom_status chunk_reserve(struct lgal_chunk * c, int need) {
    if (need <= c->cap_blocks) return LOOM_OK;
    int cap = c->cap_blocks ? c->cap_blocks * 2 : 8;
    while (cap < need) cap *= 2;
    struct lgal_block * b = realloc(c->blocks, (size_t)cap * sizeof *b);
    if (!b) return LOOM_ERR_OOM;
    c->blocks = b;
    c->cap_blocks = cap;
    return LOOM_OK;
}

static enum loom_status arena_add_chunk(struct lgal_arena * a) {
    if (a->n_chunks == a->cap_chunks) {
        int cap = a->cap_chunks ? a->cap_chunks * 2 : 4;
        struct lgal_chunk * c = realloc(a->chunks, (size_t)cap * sizeof *c);
        if (!c) return LOOM_ERR_OOM;
        a->chunks = c;
        a->cap_chunks = cap;
    }
    struct lgal_chunk * c = &a->chunks[a->n_chunks];
    memset(c, 0, sizeof *c);
    if (chunk_reserve(c, 4) != LOOM_OK) return LOOM_ERR_OOM;
    c->blocks[0] = (struct lgal_block){.offset = 0, .size = a->max_size};
    c->n_blocks = 1;
    a->n_chunks++;
    return LOOM_OK;
}

/* Bytes a request of 'size' takes from block 'b': the padded size, clipped at the chunk's end
 * (max_size need not be a multiple of the alignment). 0 when it does not fit. */
static size_t take_from(const struct lgal_arena * a, const struct lgal_block * b, size_t size) {
    if (size > b->size) return 0;
    size_t padded = loom_pad(size, a->alignment);
    return padded < size || padded > b->size ? b->size : padded;
}

struct fit {
    int chunk, block;
    size_t growth; /* bytes the chunk's high-water mark grows by */
    size_t size;   /* of the block */
};

static bool better(const struct fit * f, const struct fit * best) {
    if (best->chunk < 0) return true;
    if (f->growth != best->growth) return f->growth < best->growth;
    return f->size < best->size;
}

enum loom_status lgal_arena_alloc(struct lgal_arena * a, size_t size, struct lgal_slot * out) {
    LOOM_ASSERT(size > 0 && size <= a->max_size);
    struct fit best = {.chunk = -1};
    for (int ci = 0; ci < a->n_chunks; ci++) {
        const struct lgal_chunk * c = &a->chunks[ci];
        for (int bi = 0; bi < c->n_blocks; bi++) {
            size_t take = take_from(a, &c->blocks[bi], size);
            if (!take) continue;
            size_t end = c->blocks[bi].offset + take;
            struct fit f = {ci, bi, end > c->high ? end - c->high : 0, c->blocks[bi].size};
            if (better(&f, &best)) best = f;
        }
    }
    if (best.chunk < 0) {
        enum loom_status st = arena_add_chunk(a);
        if (st != LOOM_OK) return st;
        best = (struct fit){a->n_chunks - 1, 0, 0, a->max_size};
    }
    struct lgal_chunk * c = &a->chunks[best.chunk];
    /* frees never need to grow the block array: blocks <= live allocations + 1 */
    if (chunk_reserve(c, c->n_live + 3) != LOOM_OK) return LOOM_ERR_OOM;
    struct lgal_block * b = &c->blocks[best.block];
    size_t take = take_from(a, b, size);
    *out = (struct lgal_slot){.chunk = best.chunk, .offset = b->offset, .size = take};
    b->offset += take;
    b->size -= take;
    if (b->size == 0) {
        memmove(b, b + 1, (size_t)(c->n_blocks - best.block - 1) * sizeof *b);
        c->n_blocks--;
    }
    c->n_live++;
    if (out->offset + take > c->high) c->high = out->offset + take;
    return LOOM_OK;
}

void lgal_arena_free(struct lgal_arena * a, const struct lgal_slot * s) {
    LOOM_ASSERT(s->chunk >= 0 && s->chunk < a->n_chunks);
    struct lgal_chunk * c = &a->chunks[s->chunk];
    size_t start = s->offset, end = s->offset + s->size;
    int i = 0; /* first block after the freed range */
    while (i < c->n_blocks && c->blocks[i].offset < start) i++;
    LOOM_ASSERT(i == c->n_blocks || c->blocks[i].offset >= end);
    LOOM_ASSERT(i == 0 || c->blocks[i - 1].offset + c->blocks[i - 1].size <= start);
    bool join_prev = i > 0 && c->blocks[i - 1].offset + c->blocks[i - 1].size == start;
    bool join_next = i < c->n_blocks && c->blocks[i].offset == end;
    if (join_prev && join_next) {
        c->blocks[i - 1].size += s->size + c->blocks[i].size;
        memmove(&c->blocks[i], &c->blocks[i + 1], (size_t)(c->n_blocks - i - 1) * sizeof *c->blocks);
        c->n_blocks--;
    } else if (join_prev) {
        c->blocks[i - 1].size += s->size;
    } else if (join_next) {
        c->blocks[i].offset = start;
        c->blocks[i].size += s->size;
    } else {
        LOOM_ASSERT(c->n_blocks < c->cap_blocks);
        memmove(&c->blocks[i + 1], &c->blocks[i], (size_t)(c->n_blocks - i) * sizeof *c->blocks);
        c->blocks[i] = (struct lgal_block){start, s->size};
        c->n_blocks++;
    }
    c->n_live--;
}
