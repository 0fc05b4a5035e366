/* test-model-meta.c -- the hyper-parameters and the vocabulary's optional keys read from a model's
 * metadata: optional llama.* and tokenizer.ggml.* keys take their defaults only when absent; any integer type whose value fits is accepted for an integer
 * key (f32 or f64 for a float key); a present key of another type, or a value that does not fit,
 * is refused with a message naming the key and the type found (a token id outside the vocabulary: the
 * key, the value and the ids there are, [0, n_vocab)). Files are written with the GGUF
 * writer: the five keys every model needs, one key under test, and nine placeholder tensors (the
 * reader checks a layer's tensor count before anything else). */
#include "test-util.h"

#include "loom-gguf.h"
#include "loom-llama.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#define FILE_OUT "model-meta-test.gguf"

/* The key under test with a value of 'type': 'v' for the numeric types, "4" for str, an array of
 * one u32 'v' for arr. */
struct key_case {
    const char * key;
    enum loom_gguf_type type;
    double v;
};

static enum loom_status set_key(struct loom_gguf_writer * w, const struct key_case * k) {
    switch (k->type) {
    case LOOM_GGUF_TYPE_UINT8: return loom_gguf_writer_set_u8(w, k->key, (uint8_t)k->v);
    case LOOM_GGUF_TYPE_INT8: return loom_gguf_writer_set_i8(w, k->key, (int8_t)k->v);
    case LOOM_GGUF_TYPE_UINT16: return loom_gguf_writer_set_u16(w, k->key, (uint16_t)k->v);
    case LOOM_GGUF_TYPE_UINT32: return loom_gguf_writer_set_u32(w, k->key, (uint32_t)k->v);
    case LOOM_GGUF_TYPE_INT32: return loom_gguf_writer_set_i32(w, k->key, (int32_t)k->v);
    case LOOM_GGUF_TYPE_UINT64: return loom_gguf_writer_set_u64(w, k->key, (uint64_t)k->v);
    case LOOM_GGUF_TYPE_INT64: return loom_gguf_writer_set_i64(w, k->key, (int64_t)k->v);
    case LOOM_GGUF_TYPE_FLOAT32: return loom_gguf_writer_set_f32(w, k->key, (float)k->v);
    case LOOM_GGUF_TYPE_FLOAT64: return loom_gguf_writer_set_f64(w, k->key, k->v);
    case LOOM_GGUF_TYPE_BOOL: return loom_gguf_writer_set_bool(w, k->key, k->v != 0);
    case LOOM_GGUF_TYPE_STRING: return loom_gguf_writer_set_str(w, k->key, "4");
    case LOOM_GGUF_TYPE_ARRAY: {
        uint32_t one = (uint32_t)k->v;
        return loom_gguf_writer_set_arr_data(w, k->key, LOOM_GGUF_TYPE_UINT32, &one, 1);
    }
    default: return LOOM_ERR_INVALID_ARG;
    }
}

/* Writes a one-layer model's metadata (64 wide, 8 heads of 8; with 'vocab' also a five-token llama
 * vocabulary) plus 'k' (when not NULL) and reads its hyper-parameters into 'hp' (and, with 'vocab',
 * the vocabulary into '*vocab'); the last logged error is left in test_last_error. */
static enum loom_status read_meta_with(const struct key_case * k, struct loom_hparams * hp, struct loom_vocab ** vocab) {
    static const float zero = 0;
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    CHECK(w != NULL, "writer");
    if (!w) return LOOM_ERR_OOM;
    /* the case's key replaces the file's own value of it */
    const bool own_arch = !k || strcmp(k->key, "general.architecture") != 0, own_tok = !k || strcmp(k->key, "tokenizer.ggml.model") != 0;
    enum loom_status st = own_arch ? loom_gguf_writer_set_str(w, "general.architecture", "llama") : LOOM_OK;
    if (st == LOOM_OK) st = loom_gguf_writer_set_u32(w, "llama.embedding_length", 64);
    if (st == LOOM_OK) st = loom_gguf_writer_set_u32(w, "llama.block_count", 1);
    if (st == LOOM_OK) st = loom_gguf_writer_set_u32(w, "llama.attention.head_count", 8);
    if (st == LOOM_OK) st = loom_gguf_writer_set_u32(w, "llama.feed_forward_length", 172);
    if (st == LOOM_OK && vocab && own_tok) st = loom_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (st == LOOM_OK && vocab) {
        static const char * const tokens[5] = {"<unk>", "<s>", "</s>", "a", "b"};
        st = loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, NULL, 5);
    }
    if (st == LOOM_OK && k) st = set_key(w, k);
    for (int i = 0; i < 9 && st == LOOM_OK; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        st = loom_gguf_writer_add_tensor(w, name, LOOM_TYPE_F32, 1, (const int64_t[]){1}, &zero);
    }
    char err[256] = "";
    if (st == LOOM_OK) st = loom_gguf_writer_write_file(w, FILE_OUT, err, sizeof err);
    loom_gguf_writer_free(w);
    CHECK(st == LOOM_OK, "writing the test file: %s %s", loom_status_str(st), err);
    if (st != LOOM_OK) return st;
    test_last_error[0] = 0;
    st = loom_model_read_meta(FILE_OUT, hp, vocab);
    unlink(FILE_OUT);
    return st;
}

static enum loom_status read_with(const struct key_case * k, struct loom_hparams * hp) { return read_meta_with(k, hp, NULL); }

static void check_defaults(void) {
    struct loom_hparams hp;
    CHECK(read_with(NULL, &hp) == LOOM_OK, "no optional keys: %s", test_last_error);
    CHECK(hp.n_ctx_train == 2048 && hp.n_head_kv == 8 && hp.n_rot == 8, "integer defaults: ctx %d, kv heads %d, rot %d",
          hp.n_ctx_train, hp.n_head_kv, hp.n_rot);
    CHECK(hp.rope_freq_base == 10000.0f && hp.rope_freq_scale == 1.0f && hp.rms_eps == 1e-5f, "float defaults");
}

/* Integer keys in any integer type whose value fits, float keys in f32 or f64. */
static void check_accepted(void) {
    static const struct key_case cases[] = {
        {"llama.context_length", LOOM_GGUF_TYPE_UINT8, 200},
        {"llama.context_length", LOOM_GGUF_TYPE_UINT16, 4096},
        {"llama.context_length", LOOM_GGUF_TYPE_INT64, 128},
        {"llama.attention.head_count_kv", LOOM_GGUF_TYPE_INT32, 2},
        {"llama.attention.head_count_kv", LOOM_GGUF_TYPE_UINT64, 4},
        {"llama.rope.dimension_count", LOOM_GGUF_TYPE_INT8, 4},
        {"llama.rope.freq_base", LOOM_GGUF_TYPE_FLOAT32, 500000},
        {"llama.rope.scale_linear", LOOM_GGUF_TYPE_FLOAT64, 4},
        {"llama.attention.layer_norm_rms_epsilon", LOOM_GGUF_TYPE_FLOAT64, 1e-6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct key_case * k = &cases[i];
        struct loom_hparams hp;
        enum loom_status st = read_with(k, &hp);
        CHECK(st == LOOM_OK, "%s of type %s: %s", k->key, loom_gguf_type_name(k->type), test_last_error);
        if (st != LOOM_OK) continue;
        /* the one value set, read back where the key goes; the others keep their defaults */
        const double got = !strcmp(k->key, "llama.context_length")            ? hp.n_ctx_train
                           : !strcmp(k->key, "llama.attention.head_count_kv") ? hp.n_head_kv
                           : !strcmp(k->key, "llama.rope.dimension_count")    ? hp.n_rot
                           : !strcmp(k->key, "llama.rope.freq_base")          ? hp.rope_freq_base
                           : !strcmp(k->key, "llama.rope.scale_linear")       ? 1.0 / hp.rope_freq_scale
                                                                              : hp.rms_eps;
        CHECK(fabs(got - k->v) <= 1e-6 * k->v, "%s of type %s: read %g, wrote %g", k->key, loom_gguf_type_name(k->type), got, k->v);
    }
}

/* Another type, or a value that does not fit: refused, the message naming key and type (tokenizer.*
 * keys read with the vocabulary). */
static void check_refused(void) {
    static const struct {
        struct key_case k;
        const char * says;  /* in the message after the key's name */
    } cases[] = {
        {{"llama.context_length", LOOM_GGUF_TYPE_FLOAT32, 512}, "has type f32"},
        {{"llama.context_length", LOOM_GGUF_TYPE_BOOL, 1}, "has type bool"},
        {{"llama.context_length", LOOM_GGUF_TYPE_UINT64, 8589934592.0}, "value 8589934592 does not fit"},
        {{"llama.attention.head_count_kv", LOOM_GGUF_TYPE_STRING, 0}, "has type str"},
        {{"llama.attention.head_count_kv", LOOM_GGUF_TYPE_INT32, -4}, "value -4 does not fit"},
        {{"llama.rope.dimension_count", LOOM_GGUF_TYPE_ARRAY, 8}, "has type arr"},
        {{"llama.rope.dimension_count", LOOM_GGUF_TYPE_FLOAT64, 8}, "has type f64"},
        {{"llama.rope.freq_base", LOOM_GGUF_TYPE_UINT32, 10000}, "has type u32"},
        {{"llama.rope.scale_linear", LOOM_GGUF_TYPE_STRING, 0}, "has type str"},
        {{"llama.attention.layer_norm_rms_epsilon", LOOM_GGUF_TYPE_INT64, 0}, "has type i64"},
        {{"llama.embedding_length", LOOM_GGUF_TYPE_FLOAT32, 64}, "has type f32"},
        {{"general.architecture", LOOM_GGUF_TYPE_UINT32, 1}, "has type u32"},
        {{"tokenizer.ggml.bos_token_id", LOOM_GGUF_TYPE_STRING, 0}, "has type str"},
        {{"tokenizer.ggml.eos_token_id", LOOM_GGUF_TYPE_FLOAT32, 2}, "has type f32"},
        {{"tokenizer.ggml.unknown_token_id", LOOM_GGUF_TYPE_INT64, -5}, "= -5 is not a token id: the vocabulary's are [0, 5) (-1: none)"},
        /* ids of the five-token vocabulary are 0..4: each id key names itself, its value and the range */
        {{"tokenizer.ggml.bos_token_id", LOOM_GGUF_TYPE_UINT32, 5}, "= 5 is not a token id: the vocabulary's are [0, 5) (-1: none)"},
        {{"tokenizer.ggml.eos_token_id", LOOM_GGUF_TYPE_INT32, 9}, "= 9 is not a token id: the vocabulary's are [0, 5) (-1: none)"},
        {{"tokenizer.ggml.unknown_token_id", LOOM_GGUF_TYPE_UINT16, 5}, "= 5 is not a token id: the vocabulary's are [0, 5) (-1: none)"},
        {{"tokenizer.ggml.eot_token_id", LOOM_GGUF_TYPE_UINT32, 5}, "= 5 is not a token id: the vocabulary's are [0, 5) (-1: none)"},
        {{"tokenizer.ggml.eom_token_id", LOOM_GGUF_TYPE_UINT32, 128008}, "= 128008 is not a token id: the vocabulary's are [0, 5) (-1: none)"},
        {{"tokenizer.ggml.eot_token_id", LOOM_GGUF_TYPE_INT64, -2}, "= -2 is not a token id: the vocabulary's are [0, 5) (-1: none)"},
        {{"tokenizer.ggml.add_bos_token", LOOM_GGUF_TYPE_UINT32, 1}, "has type u32"},
        {{"tokenizer.ggml.add_space_prefix", LOOM_GGUF_TYPE_STRING, 0}, "has type str"},
        {{"tokenizer.ggml.model", LOOM_GGUF_TYPE_UINT32, 1}, "has type u32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct key_case * k = &cases[i].k;
        const bool vocab = !strncmp(k->key, "tokenizer.", 10); /* read with the vocabulary */
        struct loom_hparams hp;
        struct loom_vocab * v = NULL;
        enum loom_status st = read_meta_with(k, &hp, vocab ? &v : NULL);
        char key_q[96];
        snprintf(key_q, sizeof key_q, "'%s'", k->key);
        const char * at = strstr(test_last_error, key_q);
        CHECK(st == LOOM_ERR_FORMAT && !v && at && strstr(at, cases[i].says), "%s of type %s: %s, '%s' (expected '%s')", k->key,
              loom_gguf_type_name(k->type), loom_status_str(st), test_last_error, cases[i].says);
        loom_vocab_free(v);
    }
}

/* The vocabulary's optional token ids (any integer type, -1 .. INT32_MAX; u32 0xFFFFFFFF is -1) and
 * flags (bool): read when present, the defaults (1, 2, 0, add BOS) when absent (refusals: check_refused). */
static void check_vocab_keys(void) {
    struct loom_hparams hp;
    struct loom_vocab * v = NULL;
    CHECK(read_meta_with(NULL, &hp, &v) == LOOM_OK && v, "vocabulary without optional keys: %s", test_last_error);
    if (v) CHECK(loom_vocab_bos(v) == 1 && loom_vocab_eos(v) == 2 && loom_vocab_unk(v) == 0 && loom_vocab_get_add_bos(v), "defaults");
    loom_vocab_free(v);
    static const struct {
        struct key_case k;
        int32_t want;  /* the id read back, or the flag (0/1) */
    } ok_cases[] = {
        {{"tokenizer.ggml.bos_token_id", LOOM_GGUF_TYPE_UINT8, 3}, 3},
        {{"tokenizer.ggml.eos_token_id", LOOM_GGUF_TYPE_INT64, 4}, 4},
        {{"tokenizer.ggml.eos_token_id", LOOM_GGUF_TYPE_UINT32, 4294967295.0}, -1},
        {{"tokenizer.ggml.unknown_token_id", LOOM_GGUF_TYPE_UINT16, 3}, 3},
        {{"tokenizer.ggml.eot_token_id", LOOM_GGUF_TYPE_UINT32, 4}, 4},
        {{"tokenizer.ggml.eom_token_id", LOOM_GGUF_TYPE_INT32, 4}, 4},
        {{"tokenizer.ggml.add_bos_token", LOOM_GGUF_TYPE_BOOL, 0}, 0},
    };
    for (size_t i = 0; i < sizeof ok_cases / sizeof ok_cases[0]; i++) {
        const struct key_case * k = &ok_cases[i].k;
        v = NULL;
        const enum loom_status st = read_meta_with(k, &hp, &v);
        CHECK(st == LOOM_OK && v, "%s of type %s: %s", k->key, loom_gguf_type_name(k->type), test_last_error);
        if (!v) continue;
        const int32_t got = strstr(k->key, "add_bos")     ? (int32_t)loom_vocab_get_add_bos(v)
                            : strstr(k->key, "bos_token") ? loom_vocab_bos(v)
                            : strstr(k->key, "eos_token") ? loom_vocab_eos(v)
                            : strstr(k->key, "eot_token") ? loom_vocab_eot(v)
                            : strstr(k->key, "eom_token") ? (loom_vocab_is_eog(v, 4) ? 4 : -1) /* no getter */
                                                          : loom_vocab_unk(v);
        CHECK(got == ok_cases[i].want, "%s of type %s: read %d, want %d", k->key, loom_gguf_type_name(k->type), got, ok_cases[i].want);
        loom_vocab_free(v);
    }
}

int main(void) {
    loom_log_set(test_capture_log, NULL);
    check_defaults();
    check_accepted();
    check_refused();
    check_vocab_keys();
    return test_finish("test-model-meta");
}
