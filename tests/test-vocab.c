/* test-vocab.c -- building vocabularies from plain arrays: validation, lookups, merge order on toy vocabularies. */
#include "loom-llama.h"
#include "test-util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int g_errors;
static int g_warnings;

static void log_capture(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    (void)text;
    g_errors += level == LOOM_LOG_ERROR;
    g_warnings += level == LOOM_LOG_WARN;
}

#define SP "\xE2\x96\x81" /* U+2581 */
#define MAXT 400

/* A toy vocabulary: <unk> <s> </s>, optionally the 256 byte pieces, then 'extra' pieces. */
struct toy {
    const char * texts[MAXT];
    float scores[MAXT];
    int32_t types[MAXT];
    char bytes[256][8];
    int n;
};

static void toy_init(struct toy * t, bool with_bytes) {
    memset(t, 0, sizeof *t);
    const char * sp[3] = {"<unk>", "<s>", "</s>"};
    const int32_t ty[3] = {LOOM_TOKEN_TYPE_UNKNOWN, LOOM_TOKEN_TYPE_CONTROL, LOOM_TOKEN_TYPE_CONTROL};
    for (int i = 0; i < 3; i++) t->texts[t->n] = sp[i], t->types[t->n++] = ty[i];
    if (with_bytes) {
        for (int b = 0; b < 256; b++) {
            snprintf(t->bytes[b], sizeof t->bytes[b], "<0x%02X>", b);
            t->texts[t->n] = t->bytes[b], t->types[t->n++] = LOOM_TOKEN_TYPE_BYTE;
        }
    }
}

static int toy_add(struct toy * t, const char * text, float score, int32_t type) {
    t->texts[t->n] = text, t->scores[t->n] = score, t->types[t->n] = type;
    return t->n++;
}

static struct loom_vocab_params toy_params(const struct toy * t) {
    struct loom_vocab_params p = loom_vocab_default_params();
    p.n_tokens = t->n;
    p.texts = t->texts;
    p.scores = t->scores;
    p.types = t->types;
    p.unk_id = 0, p.bos_id = 1, p.eos_id = 2;
    return p;
}

static struct loom_vocab * toy_build(const struct toy * t, bool prefix) {
    struct loom_vocab_params p = toy_params(t);
    p.add_space_prefix = prefix;
    struct loom_vocab * v = NULL;
    enum loom_status st = loom_vocab_new(&p, &v);
    CHECK(st == LOOM_OK && v, "toy vocabulary: %s", loom_status_str(st));
    return v;
}

static void expect(const struct loom_vocab * v, const char * text, const int32_t * want, int n_want, const char * what) {
    int32_t ids[64];
    int n = loom_tokenize(v, text, strlen(text), false, false, ids, 64);
    bool ok = n == n_want && memcmp(ids, want, (size_t)n * sizeof *ids) == 0;
    if (!ok) {
        fprintf(stderr, "%s: \"%s\" ->", what, text);
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    CHECK(ok, "%s", what);
}

static void expect_status(const struct loom_vocab_params * p, enum loom_status want, const char * what) {
    struct loom_vocab * v = (struct loom_vocab *)&g_errors; /* must be reset to NULL on failure */
    int e = g_errors;
    enum loom_status st = loom_vocab_new(p, &v);
    CHECK(st == want, "%s: got %s, want %s", what, loom_status_str(st), loom_status_str(want));
    if (want != LOOM_OK) CHECK(v == NULL && g_errors > e, "%s: NULL result and a logged reason", what);
    if (st == LOOM_OK) loom_vocab_free(v);
}

static void test_validation(void) {
    struct toy t;
    toy_init(&t, true);
    toy_add(&t, "a", -1, LOOM_TOKEN_TYPE_NORMAL);
    struct loom_vocab_params p = toy_params(&t);
    expect_status(&p, LOOM_OK, "valid");

    struct loom_vocab_params d = loom_vocab_default_params();
    CHECK(d.bos_id == -1 && d.eos_id == -1 && d.unk_id == -1 && d.add_bos && d.add_space_prefix, "defaults");
    expect_status(&d, LOOM_ERR_INVALID_ARG, "default params (no tokens)");
    const char * const three[3] = {"<unk>", "<s>", "</s>"};
    const struct loom_vocab_params l = loom_vocab_llama_params(3, three, NULL, NULL, NULL);
    CHECK(l.n_tokens == 3 && l.texts == three && !l.text_lens && !l.scores && !l.types && l.unk_id == 0 && l.bos_id == 1 && l.eos_id == 2 &&
              l.eot_id == -1 && l.add_bos && l.add_space_prefix && l.type == LOOM_VOCAB_TYPE_SPM,
          "the llama layout: the defaults with unk 0, bos 1, eos 2");
    expect_status(NULL, LOOM_ERR_INVALID_ARG, "NULL params");
    CHECK(loom_vocab_new(&p, NULL) == LOOM_ERR_INVALID_ARG, "NULL out");

    struct loom_vocab_params q = p;
    q.n_tokens = -1;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "negative n_tokens");
    q = p, q.texts = NULL;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "no texts");
    q = p, q.bos_id = t.n;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "BOS out of range");
    q = p, q.eos_id = -2;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "EOS below -1");
    q = p, q.unk_id = 100000;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "UNK out of range");
    q = p, q.bos_id = -1;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "add_bos without BOS");
    q.add_bos = false;
    expect_status(&q, LOOM_OK, "no BOS and no add_bos");

    float scores[MAXT];
    memcpy(scores, t.scores, sizeof scores);
    scores[5] = NAN;
    q = p, q.scores = scores;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "NaN score");
    scores[5] = -INFINITY;
    expect_status(&q, LOOM_OK, "-inf score is allowed");
    q = p, q.scores = NULL;
    expect_status(&q, LOOM_OK, "no scores");

    int32_t types[MAXT];
    memcpy(types, t.types, sizeof types);
    types[259] = 0;
    q = p, q.types = types;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "type 0");
    types[259] = 7;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "type 7");
    types[259] = LOOM_TOKEN_TYPE_BYTE; /* "a" is not a byte piece */
    expect_status(&q, LOOM_ERR_INVALID_ARG, "byte type with a non-byte piece");

    const char * texts[MAXT];
    memcpy(texts, t.texts, sizeof texts);
    texts[259] = NULL;
    q = p, q.texts = texts;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "NULL text");
    size_t lens[MAXT];
    for (int i = 0; i < t.n; i++) lens[i] = texts[i] ? strlen(texts[i]) : 0;
    q.text_lens = lens;
    expect_status(&q, LOOM_OK, "NULL text of length 0");
    lens[259] = 1;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "NULL text of length 1");
    texts[259] = "a";
    lens[259] = (size_t)LOOM_VOCAB_MAX_PIECE + 1;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "piece too long");

    /* byte pieces: all missing without <unk> is an error; with <unk>, only a warning */
    struct toy nb;
    toy_init(&nb, false);
    toy_add(&nb, "a", 0, LOOM_TOKEN_TYPE_NORMAL);
    q = toy_params(&nb);
    q.unk_id = -1;
    nb.types[0] = LOOM_TOKEN_TYPE_NORMAL;
    expect_status(&q, LOOM_ERR_INVALID_ARG, "no byte fallback and no unknown token");
    nb.types[0] = LOOM_TOKEN_TYPE_UNKNOWN;
    q.unk_id = 0;
    int w = g_warnings;
    struct loom_vocab * v = NULL;
    CHECK(loom_vocab_new(&q, &v) == LOOM_OK && !loom_vocab_has_byte_fallback(v) && g_warnings > w,
          "no byte pieces: fallback reported unavailable");
    loom_vocab_free(v);
    /* one byte piece missing: 0x41 replaced by a normal piece */
    struct toy pb;
    toy_init(&pb, true);
    pb.types[3 + 0x41] = LOOM_TOKEN_TYPE_NORMAL;
    pb.texts[3 + 0x41] = "A";
    v = toy_build(&pb, true);
    CHECK(v && !loom_vocab_has_byte_fallback(v), "255 of 256 byte pieces: no fallback");
    loom_vocab_free(v);
    /* lower-case hex digits are accepted */
    pb.types[3 + 0x41] = LOOM_TOKEN_TYPE_BYTE;
    pb.texts[3 + 0x4a] = "<0x4a>";
    pb.texts[3 + 0x41] = "<0x41>";
    v = toy_build(&pb, true);
    CHECK(v && loom_vocab_has_byte_fallback(v), "lower-case byte piece");
    char c;
    CHECK(v && loom_token_to_piece(v, 3 + 0x4a, &c, 1, false) == 1 && c == 0x4a, "lower-case byte decodes");
    loom_vocab_free(v);
}

static void test_inferred_types(void) {
    const char * texts[] = {"<unk>", "<s>", "</s>", "<0x00>", SP "a", "b"};
    struct loom_vocab_params p = loom_vocab_default_params();
    p.n_tokens = 6;
    p.texts = texts;
    p.unk_id = 0, p.bos_id = 1, p.eos_id = 2;
    struct loom_vocab * v = NULL;
    CHECK(loom_vocab_new(&p, &v) == LOOM_OK, "inferred types");
    if (!v) return;
    CHECK(loom_vocab_get_type(v, 0) == LOOM_TOKEN_TYPE_UNKNOWN, "unk inferred");
    CHECK(loom_vocab_get_type(v, 1) == LOOM_TOKEN_TYPE_CONTROL && loom_vocab_get_type(v, 2) == LOOM_TOKEN_TYPE_CONTROL,
          "BOS/EOS inferred control");
    CHECK(loom_vocab_get_type(v, 3) == LOOM_TOKEN_TYPE_BYTE, "byte inferred");
    CHECK(loom_vocab_get_type(v, 4) == LOOM_TOKEN_TYPE_NORMAL, "normal inferred");
    CHECK(loom_vocab_get_score(v, 4) == 0.0f, "scores default to 0");
    CHECK(loom_vocab_find(v, SP "a", 4) == 4 && loom_vocab_find(v, "zz", 2) == -1, "find");
    loom_vocab_free(v);
}

static void test_duplicates(void) {
    struct toy t;
    toy_init(&t, true);
    int ctl = toy_add(&t, "x", 0, LOOM_TOKEN_TYPE_CONTROL);
    int first = toy_add(&t, "ab", -1, LOOM_TOKEN_TYPE_NORMAL);
    toy_add(&t, "ab", -1, LOOM_TOKEN_TYPE_NORMAL);
    int normal_x = toy_add(&t, "x", -1, LOOM_TOKEN_TYPE_NORMAL);
    int a = toy_add(&t, "a", -5, LOOM_TOKEN_TYPE_NORMAL);
    int b = toy_add(&t, "b", -5, LOOM_TOKEN_TYPE_NORMAL);
    int w = g_warnings;
    struct loom_vocab * v = toy_build(&t, false);
    if (!v) return;
    CHECK(g_warnings > w, "duplicates are reported");
    CHECK(loom_vocab_find(v, "ab", 2) == first, "lowest id wins");
    CHECK(loom_vocab_find(v, "x", 1) == normal_x, "a text piece is preferred over a control piece");
    expect(v, "abx", (const int32_t[]){first, normal_x}, 2, "duplicates tokenize with the preferred ids");
    (void)ctl, (void)a, (void)b;
    loom_vocab_free(v);
}

static void test_merges(void) {
    struct toy t;
    toy_init(&t, true);
    int sp = toy_add(&t, SP, -1, LOOM_TOKEN_TYPE_NORMAL);
    int a = toy_add(&t, "a", -1, LOOM_TOKEN_TYPE_NORMAL);
    int b = toy_add(&t, "b", -1, LOOM_TOKEN_TYPE_NORMAL);
    int c = toy_add(&t, "c", -1, LOOM_TOKEN_TYPE_NORMAL);
    int ab = toy_add(&t, "ab", -3, LOOM_TOKEN_TYPE_NORMAL);
    int bc = toy_add(&t, "bc", -2, LOOM_TOKEN_TYPE_NORMAL);
    int xx = toy_add(&t, "xx", 0, LOOM_TOKEN_TYPE_NORMAL);
    int x = toy_add(&t, "x", -1, LOOM_TOKEN_TYPE_NORMAL);
    int lt = toy_add(&t, "<", -1, LOOM_TOKEN_TYPE_NORMAL);
    int gt = toy_add(&t, ">", -1, LOOM_TOKEN_TYPE_NORMAL);
    int y = toy_add(&t, "y", -1, LOOM_TOKEN_TYPE_NORMAL);
    int lty = toy_add(&t, "<y", 0, LOOM_TOKEN_TYPE_NORMAL);
    toy_add(&t, "<y>", 10, LOOM_TOKEN_TYPE_CONTROL);
    toy_add(&t, "<0x", 10, LOOM_TOKEN_TYPE_NORMAL); /* could build "<0x41>" if byte pieces were merge targets */
    int hell = toy_add(&t, "hell", -9, LOOM_TOKEN_TYPE_USER_DEFINED);
    int he = toy_add(&t, "he", 0, LOOM_TOKEN_TYPE_NORMAL);
    int llo = toy_add(&t, "llo", 0, LOOM_TOKEN_TYPE_NORMAL);
    toy_add(&t, "ll", 0, LOOM_TOKEN_TYPE_NORMAL);
    toy_add(&t, "h", -1, LOOM_TOKEN_TYPE_NORMAL);
    toy_add(&t, "l", -1, LOOM_TOKEN_TYPE_NORMAL);
    int o = toy_add(&t, "o", -1, LOOM_TOKEN_TYPE_NORMAL);
    int sp_a = toy_add(&t, SP "a", -0.5f, LOOM_TOKEN_TYPE_NORMAL);
    int sp_hi = toy_add(&t, SP "hi", -9, LOOM_TOKEN_TYPE_USER_DEFINED);
    struct loom_vocab * v = toy_build(&t, false);
    if (!v) return;

    expect(v, "abc", (const int32_t[]){a, bc}, 2, "the higher-scoring pair merges first");
    expect(v, "xxx", (const int32_t[]){xx, x}, 2, "ties merge leftmost first");
    expect(v, "xxxx", (const int32_t[]){xx, xx}, 2, "ties: left pair then right pair");
    expect(v, "<y>", (const int32_t[]){lty, gt}, 2, "merges never produce control pieces");
    {
        int32_t ids[16];
        int n = loom_tokenize(v, "<0x41>", 6, false, false, ids, 16);
        bool has_byte = false;
        for (int i = 0; i < n; i++) has_byte |= ids[i] == 3 + 0x41;
        CHECK(n > 1 && !has_byte, "merges never produce byte pieces (%d)", n);
    }
    expect(v, "hello", (const int32_t[]){hell, o}, 2, "user-defined pieces are matched whole");
    expect(v, " a", (const int32_t[]){sp_a}, 1, "space as U+2581");
    expect(v, " hi", (const int32_t[]){sp_hi}, 1, "user-defined piece with U+2581");
    expect(v, "a b", (const int32_t[]){a, sp, b}, 3, "no merge across a space without a piece");
    expect(v, "z", (const int32_t[]){3 + 'z'}, 1, "byte fallback");
    expect(v, "é", (const int32_t[]){3 + 0xC3, 3 + 0xA9}, 2, "multi-byte fallback");
    (void)c, (void)ab, (void)he, (void)llo, (void)y, (void)lt;

    char buf[32];
    int n = loom_detokenize(v, (const int32_t[]){sp_hi, sp_a}, 2, buf, sizeof buf, LOOM_DETOK_KEEP_SPACE_PREFIX);
    CHECK(n == 5 && memcmp(buf, " hi a", 5) == 0, "user-defined decodes with spaces");
    loom_vocab_free(v);

    /* with the dummy prefix */
    v = toy_build(&t, true);
    if (!v) return;
    expect(v, "a", (const int32_t[]){sp_a}, 1, "dummy prefix");
    expect(v, "", (const int32_t[]){0}, 0, "empty text: no prefix");
    n = loom_detokenize(v, (const int32_t[]){1, sp_a, sp_a}, 3, buf, sizeof buf, 0);
    CHECK(n == 3 && memcmp(buf, "a a", 3) == 0, "prefix removed once");
    loom_vocab_free(v);
}

static void test_unknown_runs(void) {
    struct toy t;
    toy_init(&t, false);
    int a = toy_add(&t, "a", -1, LOOM_TOKEN_TYPE_NORMAL);
    struct loom_vocab * v = toy_build(&t, false);
    if (!v) return;
    expect(v, "azzéa", (const int32_t[]){a, 0, a}, 3, "a run of unknown characters is one <unk>");
    char buf[16];
    int n = loom_detokenize(v, (const int32_t[]){a, 0, a}, 3, buf, sizeof buf, 0);
    CHECK(n == 7 && memcmp(buf, "a \xE2\x81\x87 a", 7) == 0, "unknown rendering");
    n = loom_detokenize(v, (const int32_t[]){a, 0, a}, 3, buf, sizeof buf, LOOM_DETOK_SPECIAL);
    CHECK(n == 7 && memcmp(buf, "a<unk>a", 7) == 0, "unknown raw with special");
    loom_vocab_free(v);
}

static void test_embedded_nul(void) {
    const char * texts[] = {"<unk>", "<s>", "</s>", "a\0b", "a\0"};
    size_t lens[] = {5, 3, 4, 3, 2};
    struct loom_vocab_params p = loom_vocab_default_params();
    p.n_tokens = 5;
    p.texts = texts;
    p.text_lens = lens;
    p.unk_id = 0, p.bos_id = 1, p.eos_id = 2;
    p.add_space_prefix = false;
    struct loom_vocab * v = NULL;
    CHECK(loom_vocab_new(&p, &v) == LOOM_OK, "embedded NUL");
    if (!v) return;
    size_t len;
    const char * s = loom_vocab_get_text(v, 3, &len);
    CHECK(len == 3 && memcmp(s, "a\0b", 3) == 0 && s[3] == 0, "text with NUL kept, terminated");
    int32_t ids[4];
    CHECK(loom_tokenize(v, "a\0b", 3, false, false, ids, 4) == 1 && ids[0] == 3, "tokenized with the NUL");
    loom_vocab_free(v);
}

int main(void) {
    loom_log_set(log_capture, NULL);
    test_validation();
    test_inferred_types();
    test_duplicates();
    test_merges();
    test_unknown_runs();
    test_embedded_nul();
    return test_finish("test-vocab");
}
