/* pair-heap.h -- the binary heap of candidate merges in the tokenizers' merge loops (bpe.c, spm.c).
 * Each includes it once, after defining its own 'struct pair' and 'pair_before(a, b)' (true when
 * pair a is to be merged before pair b); the heap pops the pair that comes first. 'heap' holds
 * '*n' pairs and has room for one more at each push; push and pop cost O(log n). */
#ifndef LOOM_LLAMA_PAIR_HEAP_H
#define LOOM_LLAMA_PAIR_HEAP_H

#include <stddef.h>

static void pair_heap_push(struct pair * heap, size_t * n, struct pair p) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_before(&p, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = p;
}

/* The first pair, taken out; '*n_heap' must be at least 1. */
static struct pair pair_heap_pop(struct pair * heap, size_t * n_heap) {
    struct pair top = heap[0], last = heap[--*n_heap];
    size_t i = 0, n = *n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&heap[c + 1], &heap[c])) c++;
        if (!pair_before(&heap[c], &last)) break;
        heap[i] = heap[c];
        i = c;
    }
    if (n > 0) heap[i] = last;
    return top;
}

#endif
