/* model-split.c -- -sm row: each offloaded layer's weights cut into per-device slices (Megatron-LM's
 * tensor parallelism, Shoeybi et al. 2019) and loaded from the file slice by slice. */
#include "loom-gguf.h"
#include "model-loader.h"
#include "quant/quant.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What one slice copies: 'src' (a whole weight, metadata only) rows [first, first + n) (by_cols
 * false: ne1 rows, or elements of a 1-d tensor) or columns [first, first + n) of every row (by_cols). */
struct slice {
    struct loom_tensor * dst, * src;
    int64_t first;
    bool by_cols;
};

static struct loom_tensor * make(struct loom_context * c, const struct loom_tensor * src, int64_t ne0, int64_t ne1, int d) {
    struct loom_tensor * t = ne1 ? loom_new_tensor_2d(c, src->type, ne0, ne1) : loom_new_tensor_1d(c, src->type, ne0);
    loom_format_name(t, "%.48s@%d", src->name, d);
    loom_set_weight(t);
    return t;
}

/* Checks that columns [first, first + n) of 'w' are whole blocks of its type. */
static enum loom_status check_cols(const struct loom_tensor * w, int64_t first, int64_t n) {
    const int64_t bs = loom_blck_size(w->type);
    if (first % bs == 0 && n % bs == 0) return LOOM_OK;
    loom_log(LOOM_LOG_ERROR, "-sm row: '%s' (%s) would be cut at column %lld, inside a block of %lld: use fewer devices or "
             "other -ts shares", w->name, loom_type_name(w->type), (long long)(first % bs ? first : first + n), (long long)bs);
    return LOOM_ERR_UNSUPPORTED;
}

enum loom_status loom_model_make_parts(struct loom_model * m) {
    const struct loom_hparams * hp = &m->hp;
    const int D = m->n_devs;
    const int64_t head_dim = hp->n_embd / hp->n_head, group = hp->n_head / hp->n_head_kv;
    int64_t kv0[LOOM_MAX_DEVICES], nkv[LOOM_MAX_DEVICES], ff0[LOOM_MAX_DEVICES], nff[LOOM_MAX_DEVICES];
    loom_split_range(hp->n_head_kv, 1, D, m->split, kv0, nkv);
    const int64_t ff_align = loom_blck_size(m->layers[hp->n_layer - 1].ffn_down->type);
    loom_split_range(hp->n_ff, ff_align, D, m->split, ff0, nff);
    for (int d = 0; d < D; d++) {
        if (nkv[d] == 0 || nff[d] == 0) {
            loom_log(LOOM_LOG_ERROR, "-sm row: %s would get no KV head or no feed-forward rows (%d KV heads, %d rows over %d devices); "
                     "use fewer devices or other -ts shares", loom_backend_dev_name(m->devs[d]), hp->n_head_kv, hp->n_ff, D);
            return LOOM_ERR_UNSUPPORTED;
        }
    }
    m->parts = calloc((size_t)hp->n_layer * (size_t)D, sizeof *m->parts);
    if (!m->parts) return LOOM_ERR_OOM;
    const size_t per_dev = 16 * (size_t)hp->n_layer + 4;
    struct loom_init_params ip = {.mem_size = per_dev * loom_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    for (int d = 0; d < D; d++) {
        if (!(m->ctx_parts[d] = loom_init(ip))) return LOOM_ERR_OOM;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        const struct loom_layer * L = &m->layers[il];
        if (!L->offloaded) continue;
        for (int d = 0; d < D; d++) {
            struct loom_layer_part * P = &m->parts[(size_t)il * D + d];
            struct loom_context * c = m->ctx_parts[d];
            P->head_kv0 = (int32_t)kv0[d];
            P->n_head_kv = (int32_t)nkv[d];
            P->head0 = (int32_t)(kv0[d] * group);
            P->n_head = (int32_t)(nkv[d] * group);
            P->ff0 = ff0[d];
            P->n_ff = nff[d];
            const int64_t q_rows = P->n_head * head_dim, kv_rows = P->n_head_kv * head_dim;
            enum loom_status st = check_cols(L->wo, P->head0 * head_dim, q_rows);
            if (st == LOOM_OK) st = check_cols(L->ffn_down, P->ff0, P->n_ff);
            if (st != LOOM_OK) return st;
            P->attn_norm = make(c, L->attn_norm, hp->n_embd, 0, d);
            P->ffn_norm = make(c, L->ffn_norm, hp->n_embd, 0, d);
            P->wq = make(c, L->wq, hp->n_embd, q_rows, d);
            P->wk = make(c, L->wk, hp->n_embd, kv_rows, d);
            P->wv = make(c, L->wv, hp->n_embd, kv_rows, d);
            P->wo = make(c, L->wo, q_rows, hp->n_embd, d);
            if (L->bq) {
                P->bq = make(c, L->bq, q_rows, 0, d);
                P->bk = make(c, L->bk, kv_rows, 0, d);
                P->bv = make(c, L->bv, kv_rows, 0, d);
            }
            P->ffn_gate = make(c, L->ffn_gate, hp->n_embd, P->n_ff, d);
            P->ffn_up = make(c, L->ffn_up, hp->n_embd, P->n_ff, d);
            P->ffn_down = make(c, L->ffn_down, P->n_ff, hp->n_embd, d);
        }
    }
    return LOOM_OK;
}

/* The slices of part P of layer L. Returns their number (at most 12). */
static int slices_of(const struct loom_layer * L, const struct loom_layer_part * P, int64_t head_dim, struct slice * s) {
    int n = 0;
    s[n++] = (struct slice){P->attn_norm, L->attn_norm, 0, false};
    s[n++] = (struct slice){P->ffn_norm, L->ffn_norm, 0, false};
    s[n++] = (struct slice){P->wq, L->wq, P->head0 * head_dim, false};
    s[n++] = (struct slice){P->wk, L->wk, P->head_kv0 * head_dim, false};
    s[n++] = (struct slice){P->wv, L->wv, P->head_kv0 * head_dim, false};
    s[n++] = (struct slice){P->wo, L->wo, P->head0 * head_dim, true};
    if (P->bq) {
        s[n++] = (struct slice){P->bq, L->bq, P->head0 * head_dim, false};
        s[n++] = (struct slice){P->bk, L->bk, P->head_kv0 * head_dim, false};
        s[n++] = (struct slice){P->bv, L->bv, P->head_kv0 * head_dim, false};
    }
    s[n++] = (struct slice){P->ffn_gate, L->ffn_gate, P->ff0, false};
    s[n++] = (struct slice){P->ffn_up, L->ffn_up, P->ff0, false};
    s[n++] = (struct slice){P->ffn_down, L->ffn_down, P->ff0, true};
    return n;
}

static enum loom_status read_bytes(const uint8_t * map, int fd, uint64_t off, void * dst, size_t n) {
    if (map) {
        memcpy(dst, map + off, n);
        return LOOM_OK;
    }
    uint8_t * p = dst;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            loom_log(LOOM_LOG_ERROR, "cannot read the model file at byte %llu: %s", (unsigned long long)off,
                     r < 0 ? strerror(errno) : "unexpected end of file");
            return LOOM_ERR_IO;
        }
        p += r, off += (uint64_t)r, n -= (size_t)r;
    }
    return LOOM_OK;
}

/* Gathers the slice's bytes into 'tmp' (loom_nbytes(dst) bytes) and uploads them. */
static enum loom_status load_slice(const struct slice * sl, const struct loom_gguf * g, const uint8_t * map, int fd, uint8_t * tmp,
                                   bool check_values) {
    const struct loom_tensor * src = sl->src;
    const uint64_t base = loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, loom_gguf_find_tensor(g, src->name));
    const size_t n = loom_nbytes(sl->dst);
    enum loom_status st = LOOM_OK;
    if (!sl->by_cols) { /* whole rows (or elements of a 1-d tensor): one contiguous range */
        const size_t unit = loom_n_dims(src) > 1 ? src->nb[1] : src->nb[0];
        st = read_bytes(map, fd, base + (uint64_t)sl->first * unit, tmp, n);
    } else {
        const size_t row = loom_row_size(src->type, sl->dst->ne[0]), skip = loom_row_size(src->type, sl->first);
        for (int64_t r = 0; r < src->ne[1] && st == LOOM_OK; r++) {
            st = read_bytes(map, fd, base + (uint64_t)r * src->nb[1] + skip, tmp + (size_t)r * row, row);
        }
    }
    /* a slice of whole rows starts at a known byte of the whole tensor; one of columns gathers
     * pieces of every row, and the message names no position */
    const size_t done = sl->by_cols ? SIZE_MAX : (size_t)sl->first * (loom_n_dims(src) > 1 ? src->nb[1] : src->nb[0]);
    if (st == LOOM_OK) st = loom_model_check_data(src, tmp, done, n, check_values);
    return st == LOOM_OK ? loom_backend_tensor_set(sl->dst, tmp, 0, n) : st;
}

enum loom_status loom_model_load_parts(struct loom_model * m, const struct loom_gguf * g, const uint8_t * map, int fd, bool check_values) {
    const int D = m->n_devs;
    const int64_t head_dim = m->hp.n_embd / m->hp.n_head;
    size_t max_bytes = 1;
    for (int d = 0; d < D; d++) {
        for (struct loom_tensor * t = loom_get_first_tensor(m->ctx_parts[d]); t; t = loom_get_next_tensor(m->ctx_parts[d], t)) {
            if (loom_nbytes(t) > max_bytes) max_bytes = loom_nbytes(t);
        }
    }
    uint8_t * tmp = malloc(max_bytes);
    if (!tmp) return LOOM_ERR_OOM;
    enum loom_status st = LOOM_OK;
    for (int d = 0; d < D && st == LOOM_OK; d++) {
        loom_backend_buffer_t buf = loom_backend_alloc_ctx_tensors_from_buft(m->ctx_parts[d], loom_backend_dev_buffer_type(m->devs[d]), &st);
        if (!buf) {
            st = st != LOOM_OK ? st : LOOM_ERR_OOM;
            break;
        }
        if (m->n_buffers == LOOM_MODEL_MAX_BUFFERS) {
            loom_backend_buffer_free(buf);
            st = LOOM_ERR_OOM;
            break;
        }
        loom_backend_buffer_set_usage(buf, LOOM_BACKEND_BUFFER_USAGE_WEIGHTS);
        m->buffers[m->n_buffers++] = buf;
        loom_log(LOOM_LOG_INFO, "%-12s model buffer size = %10.2f MiB (row split slices)", loom_backend_dev_name(m->devs[d]),
                 loom_backend_buffer_get_size(buf) / 1048576.0);
    }
    for (int il = 0; il < m->hp.n_layer && st == LOOM_OK; il++) {
        if (!m->layers[il].offloaded) continue;
        for (int d = 0; d < D && st == LOOM_OK; d++) {
            struct slice s[12];
            const int n = slices_of(&m->layers[il], &m->parts[(size_t)il * D + d], head_dim, s);
            for (int i = 0; i < n && st == LOOM_OK; i++) st = load_slice(&s[i], g, map, fd, tmp, check_values);
        }
    }
    free(tmp);
    return st;
}
