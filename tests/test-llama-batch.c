/* test-llama-batch.c -- several sequences in one KV cache (stories260K): three prompts decoded
 * together in one batch per step give each the logits (within F32 rounding) and the greedy text it
 * gets decoded alone, with the attention fused and not; a sequence removed by loom_llama_kv_seq_rm
 * and decoded again gives its first logits back while the others go on undisturbed; a full cache
 * is a clear error that changes nothing; bad batches are refused. */
#include "loom-llama.h"
#include "test-util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N_SEQ = 3, N_GEN = 24, N_CTX = 256 };

static const int32_t PROMPT_0[] = {1, 403, 261, 365};
static const int32_t PROMPT_1[] = {1, 70, 300};
static const int32_t PROMPT_2[] = {1, 200, 31, 455, 97, 260, 9};
static const int32_t * const PROMPTS[N_SEQ] = {PROMPT_0, PROMPT_1, PROMPT_2};
static const int32_t N_PROMPT[N_SEQ] = {4, 3, 7};

static int32_t n_vocab;

static int32_t argmax(const float * l) {
    int32_t best = 0;
    for (int32_t v = 1; v < n_vocab; v++) best = l[v] > l[best] ? v : best;
    return best;
}

/* max |a - b| over max |b| */
static double rel_err(const float * a, const float * b, size_t n) {
    double e = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return mx > 0 ? e / mx : e;
}

static struct loom_llama_context * new_ctx(struct loom_model * m, enum loom_llama_flash_attn fa, int32_t n_ctx) {
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    cp.n_batch = 8; /* smaller than the first batch: the call runs in several steps */
    cp.flash_attn = fa;
    cp.type_k = cp.type_v = LOOM_TYPE_F32;
    struct loom_llama_context * lctx = NULL;
    CHECK(loom_llama_context_new(m, cp, &lctx) == LOOM_OK, "context: %s", test_last_error);
    return lctx;
}

/* Sequence s decoded alone through the single-sequence API: logits [N_GEN][n_vocab] of each step,
 * greedy tokens [N_GEN]. */
static bool alone(struct loom_model * m, enum loom_llama_flash_attn fa, int s, float * logits, int32_t * toks) {
    struct loom_llama_context * lctx = new_ctx(m, fa, N_CTX);
    bool ok = lctx && loom_llama_decode(lctx, PROMPTS[s], N_PROMPT[s]) == LOOM_OK;
    for (int i = 0; i < N_GEN && ok; i++) {
        const float * l = loom_llama_get_logits(lctx);
        memcpy(logits + (size_t)i * n_vocab, l, (size_t)n_vocab * sizeof *l);
        toks[i] = argmax(l);
        ok = loom_llama_decode(lctx, &toks[i], 1) == LOOM_OK;
    }
    CHECK(ok, "seq %d alone: %s", s, test_last_error);
    loom_llama_context_free(lctx);
    return ok;
}

/* All prompts in one batch, then one token per sequence per step. */
static void together(struct loom_model * m, enum loom_llama_flash_attn fa, const float * const * ref_logits, int32_t * const * ref_toks) {
    struct loom_llama_context * lctx = new_ctx(m, fa, N_CTX);
    if (!lctx) return;
    int32_t tok[32], pos[32], seq[32];
    int8_t want[32];
    int32_t n = 0, last[N_SEQ];
    /* the prompts interleaved token by token: each sequence's cells are scattered among the others' */
    for (int k = 0; k < 7; k++) {
        for (int s = 0; s < N_SEQ; s++) {
            if (k >= N_PROMPT[s]) continue;
            tok[n] = PROMPTS[s][k], pos[n] = k, seq[n] = s, want[n] = k == N_PROMPT[s] - 1;
            if (want[n]) last[s] = n;
            n++;
        }
    }
    struct loom_llama_batch b = {.n_tokens = n, .token = tok, .pos = pos, .seq_id = seq, .logits = want};
    bool ok = loom_llama_decode_batch(lctx, &b) == LOOM_OK;
    CHECK(ok, "fa %d: the prompts' batch: %s", (int)fa, test_last_error);
    CHECK(!ok || loom_llama_get_logits_ith(lctx, 0) == NULL, "fa %d: logits of a token that did not ask for them", (int)fa);
    CHECK(!ok || loom_llama_get_logits_ith(lctx, -1) == loom_llama_get_logits_ith(lctx, n - 1), "fa %d: index -1 is the last token", (int)fa);
    CHECK(!ok || loom_llama_get_logits_ith(lctx, n) == NULL, "fa %d: an index past the batch", (int)fa);
    CHECK(loom_llama_kv_used_cells(lctx) == n, "fa %d: %d cells used after %d tokens", (int)fa, loom_llama_kv_used_cells(lctx), n);
    double worst = 0;
    int bad_tok = 0;
    for (int i = 0; i < N_GEN && ok; i++) {
        for (int s = 0; s < N_SEQ; s++) {
            const float * l = loom_llama_get_logits_ith(lctx, last[s]);
            if (!l) {
                CHECK(false, "fa %d step %d: no logits for seq %d", (int)fa, i, s);
                ok = false;
                break;
            }
            worst = fmax(worst, rel_err(l, ref_logits[s] + (size_t)i * n_vocab, (size_t)n_vocab));
            tok[s] = argmax(l);
            bad_tok += tok[s] != ref_toks[s][i];
            pos[s] = N_PROMPT[s] + i, seq[s] = s, want[s] = 1, last[s] = s;
        }
        b.n_tokens = N_SEQ;
        ok = ok && loom_llama_decode_batch(lctx, &b) == LOOM_OK;
    }
    CHECK(ok, "fa %d: the generation batches: %s", (int)fa, test_last_error);
    CHECK(worst < 1e-5, "fa %d: batched logits differ from the lone ones by %.3g (relative)", (int)fa, worst);
    CHECK(bad_tok == 0, "fa %d: %d greedy tokens differ from the lone ones", (int)fa, bad_tok);
    for (int s = 0; s < N_SEQ; s++) {
        CHECK(loom_llama_kv_seq_pos_max(lctx, s) == N_PROMPT[s] + N_GEN - 1, "fa %d: seq %d ends at %d", (int)fa, s,
              loom_llama_kv_seq_pos_max(lctx, s));
    }

    /* seq 1 dropped whole and decoded again from its prompt, beside seq 0 going on: its first
     * logits come back, and seq 0's next ones are still the lone run's */
    if (ok) {
        const int32_t freed = loom_llama_kv_seq_rm(lctx, 1, -1, -1);
        CHECK(freed == N_PROMPT[1] + N_GEN, "fa %d: seq_rm freed %d cells", (int)fa, freed);
        CHECK(loom_llama_kv_seq_pos_max(lctx, 1) == -1, "fa %d: seq 1 still holds cells", (int)fa);
        float * l0 = malloc((size_t)n_vocab * sizeof *l0);
        /* seq 0 one step further alone in its own context would need N_GEN + 1 reference steps:
         * instead drop seq 0's last token and decode it again, which must give the same logits */
        const float * before = loom_llama_get_logits_ith(lctx, 0);
        if (l0 && before) memcpy(l0, before, (size_t)n_vocab * sizeof *l0);
        const int32_t p0 = N_PROMPT[0] + N_GEN - 1;
        CHECK(loom_llama_kv_seq_rm(lctx, 0, p0, -1) == 1, "fa %d: seq_rm of seq 0's last position", (int)fa);
        n = 0;
        tok[n] = tok[0], pos[n] = p0, seq[n] = 0, want[n] = 1, n++;
        for (int k = 0; k < N_PROMPT[1]; k++) tok[n] = PROMPT_1[k], pos[n] = k, seq[n] = 1, want[n] = k == N_PROMPT[1] - 1, n++;
        b.n_tokens = n;
        ok = loom_llama_decode_batch(lctx, &b) == LOOM_OK;
        CHECK(ok, "fa %d: decode after seq_rm: %s", (int)fa, test_last_error);
        const float * again0 = ok ? loom_llama_get_logits_ith(lctx, 0) : NULL;
        const float * again1 = ok ? loom_llama_get_logits_ith(lctx, n - 1) : NULL;
        CHECK(again0 && l0 && rel_err(again0, l0, (size_t)n_vocab) < 1e-5, "fa %d: seq 0 re-decoded after seq_rm differs", (int)fa);
        CHECK(again1 && rel_err(again1, ref_logits[1], (size_t)n_vocab) < 1e-5, "fa %d: seq 1 decoded again differs from its first run",
              (int)fa);
        free(l0);
    }
    loom_llama_context_free(lctx);
}

/* A cache of 40 cells: 36 taken by two sequences, a batch of 5 more is refused with the cache
 * unchanged; after seq_rm frees room it runs. */
static void cache_full(struct loom_model * m) {
    struct loom_llama_context * lctx = new_ctx(m, LOOM_LLAMA_FLASH_ATTN_OFF, 40);
    if (!lctx) return;
    int32_t tok[36], pos[36], seq[36];
    for (int i = 0; i < 36; i++) tok[i] = 1 + i, pos[i] = i / 2, seq[i] = i % 2;
    struct loom_llama_batch b = {.n_tokens = 36, .token = tok, .pos = pos, .seq_id = seq, .logits = NULL};
    CHECK(loom_llama_decode_batch(lctx, &b) == LOOM_OK, "filling the cache: %s", test_last_error);
    const float * l = loom_llama_get_logits_ith(lctx, 35);
    CHECK(l != NULL && loom_llama_get_logits_ith(lctx, 34) == NULL, "logits NULL: only the last token's by default");
    for (int i = 0; i < 5; i++) tok[i] = 7, pos[i] = 18 + i, seq[i] = 0;
    b.n_tokens = 5;
    test_last_error[0] = 0;
    CHECK(loom_llama_decode_batch(lctx, &b) == LOOM_ERR_TOO_LARGE, "a batch past the free cells is LOOM_ERR_TOO_LARGE");
    CHECK(strstr(test_last_error, "KV cache is full") != NULL, "message: '%s'", test_last_error);
    CHECK(loom_llama_kv_used_cells(lctx) == 36 && loom_llama_kv_seq_pos_max(lctx, 0) == 17, "the refused batch changed the cache");
    CHECK(loom_llama_kv_seq_rm(lctx, 1, 10, -1) == 8, "seq_rm of seq 1's positions 10..17");
    CHECK(loom_llama_decode_batch(lctx, &b) == LOOM_OK, "the batch after seq_rm: %s", test_last_error);
    CHECK(loom_llama_kv_used_cells(lctx) == 33, "%d cells used, 33 expected", loom_llama_kv_used_cells(lctx));
    /* the legacy call sees sequence 0 */
    CHECK(loom_llama_n_past(lctx) == 23, "n_past %d, 23 expected", loom_llama_n_past(lctx));
    /* bad batches */
    seq[0] = -1;
    CHECK(loom_llama_decode_batch(lctx, &b) == LOOM_ERR_INVALID_ARG, "a negative sequence id is refused");
    seq[0] = 0, pos[0] = -3;
    CHECK(loom_llama_decode_batch(lctx, &b) == LOOM_ERR_INVALID_ARG, "a negative position is refused");
    pos[0] = 23, tok[0] = n_vocab;
    CHECK(loom_llama_decode_batch(lctx, &b) == LOOM_ERR_INVALID_ARG, "a token outside the vocabulary is refused");
    b.n_tokens = 0;
    CHECK(loom_llama_decode_batch(lctx, &b) == LOOM_ERR_INVALID_ARG, "an empty batch is refused");
    CHECK(loom_llama_kv_used_cells(lctx) == 33, "refused batches changed the cache");
    loom_llama_kv_clear(lctx);
    CHECK(loom_llama_kv_used_cells(lctx) == 0 && loom_llama_n_past(lctx) == 0, "kv_clear empties every sequence");
    loom_llama_context_free(lctx);
}

int main(void) {
    const char * path = test_model_path("stories260K-llamacpp.gguf");
    FILE * f = fopen(path, "rb");
    if (!f) return test_skip("stories260K-llamacpp.gguf not found in $LOOM_MODELS");
    fclose(f);
    loom_log_set(test_capture_log, NULL);
    struct loom_model * m = NULL;
    CHECK(loom_model_load(path, loom_model_default_params(), &m) == LOOM_OK, "load: %s", test_last_error);
    if (!m) return test_finish("test-llama-batch");
    n_vocab = loom_model_hparams(m)->n_vocab;
    float * ref[N_SEQ];
    int32_t * toks[N_SEQ];
    const enum loom_llama_flash_attn modes[2] = {LOOM_LLAMA_FLASH_ATTN_OFF, LOOM_LLAMA_FLASH_ATTN_ON};
    for (int fa = 0; fa < 2; fa++) {
        bool ok = true;
        for (int s = 0; s < N_SEQ; s++) {
            ref[s] = malloc((size_t)N_GEN * n_vocab * sizeof *ref[s]);
            toks[s] = malloc(N_GEN * sizeof *toks[s]);
            ok = ok && ref[s] && toks[s] && alone(m, modes[fa], s, ref[s], toks[s]);
        }
        if (ok) together(m, modes[fa], (const float * const *)ref, toks);
        for (int s = 0; s < N_SEQ; s++) free(ref[s]), free(toks[s]);
    }
    cache_full(m);
    loom_model_free(m);
    return test_finish("test-llama-batch");
}
