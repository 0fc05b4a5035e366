/* test-tokenizer.c -- SentencePiece BPE tokenization, decoding and streaming against known ids. */
#include "loom-llama.h"
#include "test-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- log capture */

static int g_errors;
static bool g_quiet;

static void log_capture(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level == LOOM_LOG_ERROR) g_errors++;
    if (!g_quiet && level >= LOOM_LOG_WARN) fprintf(stderr, "log: %s\n", text);
}

/* ---------------------------------------------------------------- helpers */

#define MAX_IDS 4096

static int tokenize(const struct loom_vocab * v, const char * s, bool bos, bool special, int32_t * ids) {
    return loom_tokenize(v, s, strlen(s), bos, special, ids, MAX_IDS);
}

static void check_ids(const struct loom_vocab * v, const char * name, const char * s, const int32_t * want, int n_want) {
    int32_t ids[MAX_IDS];
    int n = tokenize(v, s, true, false, ids);
    bool same = n == n_want && memcmp(ids, want, (size_t)n * sizeof *ids) == 0;
    if (!same) {
        fprintf(stderr, "%s: \"%s\" ->", name, s);
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    CHECK(same, "%s: tokenization of \"%s\" (%d ids, want %d)", name, s, n, n_want);
}

/* decode(encode(s)) == s, through loom_detokenize and through the streaming detokenizer. */
/* With 'special', control pieces in 's' are parsed and rendered (and no BOS is added, since it
 * would be rendered too). The streaming check needs valid UTF-8 (it replaces invalid bytes). */
static void check_round_trip_ex(const struct loom_vocab * v, const char * name, const char * s, size_t len,
                                bool special, bool valid_utf8) {
    static int32_t ids[1 << 16];
    static char out[1 << 18];
    int n = loom_tokenize(v, s, len, !special, special, ids, (int32_t)(sizeof ids / sizeof ids[0]));
    CHECK(n >= 0 && (special || ids[0] == loom_vocab_bos(v)), "%s: tokenize \"%.40s\" gave %d", name, s, n);
    if (n < 0) return;
    int flags = special ? LOOM_DETOK_SPECIAL : 0;
    int m = loom_detokenize(v, ids, n, out, (int32_t)sizeof out, flags);
    CHECK(m == (int)len && memcmp(out, s, len) == 0, "%s: round trip of \"%.40s\" gave %d bytes \"%.*s\"", name, s,
          m, m > 0 ? m : 0, out);

    if (!valid_utf8) return;
    struct loom_detok * d = NULL;
    CHECK(loom_detok_new(v, flags, &d) == LOOM_OK, "detok_new");
    if (!d) return;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const char * t;
        size_t tl;
        CHECK(loom_detok_push(d, ids[i], &t, &tl) == LOOM_OK, "push");
        memcpy(out + k, t, tl);
        k += tl;
    }
    const char * t;
    size_t tl;
    CHECK(loom_detok_flush(d, &t, &tl) == LOOM_OK && tl == 0, "%s: nothing held back at the end", name);
    CHECK(k == len && memcmp(out, s, len) == 0, "%s: streaming round trip of \"%.40s\" gave \"%.*s\"", name, s,
          (int)k, out);
    loom_detok_free(d);
}

static void check_round_trip(const struct loom_vocab * v, const char * name, const char * s, size_t len, bool special) {
    check_round_trip_ex(v, name, s, len, special, true);
}

static const char * const corpus[] = {
    "",
    "Once upon a time, there was a little girl named Lily.",
    "Hello world",
    " leading space",
    "  two leading spaces",
    "multiple   spaces    inside",
    "trailing space ",
    "line one\nline two\n\nline four\n",
    "\ttabs\tand\r\nCRLF",
    "naïve café, résumé, Ångström, Straße, ÆØÅ æøå",
    "日本語のテキスト、中文文本，한국어 텍스트",
    "emoji: 🙂🦙🚀 and 👩‍👩‍👧 (a ZWJ sequence) and flags 🇳🇴",
    "mixed: a🦙b c🙂d 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑ x² √2 ≠ ∞",
    "Ελληνικά, русский, עברית, العربية, हिन्दी",
    "symbols <s> </s> <unk> <0x41> [INST] {json: \"x\"}",
    " ",
    "\n",
    "a",
};

/* ---------------------------------------------------------------- the required tokenizations */

static void test_reference(const struct loom_vocab * t512, const struct loom_vocab * l2) {
    if (t512) {
        check_ids(t512, "tok512", "Once upon a time", (const int32_t[]){1, 403, 407, 261, 378}, 5);
        check_ids(t512, "tok512", "Hello world", (const int32_t[]){1, 346, 306, 414, 263, 304, 341}, 7);
        check_ids(t512, "tok512", " leading space", (const int32_t[]){1, 410, 278, 411, 380, 299, 262, 427, 412, 331}, 10);
        check_ids(t512, "tok512", "émoji 🙂 test",
                  (const int32_t[]){1, 410, 485, 423, 414, 449, 417, 410, 243, 162, 156, 133, 259, 411, 356}, 15);
        check_ids(t512, "tok512", "", (const int32_t[]){1}, 1);
    }
    if (l2) {
        check_ids(l2, "llama2", "Hello world", (const int32_t[]){1, 15043, 3186}, 3);
        check_ids(l2, "llama2", " Hello world", (const int32_t[]){1, 29871, 15043, 3186}, 4);
        check_ids(l2, "llama2", "Once upon a time", (const int32_t[]){1, 9038, 2501, 263, 931}, 5);
        check_ids(l2, "llama2", "naïve café", (const int32_t[]){1, 1055, 30085, 345, 274, 28059}, 6);
        check_ids(l2, "llama2", "日本語", (const int32_t[]){1, 29871, 30325, 30346, 30968}, 5);
        check_ids(l2, "llama2", "🦙 llama", (const int32_t[]){1, 29871, 243, 162, 169, 156, 11148, 3304}, 8);
    }
}

/* The converted llama2.c vocabulary follows the GGUF convention. */
static void test_llama2c_conversion(const struct loom_vocab * v, int32_t n_expected) {
    CHECK(loom_vocab_n_tokens(v) == n_expected, "n_tokens %d", loom_vocab_n_tokens(v));
    CHECK(loom_vocab_bos(v) == 1 && loom_vocab_eos(v) == 2 && loom_vocab_unk(v) == 0, "special ids");
    CHECK(loom_vocab_get_add_bos(v) && loom_vocab_get_add_space_prefix(v), "llama defaults");
    CHECK(loom_vocab_has_byte_fallback(v), "all 256 byte pieces");
    size_t len;
    CHECK(strcmp(loom_vocab_get_text(v, 0, &len), "<unk>") == 0 && len == 5, "id 0 text");
    CHECK(strcmp(loom_vocab_get_text(v, 1, &len), "<s>") == 0 && len == 3, "id 1 text");
    CHECK(strcmp(loom_vocab_get_text(v, 2, &len), "</s>") == 0 && len == 4, "id 2 text");
    CHECK(loom_vocab_get_type(v, 0) == LOOM_TOKEN_TYPE_UNKNOWN, "id 0 type");
    CHECK(loom_vocab_get_type(v, 1) == LOOM_TOKEN_TYPE_CONTROL && loom_vocab_get_type(v, 2) == LOOM_TOKEN_TYPE_CONTROL,
          "BOS/EOS type");
    for (int b = 0; b < 256; b++) {
        char want[8];
        snprintf(want, sizeof want, "<0x%02X>", b);
        const char * t = loom_vocab_get_text(v, 3 + b, &len);
        CHECK(t && strcmp(t, want) == 0 && loom_vocab_get_type(v, 3 + b) == LOOM_TOKEN_TYPE_BYTE, "byte piece %d", b);
    }
    CHECK(loom_vocab_get_type(v, 259) == LOOM_TOKEN_TYPE_NORMAL, "normal piece");
    CHECK(loom_vocab_get_type(v, n_expected) == LOOM_TOKEN_TYPE_UNDEFINED, "out of range type");
    CHECK(loom_vocab_get_text(v, -1, &len) == NULL && len == 0, "out of range text");
    /* No piece keeps a plain space; every piece starting with a space now starts with U+2581. */
    int spaces = 0, marks = 0;
    for (int32_t i = 0; i < n_expected; i++) {
        const char * t = loom_vocab_get_text(v, i, &len);
        spaces += memchr(t, ' ', len) != NULL;
        marks += len >= 3 && memcmp(t, "\xE2\x96\x81", 3) == 0;
    }
    CHECK(spaces == 0 && marks > 0, "spaces converted (%d plain, %d marked)", spaces, marks);
    CHECK(loom_vocab_find(v, "<s>", 3) == 1, "find <s>");
}

static void test_tok512_details(const struct loom_vocab * v) {
    size_t len;
    CHECK(strcmp(loom_vocab_get_text(v, 259, &len), "\xE2\x96\x81t") == 0, "piece 259 is U+2581 t");
    CHECK(loom_vocab_get_score(v, 260) == -1.0f && loom_vocab_get_score(v, 511) == -252.0f, "scores kept");
    CHECK(loom_vocab_get_score(v, 1) == 0.0f, "BOS score");
}

/* ---------------------------------------------------------------- decoding */

static void test_pieces(const struct loom_vocab * l2) {
    char buf[64];
    CHECK(loom_token_to_piece(l2, 29871, buf, sizeof buf, false) == 1 && buf[0] == ' ', "U+2581 -> space");
    int n = loom_token_to_piece(l2, 15043, buf, sizeof buf, false);
    CHECK(n == 6 && memcmp(buf, " Hello", 6) == 0, "\" Hello\" (%d)", n);
    CHECK(loom_token_to_piece(l2, 3 + 0xF0, buf, sizeof buf, false) == 1 && (uint8_t)buf[0] == 0xF0, "byte token");
    CHECK(loom_token_to_piece(l2, 3 + 0x00, buf, sizeof buf, false) == 1 && buf[0] == 0, "NUL byte token");
    CHECK(loom_token_to_piece(l2, 1, buf, sizeof buf, false) == 0, "BOS renders empty");
    CHECK(loom_token_to_piece(l2, 2, buf, sizeof buf, true) == 4 && memcmp(buf, "</s>", 4) == 0, "EOS with special");
    n = loom_token_to_piece(l2, 0, buf, sizeof buf, false);
    CHECK(n == 5 && memcmp(buf, " \xE2\x81\x87 ", 5) == 0, "unknown renders as ' ⁇ '");
    /* too small: -(needed), and a zero-size query */
    CHECK(loom_token_to_piece(l2, 15043, buf, 3, false) == -6, "too small");
    CHECK(loom_token_to_piece(l2, 15043, NULL, 0, false) == -6, "size query");
    g_quiet = true;
    int e = g_errors;
    CHECK(loom_token_to_piece(l2, 32000, buf, sizeof buf, false) == LOOM_TOKEN_ERROR, "id out of range");
    CHECK(loom_token_to_piece(l2, -1, buf, sizeof buf, false) == LOOM_TOKEN_ERROR, "negative id");
    CHECK(g_errors == e + 2, "errors logged");
    g_quiet = false;

    /* whole sequences: the space after BOS is the dummy prefix, and is removed once */
    const int32_t seq[] = {1, 29871, 15043, 3186};
    n = loom_detokenize(l2, seq, 4, buf, sizeof buf, 0);
    CHECK(n == 12 && memcmp(buf, " Hello world", 12) == 0, "detokenize (%d) %.*s", n, n > 0 ? n : 0, buf);
    n = loom_detokenize(l2, seq, 4, buf, sizeof buf, LOOM_DETOK_KEEP_SPACE_PREFIX);
    CHECK(n == 13 && memcmp(buf, "  Hello world", 13) == 0, "detokenize keeping the prefix");
    n = loom_detokenize(l2, seq + 2, 2, buf, sizeof buf, 0);
    CHECK(n == 11 && memcmp(buf, "Hello world", 11) == 0, "no BOS: the first piece still loses its prefix");
    n = loom_detokenize(l2, seq, 4, buf, sizeof buf, LOOM_DETOK_SPECIAL);
    CHECK(n == 15 && memcmp(buf, "<s> Hello world", 15) == 0, "BOS rendered");
    CHECK(loom_detokenize(l2, seq, 4, buf, 5, 0) == -12, "detokenize too small");
    CHECK(loom_detokenize(l2, seq, 0, buf, sizeof buf, 0) == 0, "empty sequence");
}

/* ---------------------------------------------------------------- special tokens */

static void test_special(const struct loom_vocab * v, const char * name) {
    int32_t ids[MAX_IDS];
    int n = tokenize(v, "a</s>b", false, false, ids);
    bool has_eos = false;
    for (int i = 0; i < n; i++) has_eos |= ids[i] == 2;
    CHECK(n > 3 && !has_eos, "%s: user text </s> is text (%d ids)", name, n);
    n = tokenize(v, "</s>", true, false, ids);
    has_eos = false;
    for (int i = 0; i < n; i++) has_eos |= ids[i] == 2;
    CHECK(!has_eos, "%s: </s> alone is text", name);
    n = tokenize(v, "<s>", false, false, ids);
    CHECK(!(n == 1 && ids[0] == 1), "%s: <s> is text", name);

    n = tokenize(v, "a</s>b", false, true, ids);
    int32_t a_ids[8], b_ids[8];
    int na = tokenize(v, "a", false, false, a_ids), nb = tokenize(v, "b", false, false, b_ids);
    /* each segment is tokenized as if alone (with its dummy prefix), EOS between */
    CHECK(n == na + 1 + nb && memcmp(ids, a_ids, (size_t)na * 4) == 0 && ids[na] == 2 &&
              memcmp(ids + na + 1, b_ids, (size_t)nb * 4) == 0,
          "%s: parse_special splits around </s> (%d ids)", name, n);
    n = tokenize(v, "</s>", false, true, ids);
    CHECK(n == 1 && ids[0] == 2, "%s: </s> parsed", name);
    n = tokenize(v, "<s></s><s>", true, true, ids);
    CHECK(n == 4 && ids[0] == 1 && ids[1] == 1 && ids[2] == 2 && ids[3] == 1, "%s: adjacent specials", name);
    n = tokenize(v, "</s", false, true, ids);
    CHECK(n >= 1 && ids[0] != 2, "%s: a partial special is text", name);
    n = tokenize(v, "<unk>", false, true, ids);
    CHECK(n == 1 && ids[0] == 0, "%s: <unk> parsed as the unknown token", name);
    n = tokenize(v, "<unk>", false, false, ids);
    CHECK(!(n == 1 && ids[0] == 0), "%s: <unk> is text by default", name);
}

/* ---------------------------------------------------------------- streaming */

static void test_streaming(const struct loom_vocab * v) {
    /* 🦙 (F0 9F A6 99) has no piece in either vocabulary: four byte tokens */
    const uint8_t emoji[4] = {0xF0, 0x9F, 0xA6, 0x99};
    struct loom_detok * d = NULL;
    CHECK(loom_detok_new(v, 0, &d) == LOOM_OK, "detok_new");
    if (!d) return;
    const char * t;
    size_t len;
    CHECK(loom_detok_push(d, 1, &t, &len) == LOOM_OK && len == 0, "BOS gives nothing");
    CHECK(loom_detok_push(d, loom_vocab_find(v, "\xE2\x96\x81", 3), &t, &len) == LOOM_OK && len == 0,
          "the dummy prefix is removed after BOS");
    for (int i = 0; i < 4; i++) {
        CHECK(loom_detok_push(d, 3 + emoji[i], &t, &len) == LOOM_OK, "push byte");
        if (i < 3) {
            CHECK(len == 0, "byte %d of 4: nothing emitted yet (%zu)", i + 1, len);
        } else {
            CHECK(len == 4 && memcmp(t, emoji, 4) == 0, "complete character emitted (%zu)", len);
        }
    }
    /* an incomplete character followed by a space: U+FFFD for the lone prefix, then the space */
    CHECK(loom_detok_push(d, 3 + 0xE6, &t, &len) == LOOM_OK && len == 0, "held");
    CHECK(loom_detok_push(d, 3 + 0x97, &t, &len) == LOOM_OK && len == 0, "held");
    int32_t sp = loom_vocab_find(v, "\xE2\x96\x81", 3);
    CHECK(loom_detok_push(d, sp, &t, &len) == LOOM_OK && len == 4 && memcmp(t, "\xEF\xBF\xBD ", 4) == 0,
          "invalid sequence flushed as U+FFFD (%zu)", len);
    /* a stray continuation byte is U+FFFD at once */
    CHECK(loom_detok_push(d, 3 + 0x80, &t, &len) == LOOM_OK && len == 3 && memcmp(t, "\xEF\xBF\xBD", 3) == 0,
          "stray continuation");
    /* an incomplete character at the end is flushed as U+FFFD */
    CHECK(loom_detok_push(d, 3 + 0xF0, &t, &len) == LOOM_OK && len == 0, "held at end");
    CHECK(loom_detok_flush(d, &t, &len) == LOOM_OK && len == 3 && memcmp(t, "\xEF\xBF\xBD", 3) == 0, "flush");
    CHECK(loom_detok_flush(d, &t, &len) == LOOM_OK && len == 0, "second flush empty");
    g_quiet = true;
    CHECK(loom_detok_push(d, -5, &t, &len) == LOOM_ERR_INVALID_ARG && len == 0, "bad id");
    g_quiet = false;
    /* after reset the next piece is again at the start */
    loom_detok_reset(d);
    CHECK(loom_detok_push(d, 15043 < loom_vocab_n_tokens(v) ? 15043 : 259, &t, &len) == LOOM_OK && len > 0 && t[0] != ' ',
          "reset re-arms the prefix removal");
    loom_detok_free(d);

    /* mid-sequence streaming keeps the space */
    CHECK(loom_detok_new(v, LOOM_DETOK_KEEP_SPACE_PREFIX, &d) == LOOM_OK, "detok_new");
    CHECK(loom_detok_push(d, sp, &t, &len) == LOOM_OK && len == 1 && t[0] == ' ', "kept");
    loom_detok_free(d);
}

/* ---------------------------------------------------------------- sizes and arguments */

static void test_sizes(const struct loom_vocab * v) {
    int32_t ids[8];
    const char * s = "Once upon a time, there was a little girl";
    int need = loom_tokenize(v, s, strlen(s), true, false, NULL, 0);
    CHECK(need < -1, "size query returns -(needed): %d", need);
    CHECK(loom_tokenize(v, s, strlen(s), true, false, ids, 8) == need, "too small gives the same -(needed)");
    int32_t big[64];
    CHECK(loom_tokenize(v, s, strlen(s), true, false, big, -need) == -need, "exact room");
    CHECK(loom_tokenize(v, "", 0, false, false, NULL, 0) == 0, "empty without BOS: no tokens");
    CHECK(loom_tokenize(v, NULL, 0, true, false, ids, 8) == 1 && ids[0] == 1, "NULL text of length 0");
    g_quiet = true;
    int e = g_errors;
    CHECK(loom_tokenize(NULL, "x", 1, true, false, ids, 8) == LOOM_TOKEN_ERROR, "NULL vocab");
    CHECK(loom_tokenize(v, NULL, 3, true, false, ids, 8) == LOOM_TOKEN_ERROR, "NULL text");
    CHECK(loom_tokenize(v, "x", 1, true, false, ids, -1) == LOOM_TOKEN_ERROR, "negative n_max");
    CHECK(g_errors == e + 3, "errors logged");
    g_quiet = false;
    /* text with a NUL byte and invalid UTF-8 survives through byte fallback */
    const char raw[] = {'a', 0, 'b', (char)0xFF, (char)0xC3, ' ', (char)0xE2, (char)0x82};
    check_round_trip_ex(v, "raw bytes", raw, sizeof raw, false, false);
}

/* ---------------------------------------------------------------- against a naive reference */

/* The quadratic textbook procedure: rescan all adjacent pairs, merge the best (leftmost on ties). */
static int naive_bpe(const struct loom_vocab * v, const char * text, int32_t * out) {
    static char esc[4096];
    static int start[4096], len[4096];
    int n = 0, k = 0;
    esc[k++] = (char)0xE2, esc[k++] = (char)0x96, esc[k++] = (char)0x81;
    for (const char * p = text; *p; p++) {
        if (*p == ' ') {
            esc[k++] = (char)0xE2, esc[k++] = (char)0x96, esc[k++] = (char)0x81;
        } else {
            esc[k++] = *p;
        }
    }
    for (int i = 0; i < k;) {
        uint8_t c = (uint8_t)esc[i];
        int l = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2; /* the corpus is valid UTF-8 */
        start[n] = i, len[n] = l, n++, i += l;
    }
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (int i = 0; i + 1 < n; i++) {
            int32_t id = loom_vocab_find(v, esc + start[i], (size_t)(len[i] + len[i + 1]));
            if (id < 0 || loom_vocab_get_type(v, id) != LOOM_TOKEN_TYPE_NORMAL) continue;
            if (best < 0 || loom_vocab_get_score(v, id) > best_score) best = i, best_score = loom_vocab_get_score(v, id);
        }
        if (best < 0) break;
        len[best] += len[best + 1];
        memmove(start + best + 1, start + best + 2, (size_t)(n - best - 2) * sizeof *start);
        memmove(len + best + 1, len + best + 2, (size_t)(n - best - 2) * sizeof *len);
        n--;
    }
    int m = 0;
    out[m++] = 1;
    for (int i = 0; i < n; i++) {
        int32_t id = loom_vocab_find(v, esc + start[i], (size_t)len[i]);
        if (id >= 0 && loom_vocab_get_type(v, id) == LOOM_TOKEN_TYPE_NORMAL) {
            out[m++] = id;
        } else {
            for (int b = 0; b < len[i]; b++) out[m++] = 3 + (uint8_t)esc[start[i] + b];
        }
    }
    return m;
}

static void test_against_naive(const struct loom_vocab * v, const char * name) {
    static const char * const words[] = {"the", " ", "  ", "a", "cat", "sat", "on", "mat", "é", "ü", "日", "本", "🦙",
                                         ",", ".", "\n", "ing", "tion", "x", "qu", "zz", "Hello", "world", "ö", "ß"};
    uint64_t rng = 12345;
    int bad = 0;
    for (int trial = 0; trial < 300; trial++) {
        char text[512] = "";
        int nw = (int)test_rand_range(&rng, 1, 30);
        for (int w = 0; w < nw; w++) strcat(text, words[test_rand_range(&rng, 0, (int64_t)(sizeof words / sizeof *words) - 1)]);
        int32_t a[MAX_IDS], b[MAX_IDS];
        int na = tokenize(v, text, true, false, a);
        int nb = naive_bpe(v, text, b);
        if (na != nb || memcmp(a, b, (size_t)na * sizeof *a) != 0) {
            if (bad++ < 3) fprintf(stderr, "%s: mismatch with the naive BPE on \"%s\"\n", name, text);
        }
        check_round_trip(v, name, text, strlen(text), false);
    }
    CHECK(bad == 0, "%s: %d texts differ from the naive BPE", name, bad);
}

/* A long text finishes quickly (a quadratic merge loop would take minutes). */
static void test_long_text(const struct loom_vocab * v) {
    size_t n = 1 << 20;
    char * text = malloc(n + 1);
    static int32_t ids[1 << 21];
    const char * pat = "Once upon a time, there was a little llama 🦙 named Lily. ";
    size_t pl = strlen(pat);
    for (size_t i = 0; i < n; i++) text[i] = pat[i % pl];
    for (size_t i = n - 4; i < n; i++) text[i] = 'x'; /* no partial emoji at the end */
    text[n] = 0;
    int64_t t0 = loom_time_us();
    int k = loom_tokenize(v, text, n, true, false, ids, 1 << 21);
    int64_t t1 = loom_time_us();
    CHECK(k > 1000, "long text tokenized (%d)", k);
    fprintf(stderr, "tokenized %zu bytes into %d tokens in %.1f ms\n", n, k, (double)(t1 - t0) / 1e3);
    /* all-one-character text: the worst case for naive merging */
    memset(text, 'a', n);
    t0 = loom_time_us();
    k = loom_tokenize(v, text, n, true, false, ids, 1 << 21);
    t1 = loom_time_us();
    fprintf(stderr, "tokenized %zu bytes of 'a' into %d tokens in %.1f ms\n", n, k, (double)(t1 - t0) / 1e3);
    CHECK(k > 1, "1 MiB of 'a' tokenized (%d)", k); /* the time is printed, not asserted: speed belongs to benchmarks */
    free(text);
}

/* ---------------------------------------------------------------- hostile llama2.c files */

static size_t put_entry(uint8_t * buf, size_t pos, float score, int32_t len, const char * bytes) {
    memcpy(buf + pos, &score, 4);
    memcpy(buf + pos + 4, &len, 4);
    if (bytes && len > 0) memcpy(buf + pos + 8, bytes, (size_t)len);
    return pos + 8 + (size_t)(len > 0 && bytes ? len : 0);
}

static size_t minimal_file(uint8_t * buf) {
    int32_t max_len = 8;
    memcpy(buf, &max_len, 4);
    size_t pos = 4;
    pos = put_entry(buf, pos, 0, 5, "<unk>");
    pos = put_entry(buf, pos, 0, 5, "\n<s>\n");
    pos = put_entry(buf, pos, 0, 6, "\n</s>\n");
    pos = put_entry(buf, pos, -1, 2, " a");
    return pos;
}

static void test_hostile(const char * tmp_path) {
    uint8_t buf[256];
    struct loom_vocab * v = NULL;
    size_t size = minimal_file(buf);
    CHECK(loom_vocab_load_llama2c_buffer(buf, size, 0, &v) == LOOM_OK && v && loom_vocab_n_tokens(v) == 4,
          "minimal file loads");
    if (v) {
        int32_t ids[8];
        CHECK(!loom_vocab_has_byte_fallback(v), "no byte pieces: no byte fallback");
        int n = loom_tokenize(v, "a", 1, true, false, ids, 8);
        CHECK(n == 2 && ids[1] == 3, "tokenizes with the tiny vocabulary");
        n = loom_tokenize(v, "b a", 3, true, false, ids, 8);
        CHECK(n == 3 && ids[1] == 0 && ids[2] == 3, "unknown characters become <unk> (%d)", n);
        loom_vocab_free(v);
    }
    g_quiet = true;
    int e0 = g_errors;
    /* every truncation of a valid file is an error (except the exact entry boundaries) */
    int bad = 0;
    for (size_t cut = 0; cut < size; cut++) {
        enum loom_status st = loom_vocab_load_llama2c_buffer(buf, cut, 0, &v);
        if (st == LOOM_OK) loom_vocab_free(v);
        bool boundary = cut == 4 + 13 + 13 + 14; /* 3 entries: still valid */
        if ((st == LOOM_OK) != boundary || (st != LOOM_OK && (st != LOOM_ERR_FORMAT || v != NULL))) bad++;
    }
    CHECK(bad == 0, "%d truncations misjudged", bad);
    CHECK(loom_vocab_load_llama2c_buffer(buf, size, 5, &v) == LOOM_ERR_FORMAT, "fewer entries than n_tokens");

    uint8_t h[64];
    int32_t max_len = 8;
    memcpy(h, &max_len, 4);
    size_t pos = put_entry(h, 4, 0, -3, NULL);
    CHECK(loom_vocab_load_llama2c_buffer(h, pos + 8, 0, &v) == LOOM_ERR_FORMAT && !v, "negative length");
    pos = put_entry(h, 4, 0, INT32_MAX, NULL);
    CHECK(loom_vocab_load_llama2c_buffer(h, pos + 8, 0, &v) == LOOM_ERR_FORMAT && !v, "huge length");
    max_len = INT32_MAX;
    memcpy(h, &max_len, 4);
    pos = put_entry(h, 4, 0, 1 << 30, NULL);
    CHECK(loom_vocab_load_llama2c_buffer(h, pos + 8, 0, &v) == LOOM_ERR_FORMAT && !v, "length past the end");
    max_len = -1;
    memcpy(h, &max_len, 4);
    CHECK(loom_vocab_load_llama2c_buffer(h, 4, 0, &v) == LOOM_ERR_FORMAT && !v, "negative max_token_length");
    memcpy(buf + 4, &(float){NAN}, 4);
    CHECK(loom_vocab_load_llama2c_buffer(buf, size, 0, &v) == LOOM_ERR_FORMAT && !v, "NaN score");
    CHECK(loom_vocab_load_llama2c_buffer(buf, 0, 0, &v) == LOOM_ERR_FORMAT && !v, "empty");
    CHECK(loom_vocab_load_llama2c_buffer(NULL, 10, 0, &v) == LOOM_ERR_INVALID_ARG, "NULL data");
    CHECK(loom_vocab_load_llama2c_buffer(buf, size, -1, &v) == LOOM_ERR_INVALID_ARG, "negative n_tokens");
    CHECK(loom_vocab_load_llama2c("/nonexistent/tokenizer.bin", 0, &v) == LOOM_ERR_IO && !v, "missing file");

    /* through a file: truncated in the middle of a piece */
    FILE * f = fopen(tmp_path, "wb");
    if (f) {
        size = minimal_file(buf);
        fwrite(buf, 1, size - 1, f);
        fclose(f);
        CHECK(loom_vocab_load_llama2c(tmp_path, 0, &v) == LOOM_ERR_FORMAT && !v, "truncated file");
        remove(tmp_path);
    }
    CHECK(g_errors > e0 + 12, "every rejection logged (%d)", g_errors - e0);
    g_quiet = false;
}

/* Random byte strings (mostly invalid UTF-8) survive encode/decode exactly through byte fallback. */
static void test_random_bytes(const struct loom_vocab * v, const char * name) {
    uint64_t rng = 777;
    for (int trial = 0; trial < 500; trial++) {
        char text[64];
        size_t n = (size_t)test_rand_range(&rng, 0, 63);
        for (size_t i = 0; i < n; i++) {
            /* bias towards spaces and bytes that start or continue multi-byte characters */
            int kind = (int)test_rand_range(&rng, 0, 3);
            text[i] = kind == 0 ? ' ' : kind == 1 ? (char)test_rand_range(&rng, 0x80, 0xFF) : (char)test_rand_range(&rng, 0, 0x7F);
        }
        check_round_trip_ex(v, name, text, n, false, false);
    }
}

/* Mutated copies of a real tokenizer file load or fail cleanly (run under the sanitizers in CI). */
static void test_mutations(const char * path) {
    FILE * f = fopen(path, "rb");
    if (!f) return;
    static uint8_t orig[8192], buf[8192];
    size_t size = fread(orig, 1, sizeof orig, f);
    fclose(f);
    uint64_t rng = 31337;
    bool quiet = g_quiet;
    g_quiet = true;
    int ok = 0, format = 0, other = 0;
    for (int trial = 0; trial < 2000; trial++) {
        memcpy(buf, orig, size);
        int flips = (int)test_rand_range(&rng, 1, 4);
        for (int k = 0; k < flips; k++) {
            /* the header region of the first entries holds the lengths worth corrupting */
            size_t at = (size_t)test_rand_range(&rng, 0, trial % 2 ? 64 : (int64_t)size - 1);
            buf[at] = (uint8_t)test_rand_u64(&rng);
        }
        size_t n = trial % 3 == 0 ? (size_t)test_rand_range(&rng, 0, (int64_t)size) : size;
        struct loom_vocab * v = NULL;
        enum loom_status st = loom_vocab_load_llama2c_buffer(buf, n, 0, &v);
        if (st == LOOM_OK) {
            int32_t ids[64];
            loom_tokenize(v, "hello world", 11, true, true, ids, 64);
            loom_vocab_free(v);
            ok++;
        } else if (st == LOOM_ERR_FORMAT && !v) {
            format++;
        } else {
            other++;
        }
    }
    g_quiet = quiet;
    CHECK(other == 0, "mutated files: %d ok, %d format errors, %d other outcomes", ok, format, other);
}

int main(void) {
    loom_log_set(log_capture, NULL);
    FILE * probe = fopen(test_model_path("tokenizer.bin"), "rb");
    if (!probe) return test_skip("tokenizer.bin not found in $LOOM_MODELS");
    fclose(probe);
    struct loom_vocab * t512 = NULL, * l2 = NULL;
    enum loom_status st = loom_vocab_load_llama2c(test_model_path("tok512.bin"), 0, &t512);
    CHECK(st == LOOM_OK, "tok512.bin: %s", loom_status_str(st));
    st = loom_vocab_load_llama2c(test_model_path("tokenizer.bin"), 32000, &l2);
    CHECK(st == LOOM_OK, "tokenizer.bin: %s", loom_status_str(st));
    if (!t512 || !l2) return test_finish("test-tokenizer");

    test_reference(t512, l2);
    test_llama2c_conversion(t512, 512);
    test_llama2c_conversion(l2, 32000);
    test_tok512_details(t512);
    test_pieces(l2);
    for (size_t i = 0; i < sizeof corpus / sizeof *corpus; i++) {
        check_round_trip(t512, "tok512", corpus[i], strlen(corpus[i]), false);
        check_round_trip(l2, "llama2", corpus[i], strlen(corpus[i]), false);
    }
    const char * specials = "<s>Hi</s> there</s>\n<s> x";
    check_round_trip(l2, "llama2 special", specials, strlen(specials), true);
    check_round_trip(t512, "tok512 special", specials, strlen(specials), true);
    test_special(t512, "tok512");
    test_special(l2, "llama2");
    test_streaming(t512);
    test_streaming(l2);
    test_sizes(t512);
    test_sizes(l2);
    test_against_naive(t512, "tok512");
    test_against_naive(l2, "llama2");
    test_long_text(l2);
    test_hostile("test-tokenizer-hostile.bin");
    test_random_bytes(t512, "tok512 random bytes");
    test_random_bytes(l2, "llama2 random bytes");
    test_mutations(test_model_path("tok512.bin"));

    loom_vocab_free(t512);
    loom_vocab_free(l2);
    return test_finish("test-tokenizer");
}
