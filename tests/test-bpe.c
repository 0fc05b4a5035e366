/* test-bpe.c -- byte-level BPE against the reference engine's tokenizations (tests/data/bpe-cases.txt)
 * of the shared Llama-3 and Qwen2 vocabularies and of every pre-tokenizer, decoding back to the
 * exact bytes, streaming, special and end-of-generation tokens, and refused pre-tokenizers. */
#include "loom-gguf.h"
#include "loom-llama.h" /* loom_vocab_load_gguf */
#include "test-util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IDS (1 << 14)

struct named_vocab {
    const char * file, * pre;  /* the shared file's vocabulary ("llama-bpe" / "qwen2"), the pre-tokenizer */
    struct loom_vocab * v;
};

static char g_tmp[256];

/* The Llama-3 vocabulary with tokenizer.ggml.pre set to 'pre', through a copy of its file. */
static struct loom_vocab * load_with_pre(const char * path, const char * pre) {
    struct loom_gguf * g = NULL;
    if (loom_gguf_open(path, &g, NULL, 0) != LOOM_OK) return NULL;
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    enum loom_status st = w ? LOOM_OK : LOOM_ERR_OOM;
    for (int64_t i = 0; st == LOOM_OK && i < loom_gguf_n_kv(g); i++) st = loom_gguf_writer_copy_kv(w, g, i);
    if (st == LOOM_OK) st = loom_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    char out[512];
    snprintf(out, sizeof out, "%s/vocab-%s.gguf", g_tmp, pre);
    if (st == LOOM_OK) st = loom_gguf_writer_write_file(w, out, NULL, 0);
    loom_gguf_writer_free(w);
    loom_gguf_free(g);
    struct loom_vocab * v = NULL;
    if (st == LOOM_OK) st = loom_vocab_load_gguf(out, &v);
    unlink(out);
    return st == LOOM_OK ? v : NULL;
}

static int hexval(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

/* The text the reference tokenizes for 'in': each byte that starts no well-formed sequence (by its
 * lax reading) becomes U+FFFD, overlong forms are written in shortest form. An independent
 * reading of the rule, for the decoding check. */
static size_t reference_text(const uint8_t * in, size_t n, char * out) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = in[i];
        int len = c < 0x80 ? 1 : c < 0xC0 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 0;
        uint32_t cp = len == 1 ? c : (uint32_t)(c & (0xFF >> (len + 1)));
        bool ok = len > 0 && i + (size_t)len <= n;
        for (int j = 1; ok && j < len; j++) {
            ok = (in[i + j] & 0xC0) == 0x80;
            cp = cp << 6 | (in[i + j] & 0x3F);
        }
        if (!ok) cp = 0xFFFD, len = 1;
        i += (size_t)len;
        if (cp < 0x80) {
            out[k++] = (char)cp;
        } else if (cp < 0x800) {
            out[k++] = (char)(0xC0 | cp >> 6), out[k++] = (char)(0x80 | (cp & 63));
        } else if (cp < 0x10000) {
            out[k++] = (char)(0xE0 | cp >> 12), out[k++] = (char)(0x80 | (cp >> 6 & 63)), out[k++] = (char)(0x80 | (cp & 63));
        } else {
            out[k++] = (char)(0xF0 | cp >> 18), out[k++] = (char)(0x80 | (cp >> 12 & 63));
            out[k++] = (char)(0x80 | (cp >> 6 & 63)), out[k++] = (char)(0x80 | (cp & 63));
        }
    }
    return k;
}

static int n_cases;

/* One reference line: tokenize, compare, decode (whole and streaming) and compare with the text. */
static void check_case(const struct loom_vocab * v, const char * what, const uint8_t * text, size_t n, bool special,
                       const int32_t * want, int n_want) {
    static int32_t ids[MAX_IDS];
    static char out[1 << 16], ref[1 << 16];
    bool bos = loom_vocab_get_add_bos(v);
    int got = loom_tokenize(v, (const char *)text, n, bos, special, ids, MAX_IDS);
    bool same = got == n_want && memcmp(ids, want, (size_t)n_want * sizeof *ids) == 0;
    n_cases++;
    if (!same) {
        fprintf(stderr, "%s \"%.*s\": got", what, (int)(n > 60 ? 60 : n), (const char *)text);
        for (int i = 0; i < got; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n   want");
        for (int i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    CHECK(same, "%s: %d ids, the reference %d", what, got, n_want);
    if (got < 0) return;
    /* decoding returns the text: exactly for valid UTF-8, with the reference's U+FFFD otherwise */
    size_t rn = reference_text(text, n, ref);
    int skip = bos && got > 0 && ids[0] == loom_vocab_bos(v);
    int m = loom_detokenize(v, ids + skip, got - skip, out, (int32_t)sizeof out, special ? LOOM_DETOK_SPECIAL : 0);
    CHECK(m == (int)rn && memcmp(out, ref, rn) == 0, "%s: decoding gave %d bytes, want %zu", what, m, rn);
    /* streaming returns valid UTF-8 only: compared where the reference's text is valid UTF-8
     * (not where it keeps a surrogate's bytes) */
    for (size_t i = 0; i < rn;) {
        int r = loom_utf8_check((const uint8_t *)ref + i, rn - i);
        if (r <= 0) return;
        i += (size_t)r;
    }
    struct loom_detok * d = NULL;
    if (loom_detok_new(v, special ? LOOM_DETOK_SPECIAL : 0, &d) != LOOM_OK) return;
    size_t k = 0;
    for (int i = skip; i < got; i++) {
        const char * t;
        size_t len;
        if (loom_detok_push(d, ids[i], &t, &len) == LOOM_OK && k + len <= sizeof out) memcpy(out + k, t, len), k += len;
    }
    const char * t;
    size_t len;
    if (loom_detok_flush(d, &t, &len) == LOOM_OK && k + len <= sizeof out) memcpy(out + k, t, len), k += len;
    CHECK(k == rn && memcmp(out, ref, rn) == 0, "%s: streaming decode gave %zu bytes, want %zu", what, k, rn);
    loom_detok_free(d);
}

static void run_cases(const char * path, struct named_vocab * vs, int n_vs) {
    FILE * f = fopen(path, "r");
    CHECK(f, "cannot open %s", path);
    if (!f) return;
    static char line[1 << 16];
    static uint8_t text[1 << 14];
    static int32_t want[MAX_IDS];
    size_t n_text = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || !line[0]) continue;
        if (!strncmp(line, "text", 4)) {
            n_text = 0;
            for (const char * p = line + 4 + (line[4] == ' '); p[0] && p[1]; p += 2) text[n_text++] = (uint8_t)(hexval(p[0]) * 16 + hexval(p[1]));
            continue;
        }
        char file[32], pre[32], mode[16];
        int pos = 0;
        if (sscanf(line, "%31s %31s %15s%n", file, pre, mode, &pos) != 3) {
            CHECK(0, "malformed line '%.60s'", line);
            continue;
        }
        int n_want = 0;
        for (char * p = line + pos, * end; n_want < MAX_IDS; p = end) {
            long id = strtol(p, &end, 10);
            if (end == p) break;
            want[n_want++] = (int32_t)id;
        }
        for (int i = 0; i < n_vs; i++) {
            if (strcmp(vs[i].file, file) || strcmp(vs[i].pre, pre) || !vs[i].v) continue;
            char what[96];
            snprintf(what, sizeof what, "%s/%s/%s", file, pre, mode);
            check_case(vs[i].v, what, text, n_text, !strcmp(mode, "special"), want, n_want);
        }
    }
    fclose(f);
}

/* Properties of the Llama-3 vocabulary the reference engine reports. */
static void check_llama3(const struct loom_vocab * v) {
    CHECK(loom_vocab_get_tokenizer(v) == LOOM_VOCAB_TYPE_BPE, "type BPE");
    CHECK(loom_vocab_n_tokens(v) == 128256, "128256 tokens");
    CHECK(loom_vocab_bos(v) == 128000 && loom_vocab_eos(v) == 128001, "bos 128000 eos 128001");
    CHECK(loom_vocab_get_add_bos(v), "llama-bpe adds BOS without an add_bos_token key");
    CHECK(loom_vocab_eot(v) == 128009, "EOT <|eot_id|> found by its text, got %d", loom_vocab_eot(v));
    CHECK(loom_vocab_is_eog(v, 128001) && loom_vocab_is_eog(v, 128009), "EOS and EOT end generation");
    CHECK(!loom_vocab_is_eog(v, 128000) && !loom_vocab_is_eog(v, 791) && !loom_vocab_is_eog(v, -1) &&
              !loom_vocab_is_eog(v, 128256),
          "BOS, text and ids out of range do not");
    CHECK(loom_vocab_has_byte_fallback(v), "every byte has a piece");
    CHECK(!strcmp(loom_vocab_get_pre(v), "llama-bpe"), "pre name");
    char buf[16];
    CHECK(loom_token_to_piece(v, 220, buf, sizeof buf, false) == 1 && buf[0] == ' ', "piece 220 'Ġ' is a space");
    CHECK(loom_token_to_piece(v, 128009, buf, sizeof buf, false) == 0, "control pieces render as nothing");
    CHECK(loom_token_to_piece(v, 128009, buf, sizeof buf, true) == 10 && !memcmp(buf, "<|eot_id|>", 10), "... or their text");
}

static void check_qwen2(const struct loom_vocab * v) {
    CHECK(!loom_vocab_get_add_bos(v), "qwen2 adds no BOS");
    CHECK(loom_vocab_is_eog(v, 151645) && loom_vocab_is_eog(v, 151643), "<|im_end|> and <|endoftext|> end generation");
    CHECK(loom_vocab_get_type(v, 151643) == LOOM_TOKEN_TYPE_CONTROL, "<|endoftext|> is a control token");
    CHECK(!loom_vocab_is_eog(v, 151644), "<|im_start|> does not");
}

/* A small BPE vocabulary built from arrays: merges by rank, the partition order, refusals. */
static void check_small(void) {
    /* the 256 byte characters, then "ab", "bc", "abc", a user-defined "xy", a control "<c>" */
    static char texts[261][8];
    const char * ptr[261];
    int32_t types[261];
    for (int b = 0; b < 256; b++) {
        uint32_t cp = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? (uint32_t)b
                      : b <= 0x20 ? 256u + (uint32_t)b : b <= 0xA0 ? 256u + 33u + (uint32_t)(b - 0x7F) : 256u + 67u;
        if (cp < 0x80) texts[b][0] = (char)cp, texts[b][1] = 0;
        else texts[b][0] = (char)(0xC0 | cp >> 6), texts[b][1] = (char)(0x80 | (cp & 63)), texts[b][2] = 0;
        types[b] = LOOM_TOKEN_TYPE_NORMAL;
    }
    const char * extra[5] = {"ab", "bc", "abc", "xy", "<c>"};
    const int32_t extra_types[5] = {1, 1, 1, LOOM_TOKEN_TYPE_USER_DEFINED, LOOM_TOKEN_TYPE_CONTROL};
    for (int i = 0; i < 5; i++) strcpy(texts[256 + i], extra[i]), types[256 + i] = extra_types[i];
    for (int i = 0; i < 261; i++) ptr[i] = texts[i];
    /* "b c" ranks before "a b": "abc" merges b+c first, so "abc" comes from "a"+"bc" */
    const char * merges[] = {"b c", "a b", "a bc", "q q q"};
    struct loom_vocab_params p = loom_vocab_default_params();
    p.type = LOOM_VOCAB_TYPE_BPE;
    p.n_tokens = 261;
    p.texts = ptr;
    p.types = types;
    p.bos_id = 260;
    p.eos_id = 260;
    p.unk_id = -1;
    p.add_bos = false;
    p.pre = "gpt-2";
    p.merges = merges;
    p.n_merges = 4;
    struct loom_vocab * v = NULL;
    CHECK(loom_vocab_new(&p, &v) == LOOM_OK, "small BPE vocabulary");
    if (!v) return;
    int32_t ids[16];
    CHECK(loom_tokenize(v, "abc", 3, false, false, ids, 16) == 1 && ids[0] == 258, "abc: b+c (rank 0) then a+bc");
    CHECK(loom_tokenize(v, "ab", 2, false, false, ids, 16) == 1 && ids[0] == 256, "ab");
    CHECK(loom_tokenize(v, "abab", 4, false, false, ids, 16) == 2 && ids[0] == 256 && ids[1] == 256, "abab");
    int n = loom_tokenize(v, "axyb<c>", 7, false, false, ids, 16);
    CHECK(n == 6 && ids[1] == 259 && ids[2] == 'b', "user-defined xy is cut out without parse_special (%d)", n);
    n = loom_tokenize(v, "axyb<c>", 7, false, true, ids, 16);
    CHECK(n == 4 && ids[3] == 260, "the control piece with parse_special (%d)", n);
    p.add_eos = true;
    struct loom_vocab * v2 = NULL;
    CHECK(loom_vocab_new(&p, &v2) == LOOM_OK, "with add_eos");
    if (v2) {
        n = loom_tokenize(v2, "ab", 2, true, false, ids, 16);
        CHECK(n == 3 && ids[0] == 260 && ids[2] == 260, "add_bos brings EOS when add_eos is set");
        loom_vocab_free(v2);
    }
    p.add_eos = false;
    loom_vocab_free(v);

    /* an unknown pre-tokenizer is refused with its name */
    p.pre = "no-such-pre";
    test_n_errors = 0;
    test_last_error[0] = 0;
    loom_log_set(test_capture_log, NULL);
    CHECK(loom_vocab_new(&p, &v) == LOOM_ERR_UNSUPPORTED && !v, "unknown pre refused");
    CHECK(strstr(test_last_error, "no-such-pre") != NULL, "the message names it: %s", test_last_error);
    p.pre = "gpt-2";
    p.n_merges = -1;
    CHECK(loom_vocab_new(&p, &v) == LOOM_ERR_INVALID_ARG, "negative merge count refused");
    loom_log_set(NULL, NULL);
}

int main(void) {
    check_small();
    const char * src = getenv("LOOM_SRC");
    const char * llama = test_model_path("vocab/ggml-vocab-llama-bpe.gguf");
    char llama_path[1024], qwen_path[1024], cases[1024];
    snprintf(llama_path, sizeof llama_path, "%s", llama);
    snprintf(qwen_path, sizeof qwen_path, "%s", test_model_path("vocab/ggml-vocab-qwen2.gguf"));
    snprintf(cases, sizeof cases, "%s/tests/data/bpe-cases.txt", src ? src : ".");
    if (access(llama_path, R_OK) || access(qwen_path, R_OK)) {
        if (test_failures) return test_finish("test-bpe (small vocabulary)");
        return test_skip("the shared vocabularies (models/vocab) are not here");
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/loom-test-bpe-XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL, "temporary folder");
    struct named_vocab vs[] = {
        {"llama-bpe", "llama-bpe", NULL}, {"qwen2", "qwen2", NULL},  {"llama-bpe", "default", NULL},
        {"llama-bpe", "gpt-2", NULL},     {"llama-bpe", "smollm", NULL}, {"llama-bpe", "deepseek-llm", NULL},
    };
    int n_vs = (int)(sizeof vs / sizeof vs[0]);
    CHECK(loom_vocab_load_gguf(llama_path, &vs[0].v) == LOOM_OK, "load %s", llama_path);
    CHECK(loom_vocab_load_gguf(qwen_path, &vs[1].v) == LOOM_OK, "load %s", qwen_path);
    for (int i = 2; i < n_vs; i++) {
        vs[i].v = load_with_pre(llama_path, vs[i].pre);
        CHECK(vs[i].v, "the Llama-3 vocabulary with pre-tokenizer %s", vs[i].pre);
    }
    rmdir(g_tmp);
    if (vs[0].v) check_llama3(vs[0].v);
    if (vs[1].v) check_qwen2(vs[1].v);
    run_cases(cases, vs, n_vs);
    CHECK(n_cases > 300, "%d reference cases checked", n_cases);
    for (int i = 0; i < n_vs; i++) loom_vocab_free(vs[i].v);
    return test_finish("test-bpe");
}
