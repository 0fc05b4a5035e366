/* gen-model.c -- synthetic llama and qwen2 models with random weights (any vocabulary), streamed into a GGUF file. */
#include "loom-gguf.h"
#include "loom-convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

enum loom_status loom_vocab_write_gguf(const struct loom_vocab * v, struct loom_gguf_writer * w);

struct preset {
    const char * name;
    int32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, n_ctx;
};

static const struct preset presets[] = {
    {"260k", 64, 172, 5, 8, 4, 512, 512},
    {"15m", 288, 768, 6, 6, 6, 32000, 256},
    {"110m", 768, 2048, 12, 12, 12, 32000, 1024},
    {"1b", 2048, 5632, 22, 32, 4, 32000, 2048},
    {"7b", 4096, 11008, 32, 32, 32, 32000, 4096},
};

enum loom_status loom_gen_preset(const char * name, struct loom_gen_params * p) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (!strcmp(presets[i].name, name)) {
            const struct preset * s = &presets[i];
            *p = (struct loom_gen_params){.n_embd = s->n_embd, .n_ff = s->n_ff, .n_layer = s->n_layer, .n_head = s->n_head,
                                          .n_head_kv = s->n_head_kv, .n_vocab = s->n_vocab, .n_ctx = s->n_ctx,
                                          .type = LOOM_TYPE_F32, .seed = 42, .name = s->name};
            return LOOM_OK;
        }
    }
    loom_log(LOOM_LOG_ERROR, "unknown preset '%s' (260k, 15m, 110m, 1b, 7b)", name);
    return LOOM_ERR_INVALID_ARG;
}

/* ---------------------------------------------------------------- random numbers */

static uint64_t splitmix64(uint64_t * s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fills 'out' with n values ~ mean + sigma * N(0,1): the sum of four 16-bit uniforms (Irwin-Hall),
 * centred and scaled to unit variance -- close to normal and much cheaper than Box-Muller. The
 * stream depends only on 'seed', so blocks can be generated in parallel. */
static void fill_normal(float * out, size_t n, uint64_t seed, float mean, float sigma) {
    uint64_t s = seed;
    const float k = sigma * 1.7320508f / 65536.0f; /* sqrt(12/4) per unit of 1/65536 */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = splitmix64(&s);
        float sum = (float)(r & 0xffff) + (float)((r >> 16) & 0xffff) + (float)((r >> 32) & 0xffff) + (float)(r >> 48);
        out[i] = mean + (sum - 2.0f * 65535.0f) * k;
    }
}

/* ---------------------------------------------------------------- tensors */

struct gen_tensor {
    char name[LOOM_MAX_NAME];
    int n_dims;
    int64_t ne[2];
    bool norm;     /* 1 + N(0, 0.01^2), F32 */
    bool bias;     /* N(0, 0.1^2), F32 */
    bool factors;  /* rope_freqs: Llama 3.1's factor curve, F32 */
};

static int list_tensors(const struct loom_gen_params * p, struct gen_tensor * t) {
    int n = 0;
    const int64_t kv = (int64_t)p->n_embd / p->n_head * p->n_head_kv;
#define T(nd, n0, n1, isnorm, ...) do { snprintf(t[n].name, LOOM_MAX_NAME, __VA_ARGS__); t[n].n_dims = nd; t[n].ne[0] = n0; t[n].ne[1] = n1; t[n].norm = isnorm; n++; } while (0)
#define BIAS(n0, ...) do { T(1, n0, 1, false, __VA_ARGS__); t[n - 1].bias = true; } while (0)
    T(2, p->n_embd, p->n_vocab, false, "token_embd.weight");
    if (p->rope_freqs) {
        T(1, p->n_embd / p->n_head / 2, 1, false, "rope_freqs.weight");
        t[n - 1].factors = true;
    }
    for (int l = 0; l < p->n_layer; l++) {
        T(1, p->n_embd, 1, true, "blk.%d.attn_norm.weight", l);
        T(2, p->n_embd, p->n_embd, false, "blk.%d.attn_q.weight", l);
        T(2, p->n_embd, kv, false, "blk.%d.attn_k.weight", l);
        T(2, p->n_embd, kv, false, "blk.%d.attn_v.weight", l);
        if (p->arch == LOOM_ARCH_QWEN2) {
            BIAS(p->n_embd, "blk.%d.attn_q.bias", l);
            BIAS(kv, "blk.%d.attn_k.bias", l);
            BIAS(kv, "blk.%d.attn_v.bias", l);
        }
        T(2, p->n_embd, p->n_embd, false, "blk.%d.attn_output.weight", l);
        T(1, p->n_embd, 1, true, "blk.%d.ffn_norm.weight", l);
        T(2, p->n_embd, p->n_ff, false, "blk.%d.ffn_gate.weight", l);
        T(2, p->n_ff, p->n_embd, false, "blk.%d.ffn_down.weight", l);
        T(2, p->n_embd, p->n_ff, false, "blk.%d.ffn_up.weight", l);
    }
    T(1, p->n_embd, 1, true, "output_norm.weight");
    if (!p->tied) T(2, p->n_embd, p->n_vocab, false, "output.weight");
#undef BIAS
#undef T
    return n;
}

/* Llama 3.1's frequency factors (its conversion to GGUF: scale factor 8, low/high frequency
 * factors 1 and 4 of the original context): pairs whose wavelength is under a quarter of the
 * original context keep factor 1, those over all of it get 8, and a smooth ramp joins them. */
static void llama31_factors(const struct loom_gen_params * p, float * out, int64_t n) {
    const double base = p->rope_freq_base > 0 ? p->rope_freq_base : 10000.0, factor = 8.0, lo_f = 1.0, hi_f = 4.0;
    const double old_ctx = p->n_ctx_orig > 0 ? p->n_ctx_orig : p->n_ctx;
    for (int64_t i = 0; i < n; i++) {
        const double wavelen = 2 * M_PI * pow(base, 2.0 * (double)i / (2.0 * (double)n));
        if (wavelen < old_ctx / hi_f) {
            out[i] = 1.0f;
        } else if (wavelen > old_ctx / lo_f) {
            out[i] = (float)factor;
        } else {
            const double smooth = (old_ctx / wavelen - lo_f) / (hi_f - lo_f);
            out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

static enum loom_status check_params(const struct loom_gen_params * p) {
    if (p->n_embd <= 0 || p->n_ff <= 0 || p->n_layer <= 0 || p->n_head <= 0 || p->n_head_kv <= 0 || p->n_vocab <= 0 ||
        p->n_ctx <= 0 || p->n_embd % p->n_head || p->n_head % p->n_head_kv || (p->n_embd / p->n_head) % 2) {
        loom_log(LOOM_LOG_ERROR, "invalid model shape: the head count must divide the embedding length (even head size) "
                                 "and the KV head count must divide the head count; all sizes positive");
        return LOOM_ERR_INVALID_ARG;
    }
    if (p->n_layer > 4096 || p->n_vocab > (1 << 24)) {
        loom_log(LOOM_LOG_ERROR, "invalid model shape: %d layers, %d tokens (at most 4096 layers and %d tokens)", p->n_layer, p->n_vocab,
                 1 << 24);
        return LOOM_ERR_INVALID_ARG;
    }
    if ((unsigned)p->arch >= LOOM_ARCH_COUNT || (p->rope_freqs && p->arch != LOOM_ARCH_LLAMA) ||
        (unsigned)p->rope_scaling >= LOOM_ROPE_SCALING_COUNT || !(p->rope_freq_base >= 0 && p->rope_freq_base < 1e12f) ||
        (p->rope_scaling != LOOM_ROPE_SCALING_NONE && !(p->rope_scale > 0 && p->rope_scale < 1e6f)) || p->n_ctx_orig < 0 ||
        (p->tokenizer_path && p->vocab_path)) {
        loom_log(LOOM_LOG_ERROR, "invalid model parameters: an unknown architecture or RoPE scaling, a scaling factor not in (0, 1e6), "
                                 "a frequency base not in [0, 1e12), rope_freqs with an architecture other than llama, or two "
                                 "vocabulary sources");
        return LOOM_ERR_INVALID_ARG;
    }
    if (p->type != LOOM_TYPE_F32 && p->type != LOOM_TYPE_F16 && p->type != LOOM_TYPE_BF16) {
        loom_log(LOOM_LOG_ERROR, "type %s not supported for generated models (f32, f16, bf16)", loom_type_name(p->type));
        return LOOM_ERR_INVALID_ARG;
    }
    return LOOM_OK;
}

/* A byte-level vocabulary: <unk>, <s>, </s>, the 256 byte tokens, the space marker U+2581 (when
 * there is room: without it a space would be spelled by the marker's three byte tokens and come back
 * as the marker, not as a space), then unused fillers. */
static enum loom_status byte_vocab(int32_t n_vocab, struct loom_vocab ** out) {
    if (n_vocab < 259) {
        loom_log(LOOM_LOG_ERROR, "a byte-level vocabulary needs at least 259 entries, the model has %d", n_vocab);
        return LOOM_ERR_INVALID_ARG;
    }
    char (*texts)[24] = malloc((size_t)n_vocab * sizeof *texts);
    const char ** ptrs = malloc((size_t)n_vocab * sizeof *ptrs);
    int32_t * types = malloc((size_t)n_vocab * sizeof *types);
    enum loom_status st = texts && ptrs && types ? LOOM_OK : LOOM_ERR_OOM;
    for (int32_t i = 0; st == LOOM_OK && i < n_vocab; i++) {
        if (i == 0) snprintf(texts[i], 24, "<unk>"), types[i] = 2;
        else if (i == 1) snprintf(texts[i], 24, "<s>"), types[i] = 3;
        else if (i == 2) snprintf(texts[i], 24, "</s>"), types[i] = 3;
        else if (i < 259) snprintf(texts[i], 24, "<0x%02X>", i - 3), types[i] = 6;
        else if (i == 259) snprintf(texts[i], 24, "\xE2\x96\x81"), types[i] = 1;
        else snprintf(texts[i], 24, "<unused%d>", i - 260), types[i] = 5;
        ptrs[i] = texts[i];
    }
    if (st == LOOM_OK) {
        const struct loom_vocab_params vp = loom_vocab_llama_params(n_vocab, ptrs, NULL, NULL, types);
        st = loom_vocab_new(&vp, out);
    }
    free(texts);
    free(ptrs);
    free(types);
    return st;
}

static enum loom_status set_metadata(struct loom_gguf_writer * w, const struct loom_gen_params * p) {
    enum loom_status st = LOOM_OK;
    uint32_t file_type = p->type == LOOM_TYPE_F32 ? 0 : p->type == LOOM_TYPE_F16 ? 1 : 32;
    const char * arch = loom_arch_name(p->arch);
    char key[96];
#define SET(call) if (st == LOOM_OK) st = (call)
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    SET(loom_gguf_writer_set_str(w, "general.architecture", arch));
    SET(loom_gguf_writer_set_str(w, "general.name", p->name ? p->name : "loom-random"));
    SET(loom_gguf_writer_set_u32(w, "general.file_type", file_type));
    SET(loom_gguf_writer_set_u32(w, K("context_length"), (uint32_t)p->n_ctx));
    SET(loom_gguf_writer_set_u32(w, K("embedding_length"), (uint32_t)p->n_embd));
    SET(loom_gguf_writer_set_u32(w, K("feed_forward_length"), (uint32_t)p->n_ff));
    SET(loom_gguf_writer_set_u32(w, K("block_count"), (uint32_t)p->n_layer));
    SET(loom_gguf_writer_set_u32(w, K("attention.head_count"), (uint32_t)p->n_head));
    SET(loom_gguf_writer_set_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_head_kv));
    SET(loom_gguf_writer_set_u32(w, K("rope.dimension_count"), (uint32_t)(p->n_embd / p->n_head)));
    SET(loom_gguf_writer_set_f32(w, K("rope.freq_base"), p->rope_freq_base > 0 ? p->rope_freq_base : 10000.0f));
    SET(loom_gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f));
    if (p->rope_scaling != LOOM_ROPE_SCALING_NONE) {
        SET(loom_gguf_writer_set_str(w, K("rope.scaling.type"), p->rope_scaling == LOOM_ROPE_SCALING_YARN ? "yarn" : "linear"));
        SET(loom_gguf_writer_set_f32(w, K("rope.scaling.factor"), p->rope_scale));
    }
    if (p->rope_scaling == LOOM_ROPE_SCALING_YARN) {
        SET(loom_gguf_writer_set_u32(w, K("rope.scaling.original_context_length"), (uint32_t)(p->n_ctx_orig ? p->n_ctx_orig : p->n_ctx)));
    }
    if (p->chat_template) SET(loom_gguf_writer_set_str(w, "tokenizer.chat_template", p->chat_template));
#undef K
#undef SET
    return st;
}

#define GEN_CHUNK ((size_t)1 << 20) /* elements generated per block (one seed each) */

/* Generates and writes one tensor's data in blocks, in parallel, deterministically. */
static enum loom_status write_tensor(struct loom_gguf_writer * w, const struct gen_tensor * t, enum loom_type type,
                                     uint64_t seed, float * fbuf, void * obuf, size_t buf_elems) {
    size_t n = (size_t)(t->ne[0] * t->ne[1]);
    enum loom_type out_type = t->norm || t->bias || t->factors ? LOOM_TYPE_F32 : type;
    size_t esize = loom_type_size(out_type);
    const struct loom_type_traits * tt = loom_type_get_traits(out_type);
    char err[256];
    for (size_t done = 0; done < n; done += buf_elems) {
        size_t m = n - done < buf_elems ? n - done : buf_elems;
        size_t n_blocks = t->factors ? 0 : (m + GEN_CHUNK - 1) / GEN_CHUNK;
        if (t->factors) memcpy(obuf, fbuf, m * esize); /* filled by the caller */
#pragma omp parallel for schedule(static)
        for (size_t b = 0; b < n_blocks; b++) {
            size_t i0 = b * GEN_CHUNK, len = m - i0 < GEN_CHUNK ? m - i0 : GEN_CHUNK;
            uint64_t s = seed ^ ((done + i0) / GEN_CHUNK + 1) * 0xD1B54A32D192ED03ull;
            fill_normal(fbuf + i0, len, s, t->norm ? 1.0f : 0.0f, t->norm ? 0.01f : t->bias ? 0.1f : 0.02f);
            tt->from_float(fbuf + i0, (uint8_t *)obuf + i0 * esize, (int64_t)len);
        }
        enum loom_status st = loom_gguf_writer_write_data(w, obuf, m * esize, err, sizeof err);
        if (st != LOOM_OK) {
            loom_log(LOOM_LOG_ERROR, "%s", err);
            return st;
        }
    }
    return LOOM_OK;
}

#define GEN_MAX_BYTES ((uint64_t)1 << 40) /* 1 TiB: far above any model worth generating */

static double gib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }

/* Refuses a file above GEN_MAX_BYTES or larger than the free space of the output's filesystem,
 * before anything is written (the sizes come from the writer, with overflow checks). */
static enum loom_status check_size(struct loom_gguf_writer * w, const char * out_path) {
    uint64_t need;
    if (loom_gguf_writer_file_size(w, &need) != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "model too large: its size overflows 64 bits");
        return LOOM_ERR_INVALID_ARG;
    }
    if (need > GEN_MAX_BYTES) {
        loom_log(LOOM_LOG_ERROR, "model too large: %.1f GiB (%llu bytes) exceeds the limit of %.0f GiB", gib(need),
                 (unsigned long long)need, gib(GEN_MAX_BYTES));
        return LOOM_ERR_INVALID_ARG;
    }
    /* the temporary file is created next to the output: its folder's filesystem must hold it all */
    size_t n = strlen(out_path);
    char * dir = malloc(n + 2);
    if (!dir) return LOOM_ERR_OOM;
    memcpy(dir, out_path, n + 1);
    char * slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    struct statvfs vs;
    int rc = statvfs(dir, &vs);
    free(dir);
    if (rc != 0) return LOOM_OK; /* a folder that is not there: creating the file reports it */
    uint64_t avail = (uint64_t)vs.f_bavail;
    uint64_t unit = vs.f_frsize ? (uint64_t)vs.f_frsize : (uint64_t)vs.f_bsize;
    if (unit && avail <= UINT64_MAX / unit && need > avail * unit) {
        loom_log(LOOM_LOG_ERROR, "model needs %.1f GiB (%llu bytes) but the output's filesystem has %.1f GiB free", gib(need),
                 (unsigned long long)need, gib(avail * unit));
        return LOOM_ERR_INVALID_ARG;
    }
    return LOOM_OK;
}

/* Opens the vocabulary GGUF 'path', checks that Loom reads its vocabulary, and takes its token
 * count as the model's when 'n_vocab' is 0 (else they must agree). */
static enum loom_status open_vocab_file(const char * path, int32_t * n_vocab, struct loom_gguf ** out) {
    struct loom_vocab * v = NULL;
    enum loom_status st = loom_vocab_load_gguf(path, &v); /* logs why it cannot */
    if (st != LOOM_OK) return st;
    int32_t n = loom_vocab_n_tokens(v);
    loom_vocab_free(v);
    if (*n_vocab && *n_vocab != n) {
        loom_log(LOOM_LOG_ERROR, "the vocabulary of %s has %d tokens, the model shape says %d", path, n, *n_vocab);
        return LOOM_ERR_INVALID_ARG;
    }
    *n_vocab = n;
    return loom_gguf_open(path, out, NULL, 0);
}

/* Copies every tokenizer.* key of 'g' (the file is then protected from being overwritten). */
static enum loom_status copy_vocab_keys(struct loom_gguf_writer * w, const struct loom_gguf * g) {
    enum loom_status st = LOOM_OK;
    for (int64_t i = 0; i < loom_gguf_n_kv(g) && st == LOOM_OK; i++) {
        if (!strncmp(loom_gguf_kv_key(g, i), "tokenizer.", 10)) st = loom_gguf_writer_copy_kv(w, g, i);
    }
    return st;
}

enum loom_status loom_gen_model(const struct loom_gen_params * params, const char * out_path) {
    struct loom_gen_params p = *params;
    struct loom_gguf * vg = NULL;
    enum loom_status st = LOOM_OK;
    if (p.vocab_path && p.tokenizer_path) {
        loom_log(LOOM_LOG_ERROR, "give one vocabulary: a llama2.c tokenizer or a vocabulary GGUF, not both");
        return LOOM_ERR_INVALID_ARG;
    }
    if (p.vocab_path && (st = open_vocab_file(p.vocab_path, &p.n_vocab, &vg)) != LOOM_OK) return st;
    st = check_params(&p);
    struct loom_vocab * vocab = NULL;
    if (st == LOOM_OK && !vg) {
        st = p.tokenizer_path ? loom_vocab_load_llama2c(p.tokenizer_path, p.n_vocab, &vocab) : byte_vocab(p.n_vocab, &vocab);
    }
    if (st != LOOM_OK) {
        loom_gguf_free(vg);
        return st;
    }

    struct loom_gguf_writer * w = loom_gguf_writer_new();
    size_t max_t = 5 + (size_t)p.n_layer * 12;
    struct gen_tensor * ts = calloc(max_t, sizeof *ts);
    size_t buf_elems = 16 * GEN_CHUNK;
    float * fbuf = malloc(buf_elems * sizeof *fbuf);
    void * obuf = malloc(buf_elems * sizeof(float));
    if (!ts || !w || !fbuf || !obuf) {
        loom_log(LOOM_LOG_ERROR, "out of memory: cannot allocate the writer and %.2f MiB of buffers",
                 (double)(2 * buf_elems * sizeof(float) + max_t * sizeof *ts) / 1048576.0);
        st = LOOM_ERR_OOM;
    }
    int n = st == LOOM_OK ? list_tensors(&p, ts) : 0;
    if (st == LOOM_OK) st = set_metadata(w, &p);
    if (st == LOOM_OK) st = vg ? copy_vocab_keys(w, vg) : loom_vocab_write_gguf(vocab, w);
    if (st == LOOM_OK && p.tokenizer_path) st = loom_gguf_writer_protect(w, p.tokenizer_path);
    for (int i = 0; i < n && st == LOOM_OK; i++) {
        const bool f32 = ts[i].norm || ts[i].bias || ts[i].factors;
        st = loom_gguf_writer_add_tensor(w, ts[i].name, f32 ? LOOM_TYPE_F32 : p.type, ts[i].n_dims, ts[i].ne, NULL);
    }
    if (st == LOOM_OK) st = check_size(w, out_path);
    char err[256];
    if (st == LOOM_OK) {
        st = loom_gguf_writer_begin(w, out_path, err, sizeof err);
        if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    }
    for (int i = 0; i < n && st == LOOM_OK; i++) {
        if (ts[i].factors) llama31_factors(&p, fbuf, ts[i].ne[0]);
        st = write_tensor(w, &ts[i], p.type, p.seed * 0x9E3779B97F4A7C15ull + (uint64_t)i, fbuf, obuf, buf_elems);
    }
    if (st == LOOM_OK) {
        st = loom_gguf_writer_finish(w, err, sizeof err);
        if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    }
    loom_gguf_writer_free(w);
    loom_gguf_free(vg);
    loom_vocab_free(vocab);
    free(ts);
    free(fbuf);
    free(obuf);
    return st;
}
