/* fuzz-bpe.c -- libFuzzer target: byte-level BPE tokenization of arbitrary bytes with every
 * pre-tokenizer, special parsing on and off; the ids must be in range and decode back to the
 * text when it is valid UTF-8. */
#include "loom-vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

#define REQUIRE(x) \
    do {           \
        if (!(x)) abort(); \
    } while (0)

static const char * const pres[] = {"llama-bpe", "qwen2", "gpt-2", "smollm", "default", "deepseek-llm"};
#define N_PRES (sizeof pres / sizeof pres[0])
#define N_EXTRA 8

static struct loom_vocab * g_vocab[N_PRES];

/* The 256 byte characters (GPT-2's table), a few merged pieces, a user-defined and two control
 * pieces; merges that build the merged pieces. */
static struct loom_vocab * make_vocab(const char * pre) {
    static char texts[256 + N_EXTRA][16];
    const char * ptr[256 + N_EXTRA];
    int32_t types[256 + N_EXTRA];
    for (int b = 0; b < 256; b++) {
        unsigned cp = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? (unsigned)b
                      : b <= 0x20 ? 256u + (unsigned)b : b <= 0xA0 ? 256u + 33u + (unsigned)(b - 0x7F) : 256u + 67u;
        if (cp < 0x80) texts[b][0] = (char)cp, texts[b][1] = 0;
        else texts[b][0] = (char)(0xC0 | cp >> 6), texts[b][1] = (char)(0x80 | (cp & 63)), texts[b][2] = 0;
        types[b] = LOOM_TOKEN_TYPE_NORMAL;
    }
    static const char * const extra[N_EXTRA] = {"\xC4\xA0t", "he", "\xC4\xA0the", "in", "ing", "<u>", "<|s|>", "<|e|>"};
    static const int32_t extra_types[N_EXTRA] = {1, 1, 1, 1, 1, 4, 3, 3};
    for (int i = 0; i < N_EXTRA; i++) strcpy(texts[256 + i], extra[i]), types[256 + i] = extra_types[i];
    for (int i = 0; i < 256 + N_EXTRA; i++) ptr[i] = texts[i];
    static const char * const merges[] = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "in g"};
    struct loom_vocab_params p = loom_vocab_default_params();
    p.type = LOOM_VOCAB_TYPE_BPE;
    p.n_tokens = 256 + N_EXTRA;
    p.texts = ptr;
    p.types = types;
    p.bos_id = 256 + 6;
    p.eos_id = 256 + 7;
    p.unk_id = -1;
    p.add_bos = true;
    p.add_eos = true;
    p.pre = pre;
    p.merges = merges;
    p.n_merges = (int32_t)(sizeof merges / sizeof merges[0]);
    struct loom_vocab * v = NULL;
    REQUIRE(loom_vocab_new(&p, &v) == LOOM_OK);
    return v;
}

static bool valid_utf8(const uint8_t * s, size_t n) {
    for (size_t i = 0; i < n;) {
        int r = loom_utf8_check(s + i, n - i);
        if (r <= 0) return false;
        i += (size_t)r;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 1) return 0;
    size_t which = data[0] % N_PRES;
    bool special = data[0] & 0x80;
    if (!g_vocab[which]) g_vocab[which] = make_vocab(pres[which]);
    const struct loom_vocab * v = g_vocab[which];
    const char * text = (const char *)data + 1;
    size_t n = size - 1;
    int32_t need = loom_tokenize(v, text, n, true, special, NULL, 0);
    REQUIRE(need <= 0 && need != LOOM_TOKEN_ERROR);
    int32_t * ids = malloc(((size_t)-need + 1) * sizeof *ids);
    REQUIRE(ids);
    int32_t got = loom_tokenize(v, text, n, true, special, ids, -need);
    REQUIRE(got == -need && got >= 2 && ids[0] == loom_vocab_bos(v) && ids[got - 1] == loom_vocab_eos(v));
    for (int32_t i = 0; i < got; i++) REQUIRE(ids[i] >= 0 && ids[i] < loom_vocab_n_tokens(v));
    if (valid_utf8(data + 1, n)) {
        char * out = malloc(n + 1);
        REQUIRE(out);
        int32_t m = loom_detokenize(v, ids + 1, got - 2, out, (int32_t)n + 1, special ? LOOM_DETOK_SPECIAL : 0);
        REQUIRE(m == (int32_t)n && memcmp(out, text, n) == 0);
        free(out);
    }
    free(ids);
    return 0;
}
