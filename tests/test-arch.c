/* test-arch.c -- the llama and qwen2 architectures and RoPE scaling against a double-precision
 * forward pass written here from the models' definitions: small random-weight F32 models from
 * loom_gen_model (GQA, tied and untied output, qwen2's q/k/v biases and NeoX pairing, linear and
 * YaRN scaling, Llama 3.1's frequency factors), decoded in two batches (so the second reads the KV
 * cache), every position's logits compared, also with layers on a simulated discrete device. A reference with the other RoPE pairing or without the
 * scaling must differ by far more than the bound, so the comparison sees what it tests. Also:
 * refusals by name, and gen-model's --vocab-from. */
#include "test-util.h"

#include "loom-gguf.h"
#include "loom-llama.h"
#include "loom-convert.h"
#include "loom-sim.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#define FILE_OUT "test-arch-model.gguf"
#define N_TOK 9
#define N_FIRST 5 /* tokens of the first batch; the rest come in a second one */

/* The file's weights, by name (F32, read from the file's bytes). */
struct file {
    struct loom_gguf * g;
    uint8_t * bytes;
};

static const float * W(const struct file * f, const char * fmt, int il) {
    char name[96];
    snprintf(name, sizeof name, fmt, il);
    int64_t i = loom_gguf_find_tensor(f->g, name);
    if (i < 0) return NULL;
    return (const float *)(f->bytes + loom_gguf_data_offset(f->g) + loom_gguf_tensor_offset(f->g, i));
}

/* y[n_out] = W x, W stored as GGUF [n_in, n_out] (row o at o * n_in). */
static void matvec(const float * w, const double * x, int n_in, int n_out, double * y) {
    for (int o = 0; o < n_out; o++) {
        double s = 0;
        for (int i = 0; i < n_in; i++) s += (double)w[(size_t)o * n_in + i] * x[i];
        y[o] = s;
    }
}

static void rms_norm(const double * x, const float * w, int n, double eps, double * y) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

/* What the reference assumes about the rotation (the model's, or a deliberately wrong one). */
struct rope_ref {
    bool neox;
    double base, scale;     /* scale: frequency scale, 1/factor */
    bool yarn;
    int n_ctx_orig;
    const float * factors;  /* [n_rot/2] or NULL */
};

/* Angle frequency and magnitude of pair i of n_rot, from YaRN's definitions (Peng et al. 2023):
 * pairs turning more than 32 times over the original context keep their frequency, those under
 * once are interpolated by 'scale', a linear ramp over whole pairs between; temperature
 * 1 + 0.1 ln(1/scale) on cos and sin. Linear scaling is the interpolation everywhere. */
static void rope_freq(const struct rope_ref * r, int i, int n_rot, double * freq, double * mag) {
    double theta = pow(r->base, -2.0 * i / n_rot);
    if (r->factors) theta /= r->factors[i];
    *freq = r->scale * theta;
    *mag = 1.0;
    if (!r->yarn) return;
    const double L = r->n_ctx_orig;
    const double d_fast = n_rot / 2.0 * log(L / (2 * M_PI * 32.0)) / log(r->base);
    const double d_slow = n_rot / 2.0 * log(L / (2 * M_PI * 1.0)) / log(r->base);
    const double lo = d_fast > 0 ? floor(d_fast) : 0, hi = ceil(d_slow) < n_rot - 1 ? ceil(d_slow) : n_rot - 1;
    const double keep = i <= lo ? 1 : i >= hi ? 0 : 1 - (i - lo) / (hi - lo);
    *freq = theta * ((1 - keep) * r->scale + keep);
    *mag = 1 + 0.1 * log(1 / r->scale);
}

static void rope(const struct rope_ref * r, double * x, int n_heads, int hd, int n_rot, int pos) {
    for (int h = 0; h < n_heads; h++) {
        double * v = x + h * hd;
        for (int i = 0; i < n_rot / 2; i++) {
            double freq, mag;
            rope_freq(r, i, n_rot, &freq, &mag);
            const double c = cos(pos * freq) * mag, s = sin(pos * freq) * mag;
            const int e0 = r->neox ? i : 2 * i, e1 = r->neox ? i + n_rot / 2 : 2 * i + 1;
            const double a = v[e0], b = v[e1];
            v[e0] = a * c - b * s;
            v[e1] = a * s + b * c;
        }
    }
}

/* Logits [N_TOK][n_vocab] of the whole sequence, causal attention, double precision. */
static void reference(const struct file * f, const struct loom_hparams * hp, const struct rope_ref * rr, const int32_t * toks,
                      double * logits) {
    const int d = hp->n_embd, hd = d / hp->n_head, dkv = hd * hp->n_head_kv, ff = hp->n_ff, nv = hp->n_vocab;
    double * x = calloc((size_t)N_TOK * d, sizeof *x);
    double * k = calloc((size_t)N_TOK * dkv, sizeof *k), * v = calloc((size_t)N_TOK * dkv, sizeof *v);
    double * cur = malloc((size_t)d * sizeof *cur), * q = malloc((size_t)d * sizeof *q), * att = malloc((size_t)d * sizeof *att);
    double * tmp = malloc((size_t)(ff > d ? ff : d) * sizeof *tmp), * g = malloc((size_t)ff * sizeof *g), * u = malloc((size_t)ff * sizeof *u);
    double * sc = malloc(N_TOK * sizeof *sc);
    const float * emb = W(f, "token_embd.weight", 0);
    for (int t = 0; t < N_TOK; t++) {
        for (int i = 0; i < d; i++) x[t * d + i] = emb[(size_t)toks[t] * d + i];
    }
    for (int il = 0; il < hp->n_layer; il++) {
        double * xo = malloc((size_t)N_TOK * d * sizeof *xo);
        for (int t = 0; t < N_TOK; t++) { /* q, k, v of every position first: causal, so order does not matter */
            rms_norm(x + t * d, W(f, "blk.%d.attn_norm.weight", il), d, hp->rms_eps, cur);
            matvec(W(f, "blk.%d.attn_k.weight", il), cur, d, dkv, k + t * dkv);
            matvec(W(f, "blk.%d.attn_v.weight", il), cur, d, dkv, v + t * dkv);
            const float * bk = W(f, "blk.%d.attn_k.bias", il), * bv = W(f, "blk.%d.attn_v.bias", il);
            for (int i = 0; i < dkv; i++) k[t * dkv + i] += bk ? bk[i] : 0, v[t * dkv + i] += bv ? bv[i] : 0;
            rope(rr, k + t * dkv, hp->n_head_kv, hd, hp->n_rot, t);
        }
        for (int t = 0; t < N_TOK; t++) {
            rms_norm(x + t * d, W(f, "blk.%d.attn_norm.weight", il), d, hp->rms_eps, cur);
            matvec(W(f, "blk.%d.attn_q.weight", il), cur, d, d, q);
            const float * bq = W(f, "blk.%d.attn_q.bias", il);
            for (int i = 0; i < d && bq; i++) q[i] += bq[i];
            rope(rr, q, hp->n_head, hd, hp->n_rot, t);
            for (int h = 0; h < hp->n_head; h++) {
                const int hk = h / (hp->n_head / hp->n_head_kv);
                double mx = -INFINITY, sum = 0;
                for (int s = 0; s <= t; s++) {
                    double dot = 0;
                    for (int i = 0; i < hd; i++) dot += q[h * hd + i] * k[s * dkv + hk * hd + i];
                    sc[s] = dot / sqrt((double)hd);
                    mx = sc[s] > mx ? sc[s] : mx;
                }
                for (int s = 0; s <= t; s++) sum += sc[s] = exp(sc[s] - mx);
                for (int i = 0; i < hd; i++) {
                    double a = 0;
                    for (int s = 0; s <= t; s++) a += sc[s] / sum * v[s * dkv + hk * hd + i];
                    att[h * hd + i] = a;
                }
            }
            matvec(W(f, "blk.%d.attn_output.weight", il), att, d, d, tmp);
            for (int i = 0; i < d; i++) xo[t * d + i] = x[t * d + i] + tmp[i];
            rms_norm(xo + t * d, W(f, "blk.%d.ffn_norm.weight", il), d, hp->rms_eps, cur);
            matvec(W(f, "blk.%d.ffn_gate.weight", il), cur, d, ff, g);
            matvec(W(f, "blk.%d.ffn_up.weight", il), cur, d, ff, u);
            for (int i = 0; i < ff; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(W(f, "blk.%d.ffn_down.weight", il), g, ff, d, tmp);
            for (int i = 0; i < d; i++) xo[t * d + i] += tmp[i];
        }
        memcpy(x, xo, (size_t)N_TOK * d * sizeof *x);
        free(xo);
    }
    const float * out = W(f, "output.weight", 0);
    if (!out) out = emb;
    for (int t = 0; t < N_TOK; t++) {
        rms_norm(x + t * d, W(f, "output_norm.weight", 0), d, hp->rms_eps, cur);
        matvec(out, cur, d, nv, logits + (size_t)t * nv);
    }
    free(x), free(k), free(v), free(cur), free(q), free(att), free(tmp), free(g), free(u), free(sc);
}

/* Loom's logits of every position: two decode calls, logits_all; with 'device' the last 'ngl' layers
 * run there. */
static bool loom_logits(const char * path, const int32_t * toks, double * logits, struct loom_hparams * hp, const char * device, int ngl) {
    struct loom_model * m = NULL;
    struct loom_model_params mp = loom_model_default_params();
    mp.device = device;
    mp.n_gpu_layers = ngl;
    if (loom_model_load(path, mp, &m) != LOOM_OK) return false;
    *hp = *loom_model_hparams(m);
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.logits_all = true;
    cp.type_k = cp.type_v = LOOM_TYPE_F32; /* the bound below is for F32 caches (F16 ones round K and V) */
    struct loom_llama_context * lctx = NULL;
    bool ok = loom_llama_context_new(m, cp, &lctx) == LOOM_OK;
    for (int b = 0; b < 2 && ok; b++) {
        const int from = b ? N_FIRST : 0, n = b ? N_TOK - N_FIRST : N_FIRST;
        ok = loom_llama_decode(lctx, toks + from, n) == LOOM_OK;
        for (int i = 0; i < n && ok; i++) {
            const float * l = loom_llama_get_logits_ith(lctx, i);
            for (int j = 0; j < hp->n_vocab; j++) logits[(size_t)(from + i) * hp->n_vocab + j] = l[j];
        }
    }
    loom_llama_context_free(lctx);
    loom_model_free(m);
    return ok;
}

/* As loom_logits on the CPU, but with three other tokens decoded after the first batch and dropped
 * again by loom_llama_kv_truncate: the second batch must see only the first one. */
static bool loom_logits_truncated(const char * path, const int32_t * toks, double * logits, int32_t * n_past_after) {
    struct loom_model * m = NULL;
    if (loom_model_load(path, loom_model_default_params(), &m) != LOOM_OK) return false;
    const int n_vocab = loom_model_hparams(m)->n_vocab;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.logits_all = true;
    cp.type_k = cp.type_v = LOOM_TYPE_F32; /* compared with loom_logits, which uses F32 caches */
    struct loom_llama_context * lctx = NULL;
    static const int32_t junk[3] = {7, 250, 31};
    bool ok = loom_llama_context_new(m, cp, &lctx) == LOOM_OK && loom_llama_decode(lctx, toks, N_FIRST) == LOOM_OK &&
              loom_llama_decode(lctx, junk, 3) == LOOM_OK;
    if (ok) {
        loom_llama_kv_truncate(lctx, N_FIRST);
        *n_past_after = loom_llama_n_past(lctx);
        ok = loom_llama_decode(lctx, toks + N_FIRST, N_TOK - N_FIRST) == LOOM_OK;
    }
    for (int i = 0; i < N_TOK - N_FIRST && ok; i++) {
        const float * l = loom_llama_get_logits_ith(lctx, i);
        for (int j = 0; j < n_vocab; j++) logits[(size_t)(N_FIRST + i) * n_vocab + j] = l[j];
    }
    loom_llama_context_free(lctx);
    loom_model_free(m);
    return ok;
}

/* Normalized error: max |a - b| over max |b|. */
static double rel_err(const double * a, const double * b, size_t n) {
    double e = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        e = fabs(a[i] - b[i]) > e ? fabs(a[i] - b[i]) : e;
        mx = fabs(b[i]) > mx ? fabs(b[i]) : mx;
    }
    return mx > 0 ? e / mx : e;
}

struct arch_case {
    const char * what;
    enum loom_arch arch;
    int n_head_kv;
    bool tied;
    float base;
    enum loom_rope_scaling scaling;
    float factor;
    int n_ctx_orig;
    bool rope_freqs;
    bool wrong_differs;  /* the case changes the rotation enough to tell the wrong reference apart */
};

static void run_case(const struct arch_case * c) {
    struct loom_gen_params p = {.n_embd = 64, .n_ff = 96, .n_layer = 2, .n_head = 4, .n_head_kv = c->n_head_kv, .n_vocab = 300,
                                .n_ctx = 256, .type = LOOM_TYPE_F32, .tied = c->tied, .seed = 7, .arch = c->arch,
                                .rope_freq_base = c->base, .rope_scaling = c->scaling, .rope_scale = c->factor,
                                .n_ctx_orig = c->n_ctx_orig, .rope_freqs = c->rope_freqs};
    if (loom_gen_model(&p, FILE_OUT) != LOOM_OK) {
        CHECK(false, "%s: gen-model: %s", c->what, test_last_error);
        return;
    }
    static const int32_t toks[N_TOK] = {1, 72, 104, 260, 33, 290, 5, 258, 120};
    struct loom_hparams hp;
    double * got = malloc((size_t)N_TOK * p.n_vocab * sizeof *got), * want = malloc((size_t)N_TOK * p.n_vocab * sizeof *want);
    bool ok = loom_logits(FILE_OUT, toks, got, &hp, NULL, 0);
    CHECK(ok, "%s: loading or decoding: %s", c->what, test_last_error);
    if (ok) { /* a truncated cache: the dropped tokens leave no trace */
        double * tr = calloc((size_t)N_TOK * p.n_vocab, sizeof *tr);
        int32_t n_past = -1;
        const bool ok_tr = tr && loom_logits_truncated(FILE_OUT, toks, tr, &n_past);
        CHECK(ok_tr && n_past == N_FIRST, "%s: truncated cache: %s (n_past %d)", c->what, test_last_error, n_past);
        if (ok_tr) {
            const size_t off = (size_t)N_FIRST * p.n_vocab, cnt = (size_t)(N_TOK - N_FIRST) * p.n_vocab;
            const double e = rel_err(tr + off, got + off, cnt);
            CHECK(e < 1e-6, "%s: logits after loom_llama_kv_truncate differ by %.3g", c->what, e);
        }
        free(tr);
    }
    /* the same on a simulated discrete device, one layer or all (weights, factors and cache copied there) */
    for (int ngl = 1; ngl <= 3 && ok; ngl += 2) {
        double * dev = malloc((size_t)N_TOK * p.n_vocab * sizeof *dev);
        const bool ok_dev = loom_logits(FILE_OUT, toks, dev, &hp, "sim0", ngl);
        CHECK(ok_dev, "%s on sim0: %s", c->what, test_last_error);
        if (ok_dev) {
            const double e = rel_err(dev, got, (size_t)N_TOK * p.n_vocab);
            CHECK(e < 1e-6, "%s: sim0 with -ngl %d differs from the CPU by %.3g", c->what, ngl, e);
        }
        free(dev);
    }
    struct file f = {0};
    size_t size = 0;
    if (ok && (f.bytes = test_read_file(FILE_OUT, &size)) != NULL && size > 0 && loom_gguf_open(FILE_OUT, &f.g, NULL, 0) == LOOM_OK) {
        CHECK(hp.arch == c->arch && hp.rope_scaling == (c->scaling == LOOM_ROPE_SCALING_NONE ? LOOM_ROPE_SCALING_LINEAR : c->scaling),
              "%s: arch %d scaling %d read back", c->what, hp.arch, hp.rope_scaling);
        struct rope_ref rr = {.neox = c->arch == LOOM_ARCH_QWEN2, .base = c->base > 0 ? c->base : 10000.0,
                              .scale = c->scaling != LOOM_ROPE_SCALING_NONE ? 1.0 / c->factor : 1.0,
                              .yarn = c->scaling == LOOM_ROPE_SCALING_YARN, .n_ctx_orig = c->n_ctx_orig ? c->n_ctx_orig : p.n_ctx,
                              .factors = W(&f, "rope_freqs.weight", 0)};
        CHECK(!c->rope_freqs == !rr.factors, "%s: rope_freqs.weight in the file", c->what);
        reference(&f, &hp, &rr, toks, want);
        const double err = rel_err(got, want, (size_t)N_TOK * p.n_vocab);
        CHECK(err < 1e-5, "%s: logits differ from the double-precision reference by %.3g (relative to the largest)", c->what, err);
        /* the wrong pairing (and for scaled cases: no scaling, no factors) must be far off */
        struct rope_ref wrong = rr;
        wrong.neox = !rr.neox;
        if (c->wrong_differs) wrong.yarn = false, wrong.scale = 1.0, wrong.factors = NULL;
        reference(&f, &hp, &wrong, toks, want);
        const double err_wrong = rel_err(got, want, (size_t)N_TOK * p.n_vocab);
        CHECK(err_wrong > 1e-3, "%s: a reference with the wrong rotation is only %.3g away", c->what, err_wrong);
        if (c->wrong_differs) { /* the pairing right, the scaling left out */
            wrong.neox = rr.neox;
            reference(&f, &hp, &wrong, toks, want);
            const double e2 = rel_err(got, want, (size_t)N_TOK * p.n_vocab);
            if (getenv("LOOM_DEBUG")) fprintf(stderr, "%s: %.3g, wrong pairing %.3g, no scaling %.3g\n", c->what, err, err_wrong, e2);
            CHECK(e2 > 1e-4, "%s: a reference without the scaling is only %.3g away", c->what, e2);
        }
    }
    loom_gguf_free(f.g);
    free(f.bytes);
    free(got);
    free(want);
    unlink(FILE_OUT);
}

/* Writes a one-layer model's metadata for 'arch' (64 wide, 4 heads, nine placeholder tensors) plus
 * up to three extra keys (string when 'str' is set, else f32 'f'), and reads its hyper-parameters. */
struct extra_key {
    const char * key, * str;
    float f;
};

static enum loom_status read_with_keys(const char * arch, const struct extra_key * keys, int n_keys, struct loom_hparams * hp) {
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    char key[64];
    enum loom_status st = loom_gguf_writer_set_str(w, "general.architecture", arch);
    static const char * const req[] = {"embedding_length", "block_count", "attention.head_count", "feed_forward_length"};
    for (int k = 0; k < 4 && st == LOOM_OK; k++) {
        snprintf(key, sizeof key, "%s.%s", arch, req[k]);
        st = loom_gguf_writer_set_u32(w, key, k == 1 ? 1 : k == 2 ? 4 : 64);
    }
    for (int k = 0; k < n_keys && st == LOOM_OK; k++) {
        st = keys[k].str ? loom_gguf_writer_set_str(w, keys[k].key, keys[k].str) : loom_gguf_writer_set_f32(w, keys[k].key, keys[k].f);
    }
    static const float zero = 0;
    for (int t = 0; t < 9 && st == LOOM_OK; t++) {
        snprintf(key, sizeof key, "t%d", t);
        st = loom_gguf_writer_add_tensor(w, key, LOOM_TYPE_F32, 1, (const int64_t[]){1}, &zero);
    }
    char err[256];
    if (st == LOOM_OK) st = loom_gguf_writer_write_file(w, FILE_OUT, err, sizeof err);
    loom_gguf_writer_free(w);
    CHECK(st == LOOM_OK, "writing the metadata file");
    test_last_error[0] = 0;
    st = loom_model_read_meta(FILE_OUT, hp, NULL);
    unlink(FILE_OUT);
    return st;
}

/* The scaling keys as the field reads them; a scaling type Loom does not implement, and an unknown
 * architecture, refused by name. */
static void check_rope_keys(void) {
    struct loom_hparams hp;
    const struct extra_key none[] = {{"llama.rope.scaling.type", "none", 0}, {"llama.rope.scaling.factor", NULL, 4}};
    CHECK(read_with_keys("llama", none, 2, &hp) == LOOM_OK && hp.rope_scaling == LOOM_ROPE_SCALING_NONE && hp.rope_freq_scale == 1.0f,
          "type none ignores the factor: %s", test_last_error);
    const struct extra_key old[] = {{"qwen2.rope.scale_linear", NULL, 8}};
    CHECK(read_with_keys("qwen2", old, 1, &hp) == LOOM_OK && hp.rope_scaling == LOOM_ROPE_SCALING_LINEAR && hp.rope_freq_scale == 0.125f &&
              hp.rope_mode == LOOM_ROPE_NEOX && hp.yarn_ext_factor == 0.0f,
          "qwen2 with the older linear key: %s", test_last_error);
    const struct extra_key both[] = {{"llama.rope.scale_linear", NULL, 8}, {"llama.rope.scaling.factor", NULL, 2}};
    CHECK(read_with_keys("llama", both, 2, &hp) == LOOM_OK && hp.rope_freq_scale == 0.5f, "rope.scaling.factor wins: %g", (double)hp.rope_freq_scale);
    const struct extra_key yarn[] = {{"llama.rope.scaling.type", "yarn", 0}, {"llama.rope.scaling.factor", NULL, 4},
                                     {"llama.rope.scaling.attn_factor", NULL, 1.25f}};
    CHECK(read_with_keys("llama", yarn, 3, &hp) == LOOM_OK && hp.rope_scaling == LOOM_ROPE_SCALING_YARN && hp.yarn_ext_factor == 1.0f &&
              hp.yarn_attn_factor == 1.25f && hp.n_ctx_orig == hp.n_ctx_train && hp.yarn_beta_fast == 32.0f && hp.yarn_beta_slow == 1.0f,
          "yarn: %s", test_last_error);
    static const struct {
        const char * arch;
        struct extra_key k;
        enum loom_status st;
        const char * says;
    } refused[] = {
        {"llama", {"llama.rope.scaling.type", "longrope", 0}, LOOM_ERR_UNSUPPORTED,
         "'longrope': Loom implements RoPE scaling 'none', 'linear' and 'yarn' only"},
        {"llama", {"llama.rope.scaling.type", NULL, 1}, LOOM_ERR_FORMAT, "has type f32, expected str"},
        {"llama", {"llama.rope.scaling.factor", NULL, -2}, LOOM_ERR_FORMAT, "'llama.rope.scaling.factor' = -2 is out of range"},
        {"llama", {"llama.rope.scaling.attn_factor", NULL, 0}, LOOM_ERR_FORMAT, "attn_factor' = 0 is out of range"},
        {"gpt2", {"gpt2.context_length", NULL, 1}, LOOM_ERR_UNSUPPORTED, "architecture 'gpt2' is not supported (Loom runs 'llama', 'qwen2')"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const enum loom_status st = read_with_keys(refused[i].arch, &refused[i].k, 1, &hp);
        CHECK(st == refused[i].st && strstr(test_last_error, refused[i].says), "%s: %s, '%s'", refused[i].k.key, loom_status_str(st),
              test_last_error);
    }
}

/* --vocab-from: a model whose tokenizer.* keys are another file's gets the same vocabulary (and, with
 * n_vocab 0, its size). */
static void check_vocab_from(void) {
    struct loom_gen_params p = {.n_embd = 64, .n_ff = 96, .n_layer = 1, .n_head = 4, .n_head_kv = 4, .n_vocab = 512, .n_ctx = 64,
                                .type = LOOM_TYPE_F32, .seed = 1, .tokenizer_path = test_model_path("tok512.bin")};
    CHECK(loom_gen_model(&p, "test-arch-src.gguf") == LOOM_OK, "source model: %s", test_last_error);
    p.tokenizer_path = NULL;
    p.vocab_path = "test-arch-src.gguf";
    p.n_vocab = 0; /* the source's size */
    p.arch = LOOM_ARCH_QWEN2;
    CHECK(loom_gen_model(&p, FILE_OUT) == LOOM_OK, "--vocab-from: %s", test_last_error);
    struct loom_vocab * a = NULL, * b = NULL;
    struct loom_hparams hp;
    CHECK(loom_vocab_load_gguf("test-arch-src.gguf", &a) == LOOM_OK && loom_model_read_meta(FILE_OUT, &hp, &b) == LOOM_OK,
          "reading the vocabularies: %s", test_last_error);
    if (a && b) {
        bool same = loom_vocab_n_tokens(a) == 512 && loom_vocab_n_tokens(b) == 512 && hp.n_vocab == 512 && loom_vocab_bos(a) == loom_vocab_bos(b) &&
                    loom_vocab_eos(a) == loom_vocab_eos(b);
        for (int32_t i = 0; same && i < 512; i++) {
            size_t la, lb;
            const char * ta = loom_vocab_get_text(a, i, &la), * tb = loom_vocab_get_text(b, i, &lb);
            same = la == lb && !memcmp(ta, tb, la) && loom_vocab_get_score(a, i) == loom_vocab_get_score(b, i) &&
                   loom_vocab_get_type(a, i) == loom_vocab_get_type(b, i);
        }
        CHECK(same, "the copied vocabulary differs from its source");
    }
    loom_vocab_free(a);
    loom_vocab_free(b);
    unlink("test-arch-src.gguf");
    unlink(FILE_OUT);
}

int main(void) {
    setenv("LOOM_SIM_DEVICES", "1", 1);
    (void)loom_sim_register_env_devices(); /* sim0, as the command line registers it */
    loom_log_set(test_capture_log, NULL);
    static const struct arch_case cases[] = {
        {"llama GQA untied", LOOM_ARCH_LLAMA, 2, false, 0, LOOM_ROPE_SCALING_NONE, 0, 0, false, false},
        {"llama MHA tied", LOOM_ARCH_LLAMA, 4, true, 0, LOOM_ROPE_SCALING_NONE, 0, 0, false, false},
        {"qwen2 GQA tied", LOOM_ARCH_QWEN2, 2, true, 1000000.0f, LOOM_ROPE_SCALING_NONE, 0, 0, false, false},
        {"qwen2 MQA untied", LOOM_ARCH_QWEN2, 1, false, 10000.0f, LOOM_ROPE_SCALING_NONE, 0, 0, false, false},
        {"llama linear x4", LOOM_ARCH_LLAMA, 2, false, 0, LOOM_ROPE_SCALING_LINEAR, 4.0f, 0, false, true},
        {"llama yarn x4", LOOM_ARCH_LLAMA, 2, false, 10000.0f, LOOM_ROPE_SCALING_YARN, 4.0f, 64, false, true},
        {"qwen2 yarn x8", LOOM_ARCH_QWEN2, 2, true, 1000000.0f, LOOM_ROPE_SCALING_YARN, 8.0f, 32, false, true},
        {"llama 3.1 rope_freqs", LOOM_ARCH_LLAMA, 2, false, 500000.0f, LOOM_ROPE_SCALING_NONE, 0, 32, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    check_rope_keys();
    check_vocab_from();
    return test_finish("test-arch");
}
