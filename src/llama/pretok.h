/* pretok.h -- BPE pre-tokenizers: the regular expressions that split text into words before merging. */
#ifndef LOOM_LLAMA_PRETOK_H
#define LOOM_LLAMA_PRETOK_H

#include "loom.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loom_pretok;

/* Compiles the pre-tokenizer named 'name' (a tokenizer.ggml.pre value; NULL = "default") into
 * '*out'. '*ignore_merges' and '*add_bos' (either may be NULL) get what the reference engine sets
 * for that name: take a word that is a piece whole; add BOS when the file does not say.
 * Errors (logged): LOOM_ERR_UNSUPPORTED for a name Loom does not know (the message names it and
 * lists the known ones), LOOM_ERR_OOM, LOOM_ERR_INVALID_ARG if an expression fails to compile. */
enum loom_status loom_pretok_new(const char * name, struct loom_pretok ** out, bool * ignore_merges, bool * add_bos);
/* The same flags without compiling; false for an unknown name. */
bool loom_pretok_lookup(const char * name, bool * ignore_merges, bool * add_bos);
void loom_pretok_free(struct loom_pretok * p);   /* NULL is a no-op */
/* The known names, comma-separated. */
const char * loom_pretok_names(void);

/* Word lengths (in code points) of a split. */
struct loom_pretok_words {
    uint32_t * len;
    size_t n, cap;
    uint32_t * tmp;   /* scratch for the next expression's output */
    size_t tmp_cap;
    void * match;     /* PCRE2 match data */
};

/* Splits the code points cps[0..n) into words ('w->len', summing to n), each expression of the
 * pre-tokenizer splitting the words the previous one produced; 'w' is reused between calls
 * (zero it before the first, free it with loom_pretok_words_free).
 * Errors: LOOM_ERR_OOM, LOOM_ERR_INVALID_ARG (a matching failure other than no match, logged). */
enum loom_status loom_pretok_split(const struct loom_pretok * p, const uint32_t * cps, size_t n,
                                   struct loom_pretok_words * w);
void loom_pretok_words_free(struct loom_pretok_words * w);

#endif
