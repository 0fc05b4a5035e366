/* gguf-mem.c -- the reader's arena and a checked array-growing helper. */
#include "gguf-impl.h"

#include <stdlib.h>

#define ARENA_CHUNK (64 * 1024) /* bytes: the default chunk; larger requests get their own */

struct gguf_arena_chunk {
    struct gguf_arena_chunk * next;
    size_t size;   /* usable bytes after the header */
    size_t used;
    max_align_t data[]; /* aligned start of the usable bytes */
};

void * gguf_arena_alloc(struct gguf_arena * a, size_t size) {
    size_t need = (size + 7) & ~(size_t)7;
    if (need < size) return NULL;
    struct gguf_arena_chunk * c = a->head;
    if (!c || c->size - c->used < need) {
        size_t csize = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        if (csize > SIZE_MAX - sizeof *c) return NULL;
        c = malloc(sizeof *c + csize);
        if (!c) return NULL;
        c->size = csize;
        c->used = 0;
        if (a->head && need > ARENA_CHUNK) {
            /* a big block: keep the current chunk first so its free space stays usable */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void * p = (char *)c->data + c->used;
    c->used += need;
    return p;
}

void gguf_arena_free(struct gguf_arena * a) {
    struct gguf_arena_chunk * c = a->head;
    while (c) {
        struct gguf_arena_chunk * next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

bool gguf_grow(void ** ptr, size_t * cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2) return false;
        n *= 2;
    }
    if (elem && n > SIZE_MAX / elem) return false;
    void * p = realloc(*ptr, n * elem);
    if (!p) return false;
    *ptr = p;
    *cap = n;
    return true;
}
