/* llama2c-vocab.c -- reads llama2.c tokenizer files ("tokenizer.bin") into a GGUF-convention vocabulary. */
#include "vocab-impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLAMA2C_FILE_MAX ((size_t)1 << 30) /* bytes; the Llama-2 vocabulary is 434 KB */

static int32_t read_i32(const uint8_t * p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t i;
    memcpy(&i, &u, sizeof i);
    return i;
}

static float read_f32(const uint8_t * p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* One entry: where its bytes are. */
struct entry {
    float score;
    size_t offs;  /* of the piece bytes in the file */
    uint32_t len;
};

/* Walks the entries after the header, validating each; fills 'e' (may be NULL to count only) and
 * '*end' (the offset after the last entry read). Returns the number of entries read (at most
 * 'limit' when limit > 0), or -1 for a format error. */
static int64_t walk_entries(const uint8_t * d, size_t size, int32_t max_len, int32_t limit, struct entry * e,
                            size_t * end) {
    size_t pos = 4;
    int64_t n = 0;
    while (limit <= 0 || n < limit) {
        if (pos == size && limit <= 0) break;
        if (size - pos < 8) {
            loom_log(LOOM_LOG_ERROR, "llama2c vocab: entry %lld is truncated (%zu bytes left, need 8 for its header)",
                     (long long)n, size - pos);
            return -1;
        }
        float score = read_f32(d + pos);
        int32_t len = read_i32(d + pos + 4);
        pos += 8;
        if (isnan(score)) {
            loom_log(LOOM_LOG_ERROR, "llama2c vocab: entry %lld has a NaN score", (long long)n);
            return -1;
        }
        if (len < 0 || len > max_len) {
            loom_log(LOOM_LOG_ERROR, "llama2c vocab: entry %lld has length %d (valid: 0..max_token_length %d)",
                     (long long)n, len, max_len);
            return -1;
        }
        if ((size_t)len > size - pos) {
            loom_log(LOOM_LOG_ERROR, "llama2c vocab: entry %lld (%d bytes) runs past the end of the file", (long long)n,
                     len);
            return -1;
        }
        if (e) e[n] = (struct entry){score, pos, (uint32_t)len};
        pos += (size_t)len;
        n++;
        if (n > LOOM_VOCAB_MAX_TOKENS) {
            loom_log(LOOM_LOG_ERROR, "llama2c vocab: more than %d entries", LOOM_VOCAB_MAX_TOKENS);
            return -1;
        }
    }
    *end = pos;
    return n;
}

/* Converts entry i to the GGUF convention into 'dst' (room for 3 * len bytes); returns its length. */
static size_t convert_piece(const uint8_t * src, size_t len, char * dst) {
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == ' ') {
            memcpy(dst + k, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN);
            k += LOOM_SPM_SPACE_LEN;
        } else {
            dst[k++] = (char)src[i];
        }
    }
    return k;
}

/* Checks that the file's special pieces look like what we rename them to (tolerating the
 * surrounding whitespace llama2.c's exporter writes, e.g. "\n<s>\n"). */
static void check_special(const uint8_t * s, size_t len, int32_t id, const char * want) {
    while (len && (s[0] == '\n' || s[0] == ' ')) s++, len--;
    while (len && (s[len - 1] == '\n' || s[len - 1] == ' ')) len--;
    if (len != strlen(want) || memcmp(s, want, len) != 0) {
        loom_log(LOOM_LOG_WARN, "llama2c vocab: token %d is \"%.*s\", expected %s; using %s", id, (int)len,
                 (const char *)s, want, want);
    }
}

enum loom_status loom_vocab_load_llama2c_buffer(const void * data, size_t size, int32_t n_tokens,
                                                struct loom_vocab ** out) {
    if (!out || (!data && size > 0) || n_tokens < 0 || n_tokens > LOOM_VOCAB_MAX_TOKENS) {
        loom_log(LOOM_LOG_ERROR, "llama2c vocab: invalid arguments (n_tokens %d)", n_tokens);
        if (out) *out = NULL;
        return LOOM_ERR_INVALID_ARG;
    }
    *out = NULL;
    const uint8_t * d = data;
    if (size < 4) {
        loom_log(LOOM_LOG_ERROR, "llama2c vocab: %zu bytes is too short for the header", size);
        return LOOM_ERR_FORMAT;
    }
    int32_t max_len = read_i32(d);
    if (max_len <= 0) {
        loom_log(LOOM_LOG_ERROR, "llama2c vocab: max_token_length %d is not positive", max_len);
        return LOOM_ERR_FORMAT;
    }
    size_t end = 0;
    int64_t n = walk_entries(d, size, max_len, n_tokens, NULL, &end);
    if (n < 0) return LOOM_ERR_FORMAT;
    if (end < size) { /* more entries than the model's vocabulary: the tokenizer of another model */
        loom_log(LOOM_LOG_ERROR, "llama2c vocab: %zu bytes after entry %lld: the tokenizer holds more than the model's %d tokens "
                 "(the tokenizer of another model?)", size - end, (long long)n, n_tokens);
        return LOOM_ERR_FORMAT;
    }
    if (n < 3) {
        loom_log(LOOM_LOG_ERROR, "llama2c vocab: %lld entries; need at least <unk>, <s>, </s>", (long long)n);
        return LOOM_ERR_FORMAT;
    }

    enum loom_status st = LOOM_ERR_OOM;
    struct entry * e = malloc((size_t)n * sizeof *e);
    const char ** texts = malloc((size_t)n * sizeof *texts);
    size_t * lens = malloc((size_t)n * sizeof *lens);
    float * scores = malloc((size_t)n * sizeof *scores);
    int32_t * types = malloc((size_t)n * sizeof *types);
    char * blob = NULL;
    if (!e || !texts || !lens || !scores || !types) goto done;
    walk_entries(d, size, max_len, (int32_t)n, e, &end);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += 3 * (size_t)e[i].len; /* <= 3 * file size */
    blob = malloc(total ? total : 1);
    if (!blob) goto done;

    static const char * const special[3] = {"<unk>", "<s>", "</s>"};
    static const int32_t special_type[3] = {LOOM_TOKEN_TYPE_UNKNOWN, LOOM_TOKEN_TYPE_CONTROL, LOOM_TOKEN_TYPE_CONTROL};
    size_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t * src = d + e[i].offs;
        scores[i] = e[i].score;
        if (i < 3) {
            check_special(src, e[i].len, (int32_t)i, special[i]);
            texts[i] = special[i];
            lens[i] = strlen(special[i]);
            types[i] = special_type[i];
            continue;
        }
        texts[i] = blob + k;
        lens[i] = convert_piece(src, e[i].len, blob + k);
        k += lens[i];
        types[i] = loom_vocab_parse_byte_piece(texts[i], lens[i]) >= 0 ? LOOM_TOKEN_TYPE_BYTE : LOOM_TOKEN_TYPE_NORMAL;
    }

    const struct loom_vocab_params p = loom_vocab_llama_params((int32_t)n, texts, lens, scores, types);
    st = loom_vocab_new(&p, out);
    if (st == LOOM_ERR_INVALID_ARG) st = LOOM_ERR_FORMAT; /* the arrays came from the file */
done:
    if (st == LOOM_ERR_OOM) loom_log(LOOM_LOG_ERROR, "llama2c vocab: out of memory");
    free(e);
    free(texts);
    free(lens);
    free(scores);
    free(types);
    free(blob);
    return st;
}

enum loom_status loom_vocab_load_llama2c(const char * path, int32_t n_tokens, struct loom_vocab ** out) {
    if (out) *out = NULL;
    if (!path || !out) {
        loom_log(LOOM_LOG_ERROR, "llama2c vocab: NULL argument");
        return LOOM_ERR_INVALID_ARG;
    }
    void * buf = NULL;
    size_t size = 0;
    enum loom_status st = loom_read_file(path, LLAMA2C_FILE_MAX, &buf, &size);
    if (st == LOOM_ERR_TOO_LARGE) st = LOOM_ERR_FORMAT; /* no tokenizer file is that large */
    if (st == LOOM_OK) st = loom_vocab_load_llama2c_buffer(buf, size, n_tokens, out);
    free(buf);
    return st;
}
