/* cuda-exec.cu -- graph_compute: a split's nodes queued as launch groups (a node and the node
 * fused into it), launched directly or, for token generation, captured into CUDA graphs.
 *
 * CUDA graphs: a split without cuBLAS products (so few columns that every product takes the
 * matrix-vector kernels: token generation) of at least LC_GRAPH_MIN_NODES nodes is captured in
 * chunks of launch groups -- a short first chunk, so that the GPU starts while the host captures
 * the rest; chunks end at fixed node positions. Each chunk's executable graph is kept; the next
 * capture of a chunk with the same launch sequence (ops and fusions) updates it with
 * cudaGraphExecUpdate (addresses and shapes, e.g. the KV length, may change) instead of
 * instantiating a new one. A compute whose graph has the fingerprint of the last captured one
 * (every launch argument the same: the runner reuses its step graph while only input data
 * changes; for a scheduler's split, the launch key it computed) replays the executable graphs
 * without capturing anything. Nothing captured
 * synchronises or allocates: scratch is reserved before, copies stay kernels. Any capture or
 * instantiation failure turns graphs off for the backend and the work is launched directly.
 * The backend parameter graphs=0 turns them off from the start. */
#include "cuda-common.cuh"
#include "backend/hash.h"
#include "cuda-argmax.cuh"
#include "cuda-attn.cuh"
#include "cuda-binary.cuh"
#include "cuda-cpy.cuh"
#include "cuda-getrows.cuh"
#include "cuda-matvec.cuh"
#include "cuda-mulmat.cuh"
#include "cuda-norm.cuh"
#include "cuda-profile.cuh"
#include "cuda-rope.cuh"
#include "cuda-softmax.cuh"
#include "cuda-unary.cuh"

#include <stdio.h>
#include <string.h>

#define LC_GRAPH_MIN_NODES 8     /* smaller splits launch directly */
#define LC_GRAPH_FIRST_NODES 24  /* graph nodes in the first chunk */
#define LC_GRAPH_NODES 96        /* graph nodes in each later chunk (the last slot takes the rest) */

static bool is_skip(const struct loom_tensor * t) {
    return t->op == LOOM_OP_NONE || loom_op_is_view(t->op) || loom_nelements(t) == 0;
}

static enum loom_status compute_node(struct lc_backend * be, struct loom_tensor * node) {
    switch (node->op) {
    case LOOM_OP_DUP:
    case LOOM_OP_CPY:
    case LOOM_OP_CONT: return lc_cpy(be, node);
    case LOOM_OP_ADD:
    case LOOM_OP_MUL: return lc_binary(be, node);
    case LOOM_OP_SCALE:
    case LOOM_OP_SILU:
    case LOOM_OP_GELU: return lc_unary(be, node);
    case LOOM_OP_RMS_NORM: return lc_rms_norm(be, node);
    case LOOM_OP_MUL_MAT: return lc_mul_mat(be, node);
    case LOOM_OP_GET_ROWS: return lc_get_rows(be, node);
    case LOOM_OP_SET_ROWS: return lc_set_rows(be, node);
    case LOOM_OP_ROPE: return lc_rope(be, node);
    case LOOM_OP_SOFT_MAX: return lc_soft_max(be, node);
    case LOOM_OP_ARGMAX: return lc_argmax(be, node);
    case LOOM_OP_FLASH_ATTN_EXT: return lc_flash_attn(be, node);
    default: return LOOM_ERR_UNSUPPORTED;
    }
}

/* Queues 'node' with the compute nodes after it (next: the first of them, NULL when none) in one
 * kernel when the node's kernel can compute them; '*fused' = whether it covers 'next'. */
static enum loom_status try_fuse(struct lc_backend * be, struct loom_tensor * node, struct loom_tensor * next, bool * fused) {
    *fused = false;
    if (!next) return LOOM_OK;
    switch (node->op) {
    case LOOM_OP_RMS_NORM: return lc_rms_norm_fused(be, node, next, fused);
    case LOOM_OP_ROPE: return lc_rope_fused(be, node, next, fused);
    default: return LOOM_OK;
    }
}

/* A converted activation in scratch is stale once anything writes where it came from. */
static void note_write(struct lc_backend * be, const struct loom_tensor * node) {
    if (!be->conv.src) return;
    struct lc_tensor d;
    if (lc_tensor_of(be, node, false, &d) != LOOM_OK) {
        be->conv.src = NULL;
        return;
    }
    char *lo, *hi;
    lc_extent(&d, &lo, &hi);
    if (lo < be->conv.hi && be->conv.lo < hi) be->conv.src = NULL;
}

/* ---------------------------------------------------------------- profile labels */

/* Profile label, FLOPs and bytes of the launch group of nodes i..last. */
static void profile_group(struct lc_backend * be, const struct loom_cgraph * g, int i, int last) {
    const struct loom_tensor * node = g->nodes[i];
    char label[64];
    double flop = 0, bytes = (double)loom_nbytes(node);
    if (node->op == LOOM_OP_MUL_MAT) {
        const struct loom_tensor *a = node->src[0], *b = node->src[1];
        flop = 2.0 * (double)a->ne[0] * (double)a->ne[1] * (double)b->ne[1] * (double)b->ne[2] * (double)b->ne[3];
        snprintf(label, sizeof label, "MUL_MAT %s %s", lc_mul_mat_is_matvec(node) ? "matvec" : "cublas",
                 lc_is_weight(a) ? "weights" : "activations");
    } else {
        snprintf(label, sizeof label, "%s", loom_op_name(node->op));
    }
    for (int k = 0; k < LOOM_MAX_SRC; k++) {
        if (node->src[k]) bytes += (double)loom_nbytes(node->src[k]);
    }
    for (int k = i + 1; k <= last; k++) {
        const struct loom_tensor * t = g->nodes[k];
        if (is_skip(t)) continue;
        size_t n = strlen(label);
        snprintf(label + n, sizeof label - n, "+%s", loom_op_name(t->op));
        bytes += (double)loom_nbytes(t);
        if (t->op == LOOM_OP_MUL_MAT) { /* SwiGLU's second product, q/k/v, a product after its pre-norm */
            const struct loom_tensor *a = t->src[0], *b = t->src[1];
            flop += 2.0 * (double)a->ne[0] * (double)a->ne[1] * (double)b->ne[1] * (double)b->ne[2] * (double)b->ne[3];
            bytes += (double)loom_nbytes(a);
        }
    }
    lc_profile_group(be, label, flop, bytes);
}

/* ---------------------------------------------------------------- counts (loom_cuda_get_stats) */

/* One launch group led by an 'op' node, carrying the LOOM_CUDA_FUSION_* bits 'fusions'. */
static void count_group(struct loom_cuda_stats * c, enum loom_op op, unsigned fusions) {
    c->launches++;
    c->led[op]++;
    for (int f = 0; f < LOOM_CUDA_FUSION_COUNT; f++) c->fusions[f] += (fusions >> f) & 1u;
}

/* stats += 'add'. */
static void add_stats(struct loom_cuda_stats * stats, const struct loom_cuda_stats * add) {
    stats->computes += add->computes;
    stats->nodes += add->nodes;
    stats->launches += add->launches;
    for (int o = 0; o < LOOM_OP_COUNT; o++) stats->led[o] += add->led[o];
    for (int f = 0; f < LOOM_CUDA_FUSION_COUNT; f++) stats->fusions[f] += add->fusions[f];
}

void lc_get_stats(loom_backend_t backend, struct loom_cuda_stats * stats) {
    *stats = ((const struct lc_backend *)backend->context)->stats;
}

/* ---------------------------------------------------------------- launch groups */

/* The next compute node after node 'i' (view nodes compute nothing), or g->n_nodes. */
static int next_compute(const struct loom_cgraph * g, int i) {
    int j = i + 1;
    while (j < g->n_nodes && is_skip(g->nodes[j])) j++;
    return j;
}

/* Queues the kernels of node 'i' and of the nodes fused into it (the next compute nodes, view
 * nodes between them computing nothing); '*used' is the number of graph nodes covered. */
static enum loom_status launch_group(struct lc_backend * be, struct loom_cgraph * g, int i, int * used) {
    struct loom_tensor * node = g->nodes[i];
    const int j = next_compute(g, i);
    struct loom_tensor * fused = NULL;
    int last = i;
    bool queued = false; /* by a fusion */
    enum loom_status st = LOOM_OK;
    be->memcpy_queued = false;
    be->fusions = 0;
    /* what the group before left for a pre-norm; only this group may use it */
    be->pre_avail = be->pre_next;
    be->pre_next.valid = false;
    be->q8_avail = be->q8_next;
    be->q8_next.valid = false;
    if (be->opts.fuse && j < g->n_nodes) {
        /* the node and the compute nodes after it: list[k] is g->nodes[idx[k]] */
        struct loom_tensor * list[12];
        int idx[12], n = 0;
        for (int k = i; k < g->n_nodes && n < 12; k = next_compute(g, k)) {
            idx[n] = k;
            list[n++] = g->nodes[k];
        }
        int k = 0; /* nodes after 'node' covered */
        if (node->op == LOOM_OP_MUL_MAT || node->op == LOOM_OP_RMS_NORM) {
            int used_nodes = 0;
            st = lc_mul_mat_group(be, list, n, &used_nodes);
            if (used_nodes > 0) {
                k = used_nodes - 1;
                queued = true;
            }
        }
        if (st == LOOM_OK && !queued && node->op != LOOM_OP_MUL_MAT) {
            bool f = false;
            st = try_fuse(be, node, list[1], &f);
            if (f) {
                k = 1;
                queued = true;
                lc_note_fusion(be, node->op == LOOM_OP_RMS_NORM ? LOOM_CUDA_FUSION_NORM_MUL : LOOM_CUDA_FUSION_ROPE_COPY);
            }
        }
        last = idx[k];
        if (last != i) fused = g->nodes[last];
    }
    if (st == LOOM_OK && !queued) st = compute_node(be, node);
    *used = last - i + 1;
    if (st != LOOM_OK) {
        loom_log(LOOM_LOG_ERROR, "%s: node %d '%s' (%s%s%s) failed: %s", be->dev->name, i, node->name, loom_op_name(node->op),
                 fused ? "+" : "", fused ? loom_op_name(fused->op) : "", loom_status_str(st));
        return st;
    }
    for (int k = i; k <= last; k++) {
        if (is_skip(g->nodes[k])) continue;
        note_write(be, g->nodes[k]);
        be->cur.nodes++;
    }
    count_group(&be->cur, node->op, be->fusions);
    /* what a programmatic launch may follow: our own kernels (cuBLAS may queue other work) */
    be->pdl_prev = !be->memcpy_queued && !(node->op == LOOM_OP_MUL_MAT && !lc_mul_mat_is_matvec(node));
    if (be->prof) {
        profile_group(be, g, i, last);
        if (lc_profile_times_kernels(be->prof)) be->pdl_prev = false; /* an event follows */
    }
    return LOOM_OK;
}

static enum loom_status run_direct(struct lc_backend * be, struct loom_cgraph * g, int from, int * n_groups) {
    for (int i = from; i < g->n_nodes;) {
        if (is_skip(g->nodes[i])) {
            i++;
            continue;
        }
        int used = 1;
        enum loom_status st = launch_group(be, g, i, &used);
        if (st != LOOM_OK) return st;
        i += used;
        (*n_groups)++;
    }
    return LOOM_OK;
}

/* ---------------------------------------------------------------- CUDA graphs */

static uint64_t mix64(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0x100000001B3ull;
}

static void drop_chunk(struct lc_graph_chunk * c) {
    if (c->exec) cudaGraphExecDestroy(c->exec);
    c->exec = NULL;
    c->key = 0;
}

void lc_graphs_free(struct lc_backend * be) {
    for (int c = 0; c < LC_GRAPH_CHUNKS; c++) drop_chunk(&be->chunks[c]);
    be->n_chunks_replay = 0;
}

/* A tensor's address, type, op, shape and strides into the fingerprint. */
static void fp_tensor(struct loom_fp * f, const struct loom_tensor * t) {
    loom_fp_add(f, (uint64_t)(uintptr_t)t->data);
    loom_fp_add(f, (uint64_t)t->type << 32 | (uint64_t)t->op);
    for (int d = 0; d < 4; d++) {
        loom_fp_add(f, (uint64_t)t->ne[d]);
        loom_fp_add(f, (uint64_t)t->nb[d]);
    }
}

/* What the launches of 'g' depend on: every compute node's op, parameters, address, shape and
 * strides and those of its sources, and the scratch memory. Equal fingerprints: the same
 * kernels with the same arguments. The backend layer's lane hash (src/backend/hash.h): a 7B
 * step's nodes hash in about half the time one serial chain of mixes took
 * (bench/results/cuda-quant.md, session 19). */
static uint64_t graph_fingerprint(const struct lc_backend * be, const struct loom_cgraph * g) {
    struct loom_fp f;
    loom_fp_init(&f, (uint64_t)g->n_nodes);
    loom_fp_add(&f, (uint64_t)(uintptr_t)be->scratch);
    loom_fp_add(&f, (uint64_t)(uintptr_t)be->act8);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct loom_tensor * n = g->nodes[i];
        if (is_skip(n)) {
            loom_fp_add(&f, 1);
            continue;
        }
        loom_fp_add(&f, 2);
        fp_tensor(&f, n);
        for (size_t j = 0; j < LOOM_MAX_OP_PARAMS / sizeof(int32_t); j += 2) {
            loom_fp_add(&f, (uint64_t)(uint32_t)n->op_params[j] << 32 | (uint32_t)n->op_params[j + 1]);
        }
        for (int j = 0; j < LOOM_MAX_SRC; j++) {
            loom_fp_add(&f, (uint64_t)(uintptr_t)n->src[j]);
            if (n->src[j]) fp_tensor(&f, n->src[j]);
        }
    }
    return loom_fp_final(&f);
}

/* The fingerprint a replay is decided by: from the graph's launch key where its producer set one
 * (the scheduler, for its splits: one pass over the graph that it makes anyway, so a decode step
 * is not hashed a second time here; bench/results/cuda-quant.md, session 20), mixed with this
 * backend's scratch addresses; else graph_fingerprint. The two kinds never meet by accident: a
 * graph without a key after one with a key is captured again. */
static uint64_t launch_fingerprint(const struct lc_backend * be, const struct loom_cgraph * g) {
    if (!g->launch_key) return graph_fingerprint(be, g);
    struct loom_fp f;
    loom_fp_init(&f, g->launch_key);
    loom_fp_add(&f, (uint64_t)(uintptr_t)be->scratch);
    loom_fp_add(&f, (uint64_t)(uintptr_t)be->act8);
    return loom_fp_final(&f);
}

/* Launches the executable graphs of the last capture again; false when CUDA refuses. */
static bool replay(struct lc_backend * be) {
    for (int c = 0; c < be->n_chunks_replay; c++) {
        if (!be->chunks[c].exec || cudaGraphLaunch(be->chunks[c].exec, be->stream) != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
    }
    be->graph_replayed++;
    return true;
}

/* Graphs off for this backend; the work from node 'from' on is launched directly. */
static enum loom_status graphs_failed(struct lc_backend * be, struct loom_cgraph * g, int from, int * n_groups, const char * why) {
    loom_log(LOOM_LOG_WARN, "%s: CUDA graphs turned off (%s); launching kernels directly", be->dev->name, why);
    be->graphs = false;
    lc_graphs_free(be);
    be->pre_next.valid = be->q8_next.valid = false; /* left by a group of the capture that did not run */
    return run_direct(be, g, from, n_groups);
}

/* Launches the just-captured 'graph' through slot 'c': its executable graph updated in place when
 * it was made from the same launch sequence ('key'), else a new one. False when CUDA refuses. */
static bool launch_captured(struct lc_backend * be, struct lc_graph_chunk * c, cudaGraph_t graph, uint64_t key) {
    if (c->exec && c->key == key) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(c->exec, graph, &info) != cudaSuccess) {
            (void)cudaGetLastError(); /* e.g. another kernel variant: instantiate anew */
            loom_log(LOOM_LOG_DEBUG, "%s: CUDA graph chunk not updatable (cudaGraphExecUpdate result %d)", be->dev->name, (int)info.result);
            drop_chunk(c);
        } else {
            be->graph_updated++;
        }
    } else {
        if (c->exec) loom_log(LOOM_LOG_DEBUG, "%s: CUDA graph chunk has another launch sequence", be->dev->name);
        drop_chunk(c);
    }
    if (!c->exec) {
        if (cudaGraphInstantiate(&c->exec, graph, 0) != cudaSuccess) {
            (void)cudaGetLastError();
            c->exec = NULL;
            return false;
        }
        c->key = key;
        be->graph_instantiated++;
    }
    if (cudaGraphLaunch(c->exec, be->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        drop_chunk(c);
        return false;
    }
    return true;
}

/* Captures and launches the work of 'g' (fingerprint 'fp') chunk by chunk. */
static enum loom_status run_graphs(struct lc_backend * be, struct loom_cgraph * g, uint64_t fp, int * n_groups) {
    be->n_chunks_replay = 0;
    int i = 0, n_chunks = 0;
    for (int chunk = 0; i < g->n_nodes; chunk++) {
        /* chunks end at fixed node positions (the first launch group from there on), so that a
         * fusion that differs in one layer between two graphs changes one chunk's launch
         * sequence, not the boundaries and keys of every later chunk */
        const int limit = chunk < LC_GRAPH_CHUNKS - 1 ? LC_GRAPH_FIRST_NODES + chunk * LC_GRAPH_NODES : INT32_MAX;
        const int start = i;
        const struct loom_cuda_stats counted = be->cur; /* a chunk whose capture fails is counted where it is launched directly */
        if (cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
            (void)cudaGetLastError();
            return graphs_failed(be, g, start, n_groups, "stream capture refused");
        }
        be->capturing = true;
        be->pdl_prev = false; /* the chunk's first kernel follows another graph launch */
        uint64_t key = mix64(0x243F6A8885A308D3ull, (uint64_t)chunk);
        int groups = 0;
        enum loom_status st = LOOM_OK;
        while (i < g->n_nodes && (groups == 0 || i < limit)) {
            struct loom_tensor * node = g->nodes[i];
            if (is_skip(node)) {
                i++;
                continue;
            }
            int used = 1;
            st = launch_group(be, g, i, &used);
            if (st != LOOM_OK) break;
            key = mix64(mix64(key, (uint64_t)node->op), (uint64_t)used);
            i += used;
            groups++;
        }
        be->capturing = false;
        cudaGraph_t graph = NULL;
        const cudaError_t ce = cudaStreamEndCapture(be->stream, &graph);
        if (ce != cudaSuccess || !graph) { /* the capture broke: nothing of this chunk ran */
            (void)cudaGetLastError();
            be->cur = counted;
            return graphs_failed(be, g, start, n_groups, cudaGetErrorString(ce));
        }
        if (st != LOOM_OK || groups == 0) {
            cudaGraphDestroy(graph);
            return st;
        }
        key = mix64(key, (uint64_t)groups);
        const bool ok = launch_captured(be, &be->chunks[chunk], graph, key);
        cudaGraphDestroy(graph);
        if (!ok) {
            be->cur = counted;
            return graphs_failed(be, g, start, n_groups, "instantiation or launch refused");
        }
        *n_groups += groups;
        n_chunks = chunk + 1;
    }
    be->n_chunks_replay = n_chunks;
    be->replay_fp = fp;
    be->replay_stats = be->cur;
    return LOOM_OK;
}

/* ---------------------------------------------------------------- graph_compute */

/* Grows the device buffer '*buf' ('*size' bytes; 'what' names it in the error) to at least 'need'
 * bytes, a quarter more with 'slack', waiting for queued work that may still use the old one. */
static enum loom_status reserve_buffer(struct lc_backend * be, char ** buf, size_t * size, size_t need, bool slack, const char * what) {
    if (need <= *size) return LOOM_OK;
    LC_TRY(cudaStreamSynchronize(be->stream));
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *size = 0;
    const size_t want = slack ? need + need / 4 : need;
    void * p = NULL;
    if (cudaMalloc(&p, want) != cudaSuccess) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        loom_log(LOOM_LOG_ERROR, "%s (%s): cannot allocate %.2f MiB %s (%.2f MiB free)", be->dev->name, be->dev->description,
                 want / 1048576.0, what, fr / 1048576.0);
        return LOOM_ERR_OOM;
    }
    *buf = (char *)p;
    *size = want;
    return LOOM_OK;
}

/* Checks every node, reserves scratch, and says whether cuBLAS is used and rows are gathered. */
static enum loom_status prepare(struct lc_backend * be, struct loom_cgraph * g, bool * blas, bool * gathers, int * n_compute) {
    size_t scratch = 0, act8 = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        struct loom_tensor * node = g->nodes[i];
        if (is_skip(node)) continue;
        (*n_compute)++;
        if (!lc_supports_op(be->backend.device, node)) {
            loom_log(LOOM_LOG_ERROR, "%s: node %d '%s' (%s, %s) is not supported by this device", be->dev->name, i, node->name,
                     loom_op_name(node->op), loom_type_name(node->type));
            return LOOM_ERR_UNSUPPORTED;
        }
        if (node->op == LOOM_OP_MUL_MAT && lc_mul_mat_is_matvec(node)) {
            const struct loom_tensor * b = node->src[1];
            const size_t s = lc_matvec_q_act_bytes(node->src[0]->type, b->ne[0], b->ne[1], b->ne[2] * b->ne[3]);
            if (s > act8) act8 = s;
        }
        if (node->op == LOOM_OP_MUL_MAT && !lc_mul_mat_is_matvec(node)) {
            *blas = true;
            size_t s = lc_mul_mat_scratch(node);
            if (s > scratch) scratch = s;
        }
        if (node->op == LOOM_OP_FLASH_ATTN_EXT) { /* partial results of split KV cells */
            size_t s = lc_flash_attn_scratch(be, node);
            if (s > scratch) scratch = s;
        }
        *gathers = *gathers || node->op == LOOM_OP_GET_ROWS || node->op == LOOM_OP_SET_ROWS;
    }
    const enum loom_status st = reserve_buffer(be, &be->scratch, &be->scratch_size, scratch, true, "of scratch memory for mul_mat");
    return st != LOOM_OK ? st : reserve_buffer(be, &be->act8, &be->act8_size, act8, false, "for quantized activations");
}

/* The error flag's copy to the host, after work that may raise it. */
static enum loom_status queue_error_check(struct lc_backend * be) {
    LC_TRY(cudaMemcpyAsync(be->err_host, be->err_dev, sizeof(int), cudaMemcpyDeviceToHost, be->stream));
    LC_TRY(cudaMemsetAsync(be->err_dev, 0, sizeof(int), be->stream));
    be->err_pending = true;
    return LOOM_OK;
}

enum loom_status lc_graph_compute(struct lc_backend * be, struct loom_cgraph * g) {
    LC_TRY(cudaSetDevice(be->dev->id));
    /* the graph last captured, unchanged: its checks hold, replay it */
    const uint64_t fp = be->graphs ? launch_fingerprint(be, g) : 0;
    if (be->graphs && be->n_chunks_replay > 0 && fp == be->replay_fp) {
        be->pdl_prev = false;
        if (be->prof) lc_profile_begin(be, false);
        const bool ok = replay(be);
        if (be->prof) lc_profile_end(be, (int)be->replay_stats.nodes, (int)be->replay_stats.launches);
        if (ok) add_stats(&be->stats, &be->replay_stats);
        if (ok) return be->replay_gathers ? queue_error_check(be) : LOOM_OK;
        be->n_chunks_replay = 0; /* capture again below */
    }
    bool blas = false, gathers = false;
    int n_compute = 0, n_groups = 0;
    enum loom_status st = prepare(be, g, &blas, &gathers, &n_compute);
    if (st != LOOM_OK) return st;
    be->replay_gathers = gathers;
    be->conv.src = NULL; /* scratch from another compute may be stale */
    be->pre_next.valid = be->q8_next.valid = false;
    be->pdl_prev = false; /* copies or event waits may precede this compute's first kernel */
    memset(&be->cur, 0, sizeof be->cur);
    be->cur.computes = 1;
    if (be->prof) lc_profile_begin(be, blas);
    if (be->graphs && !blas && n_compute >= LC_GRAPH_MIN_NODES && !lc_profile_times_kernels(be->prof)) {
        st = run_graphs(be, g, fp, &n_groups);
    } else {
        st = run_direct(be, g, 0, &n_groups);
    }
    if (be->prof) lc_profile_end(be, n_compute, n_groups);
    add_stats(&be->stats, &be->cur);
    if (st != LOOM_OK) return st;
    return gathers ? queue_error_check(be) : LOOM_OK;
}
