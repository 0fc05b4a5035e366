/* gguf-gen.h -- builds GGUF byte images from scratch (independently of Loom's writer) and the
 * table of malformed files, one per rule the reader enforces. Used by the corpus test and to
 * seed the fuzzer. */
#ifndef LOOM_TEST_GGUF_GEN_H
#define LOOM_TEST_GGUF_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer; allocation failure aborts (tests only). */
struct gen_buf {
    uint8_t * data;
    size_t size, cap;
};

void gen_bytes(struct gen_buf * b, const void * p, size_t n);
void gen_u8(struct gen_buf * b, uint8_t v);
void gen_u32(struct gen_buf * b, uint32_t v);
void gen_u64(struct gen_buf * b, uint64_t v);
void gen_str(struct gen_buf * b, const char * s);              /* u64 length + bytes */
void gen_zeros(struct gen_buf * b, size_t n);
void gen_free(struct gen_buf * b);

/* One case: a file image and what the reader must say about it. */
struct gen_case {
    char name[64];          /* file-name friendly */
    bool valid;             /* the reader must accept it */
    int status;             /* expected enum loom_status when invalid */
    const char * expect;    /* a substring the error message must contain (NULL: any) */
    struct gen_buf file;
};

/* Builds every case (valid ones first); returns the count; free with 'gen_cases_free'. */
size_t gen_cases(struct gen_case ** out);
void gen_cases_free(struct gen_case * cases, size_t n);

#endif
