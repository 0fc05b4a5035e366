/* quantize.c -- `loom quantize`: rewrites a GGUF model with its weights in a quantized preset, choosing
 * each tensor's type as the field's quantizer does (more bits for output, attn_v, ffn_down and the
 * first / last layers; fallbacks where a row does not fit the blocks). */
#include "loom-gguf.h"
#include "loom-convert.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The field's presets (llama_ftype: the value stored as general.file_type) and their base type. */
struct preset {
    const char * name;
    uint32_t ftype;
    enum loom_type type;
};

enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9, FT_Q2_K = 10,
    FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17,
    FT_Q6_K = 18, FT_IQ4_NL = 25, FT_IQ4_XS = 30, FT_BF16 = 32,
};

static const struct preset presets[] = {
    {"Q4_0", FT_Q4_0, LOOM_TYPE_Q4_0},       {"Q4_1", FT_Q4_1, LOOM_TYPE_Q4_1},
    {"Q5_0", FT_Q5_0, LOOM_TYPE_Q5_0},       {"Q5_1", FT_Q5_1, LOOM_TYPE_Q5_1},
    {"Q8_0", FT_Q8_0, LOOM_TYPE_Q8_0},       {"Q2_K", FT_Q2_K, LOOM_TYPE_Q2_K},
    {"Q3_K_S", FT_Q3_K_S, LOOM_TYPE_Q3_K},   {"Q3_K_M", FT_Q3_K_M, LOOM_TYPE_Q3_K},
    {"Q3_K_L", FT_Q3_K_L, LOOM_TYPE_Q3_K},   {"Q4_K_S", FT_Q4_K_S, LOOM_TYPE_Q4_K},
    {"Q4_K_M", FT_Q4_K_M, LOOM_TYPE_Q4_K},   {"Q5_K_S", FT_Q5_K_S, LOOM_TYPE_Q5_K},
    {"Q5_K_M", FT_Q5_K_M, LOOM_TYPE_Q5_K},   {"Q6_K", FT_Q6_K, LOOM_TYPE_Q6_K},
    {"IQ4_NL", FT_IQ4_NL, LOOM_TYPE_IQ4_NL}, {"IQ4_XS", FT_IQ4_XS, LOOM_TYPE_IQ4_XS},
    {"F16", FT_F16, LOOM_TYPE_F16},          {"BF16", FT_BF16, LOOM_TYPE_BF16},
    {"F32", FT_ALL_F32, LOOM_TYPE_F32},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

/* A preset by its name (any case), the field's aliases (Q3_K, Q4_K, Q5_K: the _M mixes) or its
 * llama_ftype number ("15" is Q4_K_M), as the field's quantizer takes them. */
static const struct preset * find_preset(const char * name) {
    static const struct {
        const char * alias, * name;
    } aliases[] = {{"Q3_K", "Q3_K_M"}, {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (!strcasecmp(name, aliases[i].alias)) name = aliases[i].name;
    }
    char * end = NULL;
    const long id = name[0] >= '0' && name[0] <= '9' ? strtol(name, &end, 10) : -1;
    const bool numeric = end && !*end;
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (numeric ? id == (long)presets[i].ftype : !strcasecmp(name, presets[i].name)) return &presets[i];
    }
    return NULL;
}

const char * loom_quantize_preset_name(const char * name) {
    const struct preset * p = name ? find_preset(name) : NULL;
    return p ? p->name : NULL;
}

/* The types --output-tensor-type and --token-embedding-type may name: the presets' base types. */
static bool type_by_name(const char * name, enum loom_type * out) {
    for (size_t i = 0; name && i < N_PRESETS; i++) {
        if (!strcasecmp(name, loom_type_name(presets[i].type))) {
            *out = presets[i].type;
            return true;
        }
    }
    return false;
}

const char * loom_quantize_preset_names(void) {
    return "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, "
           "IQ4_XS, F16, BF16, F32";
}

bool loom_quantize_preset_known(const char * name) { return name && find_preset(name) != NULL; }

const char * loom_quantize_tensor_type_names(void) {
    return "q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, f16, bf16, f32";
}

bool loom_quantize_tensor_type_known(const char * name) {
    enum loom_type t;
    return type_by_name(name, &t);
}

/* ---------------------------------------------------------------- tensor types */

/* What the mix rules need to know about the model, and their running counters. */
struct mix_state {
    uint32_t ftype;
    int n_gqa;            /* query heads per KV head */
    bool has_output;      /* a separate output.weight (else token_embd is the output) */
    int n_attn_v, i_attn_v;
    int n_ffn_down, i_ffn_down;
};

static bool has(const char * name, const char * part) { return strstr(name, part) != NULL; }

static bool ends_with(const char * s, const char * tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* Weights the field quantizes: 2-d or more, named "*weight", not norms, router or position tables. */
static bool quantizable(const char * name, int n_dims) {
    return n_dims >= 2 && ends_with(name, "weight") && !has(name, "_norm.weight") && !has(name, "ffn_gate_inp.weight") &&
           strcmp(name, "position_embd.weight") != 0 && strcmp(name, "token_types.weight") != 0 &&
           !has(name, "ssm_conv1d") && !has(name, "attn_rel_b.weight");
}

/* The first eighth, the last eighth and every third layer between get more bits (in 64 bits: a
 * corrupt file's block_count may be any 32-bit value). */
static bool use_more_bits(int64_t i_layer, int64_t n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* The preset's per-tensor mix (the field's llama_tensor_get_type for these presets, no importance matrix). */
static enum loom_type mix_type(struct mix_state * qs, const char * name, int64_t ne0, enum loom_type t) {
    const uint32_t ft = qs->ftype;
    if (!strcmp(name, "output.weight") || (!qs->has_output && !strcmp(name, "token_embd.weight"))) {
        if (ne0 % 256 != 0) return LOOM_TYPE_Q8_0;
        return t == LOOM_TYPE_Q8_0 ? t : LOOM_TYPE_Q6_K;
    }
    if (!strcmp(name, "token_embd.weight")) return t;
    if (has(name, "attn_v.weight")) {
        if (ft == FT_Q2_K) {
            t = qs->n_gqa >= 4 ? LOOM_TYPE_Q4_K : LOOM_TYPE_Q3_K;
        } else if (ft == FT_Q3_K_M) {
            t = qs->i_attn_v < 2 ? LOOM_TYPE_Q5_K : LOOM_TYPE_Q4_K;
        } else if (ft == FT_Q3_K_L) {
            t = LOOM_TYPE_Q5_K;
        } else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && qs->n_gqa >= 4) {
            t = LOOM_TYPE_Q5_K;
        } else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(qs->i_attn_v, qs->n_attn_v)) {
            t = LOOM_TYPE_Q6_K;
        } else if (ft == FT_Q4_K_S && qs->i_attn_v < 4) {
            t = LOOM_TYPE_Q5_K;
        }
        qs->i_attn_v++;
    } else if (has(name, "ffn_down")) {
        const int i = qs->i_ffn_down, n = qs->n_ffn_down;
        if (ft == FT_Q2_K) {
            t = LOOM_TYPE_Q3_K;
        } else if (ft == FT_Q3_K_M) {
            t = i < n / 16 ? LOOM_TYPE_Q5_K : LOOM_TYPE_Q4_K;
        } else if (ft == FT_Q3_K_L) {
            t = LOOM_TYPE_Q5_K;
        } else if (ft == FT_Q4_K_M) {
            if (use_more_bits(i, n)) t = LOOM_TYPE_Q6_K;
        } else if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS)) {
            t = LOOM_TYPE_Q5_K;
        } else if (ft == FT_Q5_K_M && use_more_bits(i, n)) {
            t = LOOM_TYPE_Q6_K;
        } else if (ft == FT_Q4_K_S && i < n / 8) {
            t = LOOM_TYPE_Q5_K;
        }
        qs->i_ffn_down++;
    } else if (has(name, "attn_output.weight")) {
        if (ft == FT_Q2_K) t = LOOM_TYPE_Q3_K;
        else if (ft == FT_Q3_K_M) t = LOOM_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L) t = LOOM_TYPE_Q5_K;
    } else if (has(name, "attn_qkv.weight")) {
        if (ft == FT_Q3_K_M || ft == FT_Q3_K_L) t = LOOM_TYPE_Q4_K;
        else if (ft == FT_Q4_K_M) t = LOOM_TYPE_Q5_K;
        else if (ft == FT_Q5_K_M) t = LOOM_TYPE_Q6_K;
    }
    return t;
}

/* A type whose blocks fit rows of 'ne0': the field's fallbacks for rows that are not a multiple of
 * 256 (Q2_K, Q3_K, IQ4_XS -> IQ4_NL; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0), then F16 for
 * rows that are not a multiple of 32 either. */
static enum loom_type fit_rows(enum loom_type t, int64_t ne0) {
    if (ne0 % loom_blck_size(t) == 0) return t;
    switch (t) {
    case LOOM_TYPE_Q2_K: case LOOM_TYPE_Q3_K: case LOOM_TYPE_IQ4_XS: t = LOOM_TYPE_IQ4_NL; break;
    case LOOM_TYPE_Q4_K: t = LOOM_TYPE_Q5_0; break;
    case LOOM_TYPE_Q5_K: t = LOOM_TYPE_Q5_1; break;
    case LOOM_TYPE_Q6_K: t = LOOM_TYPE_Q8_0; break;
    default: break;
    }
    return ne0 % loom_blck_size(t) == 0 ? t : LOOM_TYPE_F16;
}

/* The user's choices besides the preset (struct loom_quantize_params). */
struct choices {
    bool pure, leave_output;
    bool has_output_type, has_embd_type;
    enum loom_type output_type, embd_type;
};

static enum loom_type choose_type(struct mix_state * qs, const struct preset * p, const struct choices * ch, const char * name,
                                  int n_dims, const int64_t * ne, enum loom_type cur) {
    if (!quantizable(name, n_dims)) return cur;
    if (ch->leave_output && !strcmp(name, "output.weight")) return cur;
    enum loom_type t = p->type; /* F16 / BF16 / F32 and --pure: every weight in the preset's type */
    const bool is_output = !strcmp(name, "output.weight") || (!qs->has_output && !strcmp(name, "token_embd.weight"));
    if (!ch->pure && loom_blck_size(p->type) > 1) {
        /* the output rule of the mix takes --output-tensor-type first (a tied token_embd included) */
        t = is_output && ch->has_output_type ? ch->output_type : mix_type(qs, name, ne[0], p->type);
    }
    if (ch->has_embd_type && !strcmp(name, "token_embd.weight")) t = ch->embd_type;
    if (ch->has_output_type && !strcmp(name, "output.weight")) t = ch->output_type;
    return fit_rows(t, ne[0]);
}

/* ---------------------------------------------------------------- the file */

struct job {
    const char * in_path;
    struct choices ch;
    bool allow_requantize;
    struct loom_gguf * g;
    int fd;
    int n_threads;
    enum loom_type * types;   /* per tensor (input index) */
    int64_t * order;          /* input indices in output order */
    loom_quantize_progress_fn progress;
    void * user;
};

static int read_hparam(const struct loom_gguf * g, const char * arch, const char * key, int def) {
    char k[256];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    const int64_t i = loom_gguf_find_key(g, k);
    if (i < 0) return def;
    switch (loom_gguf_kv_type(g, i)) {
    case LOOM_GGUF_TYPE_UINT32: return (int)loom_gguf_get_u32(g, k, (uint32_t)def);
    case LOOM_GGUF_TYPE_INT32: return loom_gguf_get_i32(g, k, def);
    default: return def;
    }
}

/* The field's tensor order: tensors outside the layers first, then layer by layer, by name within
 * each (the mix's layer counters count in this order). */
static int layer_of(const char * name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) l = -1;
    return l;
}

struct order_key {
    int layer;
    const char * name;
    int64_t index;
};

static int cmp_key(const void * pa, const void * pb) {
    const struct order_key * a = pa, * b = pb;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Fills 'order' with the input's tensor indices in the field's order. */
static enum loom_status sort_tensors(const struct loom_gguf * g, int64_t * order) {
    const int64_t n = loom_gguf_n_tensors(g);
    struct order_key * keys = malloc(sizeof *keys * (size_t)(n ? n : 1));
    if (!keys) return LOOM_ERR_OOM;
    for (int64_t i = 0; i < n; i++) {
        keys[i].name = loom_gguf_tensor_name(g, i);
        keys[i].layer = layer_of(keys[i].name);
        keys[i].index = i;
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
    for (int64_t i = 0; i < n; i++) order[i] = keys[i].index;
    free(keys);
    return LOOM_OK;
}

static enum loom_status plan(struct job * j, const struct preset * p) {
    struct loom_gguf * g = j->g;
    size_t alen = 0;
    const char * arch = loom_gguf_get_str(g, "general.architecture", "llama", &alen);
    char a[64];
    snprintf(a, sizeof a, "%.*s", (int)(alen < 63 ? alen : 63), arch);
    const int n_head = read_hparam(g, a, "attention.head_count", 1);
    const int n_head_kv = read_hparam(g, a, "attention.head_count_kv", n_head);
    struct mix_state qs = {.ftype = p->ftype, .n_gqa = n_head_kv > 0 ? n_head / n_head_kv : 1};
    qs.n_ffn_down = read_hparam(g, a, "block_count", 0);
    const int64_t n = loom_gguf_n_tensors(g);
    for (int64_t i = 0; i < n; i++) {
        const char * name = loom_gguf_tensor_name(g, i);
        if (has(name, "attn_v.weight")) qs.n_attn_v++;
        if (!strcmp(name, "output.weight")) qs.has_output = true;
    }
    const enum loom_status st = sort_tensors(g, j->order);
    if (st != LOOM_OK) return st;
    for (int64_t k = 0; k < n; k++) {
        const int64_t i = j->order[k];
        const char * name = loom_gguf_tensor_name(g, i);
        const enum loom_type cur = loom_gguf_tensor_type(g, i);
        const enum loom_type t = choose_type(&qs, p, &j->ch, name, loom_gguf_tensor_n_dims(g, i), loom_gguf_tensor_ne(g, i), cur);
        if (t != cur && !loom_type_get_traits(cur)->to_float) {
            loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' has type %s, which cannot be converted", j->in_path, name, loom_type_name(cur));
            return LOOM_ERR_UNSUPPORTED;
        }
        if (t != cur && loom_blck_size(cur) > 1 && !j->allow_requantize) {
            loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' is already quantized (%s); quantize from an F32, F16 or BF16 file "
                     "(or allow requantizing it)", j->in_path, name, loom_type_name(cur));
            return LOOM_ERR_UNSUPPORTED;
        }
        j->types[i] = t;
    }
    return LOOM_OK;
}

static enum loom_status read_at(struct job * j, void * buf, size_t size, uint64_t off) {
    uint8_t * p = buf;
    while (size) {
        const ssize_t r = pread(j->fd, p, size, (off_t)off);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            loom_log(LOOM_LOG_ERROR, "%s: cannot read tensor data at byte %llu: %s", j->in_path, (unsigned long long)off,
                     r < 0 ? strerror(errno) : "unexpected end of file");
            return LOOM_ERR_IO;
        }
        p += r;
        size -= (size_t)r;
        off += (uint64_t)r;
    }
    return LOOM_OK;
}

/* Converts tensor i ('nrows' rows of 'ne0') from its bytes at 'src' to type 'to' at 'dst' (a tensor
 * kept in its type is copied row by row, after the same check); refuses NaN and infinite values, and
 * values beyond F16's range when 'to' is F16 (naming the tensor and row). 'f32' holds one row per
 * thread. */
static enum loom_status convert(struct job * j, int64_t i, const uint8_t * src, uint8_t * dst, enum loom_type to,
                                float * f32) {
    const enum loom_type from = loom_gguf_tensor_type(j->g, i);
    const int64_t ne0 = loom_gguf_tensor_ne(j->g, i)[0], nrows = loom_gguf_tensor_nelements(j->g, i) / ne0;
    const size_t in_rs = loom_row_size(from, ne0), out_rs = loom_row_size(to, ne0);
    const loom_to_float_fn to_float = loom_type_get_traits(from)->to_float;
    const loom_from_float_fn from_float = loom_type_get_traits(to)->from_float;
    int64_t bad_row = -1;
#pragma omp parallel for num_threads(j->n_threads) schedule(dynamic, 16)
    for (int64_t r = 0; r < nrows; r++) {
        int th = 0;
#ifdef _OPENMP
        th = omp_get_thread_num();
#endif
        float * x = f32 + (size_t)th * (size_t)ne0;
        to_float(src + (size_t)r * in_rs, x, ne0);
        bool finite = true;
        const float lim = to == LOOM_TYPE_F16 ? 65504.0f : INFINITY; /* F16's largest finite value */
        for (int64_t k = 0; k < ne0; k++) finite &= isfinite(x[k]) && fabsf(x[k]) <= lim;
        if (!finite) {
#pragma omp critical
            if (bad_row < 0 || r < bad_row) bad_row = r;
            continue;
        }
        if (from == to) memcpy(dst + (size_t)r * out_rs, src + (size_t)r * in_rs, out_rs);
        else from_float(x, dst + (size_t)r * out_rs, ne0);
    }
    if (bad_row >= 0) {
        loom_log(LOOM_LOG_ERROR, "%s: tensor '%s' holds NaN or infinite values%s (row %lld): refusing to quantize it",
                 j->in_path, loom_gguf_tensor_name(j->g, i), to == LOOM_TYPE_F16 ? " or values beyond F16's range" : "",
                 (long long)bad_row);
        return LOOM_ERR_FORMAT;
    }
    return LOOM_OK;
}

static enum loom_status write_all(struct job * j, const struct preset * p, const char * out_path) {
    struct loom_gguf * g = j->g;
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    if (!w) return LOOM_ERR_OOM;
    char err[512] = "";
    enum loom_status st = LOOM_OK;
    for (int64_t i = 0; i < loom_gguf_n_kv(g) && st == LOOM_OK; i++) st = loom_gguf_writer_copy_kv(w, g, i);
    /* appended last, as the field's quantizer writes them */
    loom_gguf_writer_remove_key(w, "general.quantization_version");
    loom_gguf_writer_remove_key(w, "general.file_type");
    if (st == LOOM_OK) st = loom_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (st == LOOM_OK) st = loom_gguf_writer_set_u32(w, "general.file_type", p->ftype);
    if (st == LOOM_OK) st = loom_gguf_writer_set_alignment(w, loom_gguf_alignment(g));
    const int64_t n = loom_gguf_n_tensors(g);
    for (int64_t k = 0; k < n && st == LOOM_OK; k++) {
        const int64_t i = j->order[k];
        st = loom_gguf_writer_add_tensor(w, loom_gguf_tensor_name(g, i), j->types[i], loom_gguf_tensor_n_dims(g, i),
                                         loom_gguf_tensor_ne(g, i), NULL);
    }
    if (st != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "%s: cannot lay out the output: %s", out_path, loom_status_str(st));
        loom_gguf_writer_free(w);
        return st;
    }
    st = loom_gguf_writer_begin(w, out_path, err, sizeof err);
    int64_t max_ne0 = 1;
    uint64_t max_in = 0, max_out = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t ne0 = loom_gguf_tensor_ne(g, i)[0];
        if (ne0 > max_ne0) max_ne0 = ne0;
        if (loom_gguf_tensor_size(g, i) > max_in) max_in = loom_gguf_tensor_size(g, i);
        if (loom_gguf_writer_tensor_size(w, i) > max_out) max_out = loom_gguf_writer_tensor_size(w, i); /* output index */
    }
    uint8_t * in = st == LOOM_OK ? malloc(max_in ? max_in : 1) : NULL;
    uint8_t * out = st == LOOM_OK ? malloc(max_out ? max_out : 1) : NULL;
    float * f32 = st == LOOM_OK ? malloc(sizeof(float) * (size_t)max_ne0 * (size_t)j->n_threads) : NULL;
    if (st == LOOM_OK && (!in || !out || !f32)) {
        loom_log(LOOM_LOG_ERROR, "cannot allocate %.1f MiB of buffers", (double)(max_in + max_out) / 1048576.0);
        st = LOOM_ERR_OOM;
    } else if (st != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "%s", err);
    }
    for (int64_t k = 0; k < n && st == LOOM_OK; k++) {
        const int64_t i = j->order[k];
        const enum loom_type from = loom_gguf_tensor_type(g, i), to = j->types[i];
        const uint64_t in_size = loom_gguf_tensor_size(g, i);
        st = read_at(j, in, in_size, loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, i));
        const uint8_t * data = in;
        if (st == LOOM_OK && loom_type_get_traits(from)->to_float) { /* checked even when kept as it is */
            st = convert(j, i, in, out, to, f32);
            data = out;
        }
        if (st == LOOM_OK) {
            st = loom_gguf_writer_write_data(w, data, loom_gguf_writer_tensor_size(w, k), err, sizeof err);
            if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
        }
        if (st == LOOM_OK && j->progress) {
            j->progress(j->user, k, n, loom_gguf_tensor_name(g, i), from, to, in_size, loom_gguf_writer_tensor_size(w, k));
        }
    }
    if (st == LOOM_OK) {
        st = loom_gguf_writer_finish(w, err, sizeof err);
        if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    }
    free(in);
    free(out);
    free(f32);
    loom_gguf_writer_free(w);
    return st;
}

enum loom_status loom_model_quantize(const char * in_path, const char * out_path, const char * preset_name,
                                     const struct loom_quantize_params * params) {
    const struct preset * p = preset_name ? find_preset(preset_name) : NULL;
    if (!p) {
        loom_log(LOOM_LOG_ERROR, "unknown quantization type '%s' (one of %s)", preset_name ? preset_name : "(null)",
                 loom_quantize_preset_names());
        return LOOM_ERR_INVALID_ARG;
    }
    struct job j = {.in_path = in_path, .fd = -1, .n_threads = 1};
    if (params) {
        j.n_threads = params->n_threads;
        j.progress = params->progress;
        j.user = params->user;
        j.allow_requantize = params->allow_requantize;
        j.ch.pure = params->pure;
        j.ch.leave_output = params->leave_output_tensor;
        const char * names[2] = {params->output_tensor_type, params->token_embedding_type};
        bool * has[2] = {&j.ch.has_output_type, &j.ch.has_embd_type};
        enum loom_type * types[2] = {&j.ch.output_type, &j.ch.embd_type};
        for (int k = 0; k < 2; k++) {
            if (!names[k]) continue;
            if (!type_by_name(names[k], types[k])) {
                loom_log(LOOM_LOG_ERROR, "unknown tensor type '%s' for the %s (one of %s)", names[k], k ? "token embeddings" : "output tensor",
                         loom_quantize_tensor_type_names());
                return LOOM_ERR_INVALID_ARG;
            }
            *has[k] = true;
        }
    }
    if (j.n_threads <= 0) j.n_threads = loom_n_cpus();
    char err[512] = "";
    enum loom_status st = loom_gguf_open(in_path, &j.g, err, sizeof err);
    if (st != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "%s", err);
        return st;
    }
    j.fd = open(in_path, O_RDONLY | O_CLOEXEC);
    j.types = calloc((size_t)loom_gguf_n_tensors(j.g) + 1, sizeof *j.types);
    j.order = calloc((size_t)loom_gguf_n_tensors(j.g) + 1, sizeof *j.order);
    if (j.fd < 0) {
        loom_log(LOOM_LOG_ERROR, "%s: cannot open: %s", in_path, strerror(errno));
        st = LOOM_ERR_IO;
    } else if (!j.types || !j.order) {
        st = LOOM_ERR_OOM;
    }
    if (st == LOOM_OK) st = plan(&j, p);
    if (st == LOOM_OK) st = write_all(&j, p, out_path);
    if (j.fd >= 0) close(j.fd);
    free(j.types);
    free(j.order);
    loom_gguf_free(j.g);
    return st;
}
