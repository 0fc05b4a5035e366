/* cuda-attn.cu -- the attention of one token (token generation) in one kernel: scores against the
 * cached keys, the masked softmax and the weighted sum of the cached values, for each query head
 * in its own block (a head's keys and values are read once, from one block). It replaces four
 * launches per layer (KQ product, softmax, KQV product, merge of heads) whose fixed costs
 * dominate at the short lengths of token generation; longer contexts keep the separate kernels,
 * which spread each product over the whole GPU. Off by default (LOOM_CUDA_ATTN=1 turns it on):
 * on an H200 with CUDA graphs and programmatic launches, 7B F16 tg128 measured 198.8 / 205.2 /
 * 205.8 t/s with it against 203.3 / 206.3 / 208.0 without (three sittings): the separate kernels
 * already overlap the next product's weight loads, and 32 blocks stream the cache more slowly. */
#include "cuda-attn.cuh"

#include <string.h>

#define LC_ATTN_THREADS 128
#define LC_ATTN_MAX_KV 2048   /* cells: the scores live in shared memory (8 KiB) */
#define LC_ATTN_MAX_HEAD 256  /* head_dim */

struct lc_attn_args {
    const char * q;                  /* F32: element (d, head h) at q + d * q_nb0 + h * q_nb2 */
    int64_t q_nb0, q_nb2;
    const char * k;                  /* key j of kv head g, element d: k + d * es + j * k_nb1 + g * k_nb2 */
    int64_t k_nb1, k_nb2;
    const char * v;                  /* value of position j, channel d, kv head g: v + j * es + d * v_nb1 + g * v_nb2 */
    int64_t v_nb1, v_nb2;
    const char * mask;               /* NULL or mask + j * es_mask + (h % mask_ne2) * mask_nb2 */
    int mask_type;
    int64_t mask_nb0, mask_nb2, mask_ne2;
    char * kq;                       /* F32 raw scores, (j, h) at kq + j * 4 + h * kq_nb2 */
    int64_t kq_nb2;
    char * sm;                       /* F32 probabilities, same layout (sm_nb2); may equal kq */
    int64_t sm_nb2;
    char * kqv;                      /* F32 result, (d, h) at kqv + d * 4 + h * kqv_nb2 */
    int64_t kqv_nb2;
    struct lc_scatter sc;            /* the merge of heads, when has_sc */
    int has_sc;
    int n_kv, head_dim, group;       /* group = n_head / n_head_kv */
    float scale;
};

/* Eight (F16) or four (F32) cache elements of one 16-byte load, as floats. */
template <typename T> struct lc_attn_vec;
template <> struct lc_attn_vec<float> {
    static const int n = 4;
    static __device__ __forceinline__ void get(const char * p, float * f) {
        const float4 v = *(const float4 *)p;
        f[0] = v.x;
        f[1] = v.y;
        f[2] = v.z;
        f[3] = v.w;
    }
    static __device__ __forceinline__ float one(const char * p) { return *(const float *)p; }
};
template <> struct lc_attn_vec<__half> {
    static const int n = 8;
    static __device__ __forceinline__ void get(const char * p, float * f) {
        const uint4 v = *(const uint4 *)p;
        const __half2 * h = (const __half2 *)&v;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 t = __half22float2(h[i]);
            f[2 * i] = t.x;
            f[2 * i + 1] = t.y;
        }
    }
    static __device__ __forceinline__ float one(const char * p) { return __half2float(*(const __half *)p); }
};

template <typename T>
__global__ void __launch_bounds__(LC_ATTN_THREADS) lc_attn_kernel(struct lc_attn_args p) {
    __shared__ float qs[LC_ATTN_MAX_HEAD];
    __shared__ float s[LC_ATTN_MAX_KV];
    __shared__ float red[32];
    lc_pdl_trigger();
    lc_pdl_wait();
    const int h = blockIdx.x, g = h / p.group, tid = threadIdx.x;
    const int V = lc_attn_vec<T>::n, es = (int)sizeof(T);
    for (int d = tid; d < p.head_dim; d += blockDim.x) qs[d] = *(const float *)(p.q + d * p.q_nb0 + h * p.q_nb2);
    __syncthreads();

    /* scores: a thread per key, its row read in 16-byte loads */
    const char * kb = p.k + g * p.k_nb2;
    float mx = -INFINITY;
    for (int j = tid; j < p.n_kv; j += blockDim.x) {
        const char * kr = kb + j * p.k_nb1;
        float acc = 0.0f;
        for (int d = 0; d < p.head_dim; d += V) {
            float f[lc_attn_vec<T>::n];
            lc_attn_vec<T>::get(kr + d * es, f);
#pragma unroll
            for (int x = 0; x < lc_attn_vec<T>::n; x++) acc += f[x] * qs[d + x];
        }
        *(float *)(p.kq + j * 4 + h * p.kq_nb2) = acc;
        float x = acc * p.scale;
        if (p.mask) x += lc_load(p.mask + j * p.mask_nb0 + (h % p.mask_ne2) * p.mask_nb2, p.mask_type);
        s[j] = x;
        mx = fmaxf(mx, x);
    }
    mx = lc_block_max(mx, red);

    /* softmax; a row with every cell masked gives zeros */
    float sum = 0.0f;
    for (int j = tid; j < p.n_kv; j += blockDim.x) {
        const float e = mx == -INFINITY ? 0.0f : expf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    sum = lc_block_sum(sum, red);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    __syncthreads(); /* every raw score is written before the probabilities may replace them */
    for (int j = tid; j < p.n_kv; j += blockDim.x) {
        s[j] *= inv;
        *(float *)(p.sm + j * 4 + h * p.sm_nb2) = s[j];
    }
    __syncthreads();

    /* out[d] = sum_j p_j V[j, d]: a thread per channel, each channel's positions contiguous */
    const char * vb = p.v + g * p.v_nb2;
    for (int d = tid; d < p.head_dim; d += blockDim.x) {
        const char * vr = vb + d * p.v_nb1;
        float acc = 0.0f;
        int j = 0;
        for (; j + V <= p.n_kv; j += V) {
            float f[lc_attn_vec<T>::n];
            lc_attn_vec<T>::get(vr + j * es, f);
#pragma unroll
            for (int x = 0; x < lc_attn_vec<T>::n; x++) acc += f[x] * s[j + x];
        }
        for (; j < p.n_kv; j++) acc += lc_attn_vec<T>::one(vr + j * es) * s[j];
        const int64_t o = d * 4 + h * p.kqv_nb2;
        *(float *)(p.kqv + o) = acc;
        if (p.has_sc) lc_scatter_store(p.sc, o, acc);
    }
}

/* ---------------------------------------------------------------- matching the pattern */

static bool aligned16(const char * p, int64_t nb) { return (uintptr_t)p % 16 == 0 && nb % 16 == 0; }

enum loom_status lc_attn_fused(struct lc_backend * be, struct loom_tensor * kq, struct loom_tensor * sm, struct loom_tensor * kqv,
                               struct loom_tensor * cont, int * fused) {
    *fused = 0;
    if (kq->op != LOOM_OP_MUL_MAT || sm->op != LOOM_OP_SOFT_MAX || sm->src[0] != kq || kqv->op != LOOM_OP_MUL_MAT || kqv->src[1] != sm) {
        return LOOM_OK;
    }
    const struct loom_tensor *K = kq->src[0], *Q = kq->src[1], *Vt = kqv->src[0], *M = sm->src[1];
    const int64_t hd = K->ne[0], n_kv = K->ne[1], n_head = Q->ne[2], n_head_kv = K->ne[2];
    if (K->type != Vt->type || (K->type != LOOM_TYPE_F16 && K->type != LOOM_TYPE_F32) || Q->type != LOOM_TYPE_F32) return LOOM_OK;
    if (Q->ne[1] != 1 || Q->ne[3] != 1 || K->ne[3] != 1 || Vt->ne[3] != 1 || n_head_kv < 1 || n_head % n_head_kv != 0) return LOOM_OK;
    if (Vt->ne[0] != n_kv || Vt->ne[1] != hd || Vt->ne[2] != n_head_kv || kqv->ne[0] != hd || kqv->ne[1] != 1 || kqv->ne[2] != n_head) {
        return LOOM_OK;
    }
    const int64_t es = (int64_t)loom_type_size(K->type), V = 16 / es;
    if (hd > LC_ATTN_MAX_HEAD || hd % V != 0 || n_kv < 1 || n_kv > LC_ATTN_MAX_KV || K->nb[0] != (size_t)es || Vt->nb[0] != (size_t)es) {
        return LOOM_OK;
    }
    if (M && (M->type != LOOM_TYPE_F32 && M->type != LOOM_TYPE_F16)) return LOOM_OK;
    struct lc_tensor k, q, v, m, tkq, tsm, tkqv, tc;
    if (lc_tensor_of(be, K, false, &k) != LOOM_OK || lc_tensor_of(be, Q, false, &q) != LOOM_OK ||
        lc_tensor_of(be, Vt, false, &v) != LOOM_OK || (M && lc_tensor_of(be, M, false, &m) != LOOM_OK) ||
        lc_tensor_of(be, kq, true, &tkq) != LOOM_OK || lc_tensor_of(be, sm, true, &tsm) != LOOM_OK ||
        lc_tensor_of(be, kqv, true, &tkqv) != LOOM_OK) {
        return LOOM_OK;
    }
    if (!lc_is_contiguous(&tkq) || !lc_is_contiguous(&tsm) || !lc_is_contiguous(&tkqv)) return LOOM_OK;
    if (!aligned16(k.data, k.nb[1]) || k.nb[2] % 16 != 0 || !aligned16(v.data, v.nb[1]) || v.nb[2] % 16 != 0) return LOOM_OK;
    /* what blocks write must not be what other blocks read, nor what another result occupies
     * (the probabilities may replace the scores in place: each block orders its own writes) */
    const struct lc_tensor * ins[4] = {&k, &q, &v, M ? &m : &k};
    const struct lc_tensor * outs[3] = {&tkq, &tsm, &tkqv};
    for (int o = 0; o < 3; o++) {
        for (int i = 0; i < 4; i++) {
            if (lc_overlap_of(outs[o], ins[i]) != LC_DISJOINT) return LOOM_OK;
        }
    }
    const enum lc_overlap kq_sm = lc_overlap_of(&tkq, &tsm);
    if (kq_sm == LC_PARTIAL || lc_overlap_of(&tkq, &tkqv) != LC_DISJOINT || lc_overlap_of(&tsm, &tkqv) != LC_DISJOINT) return LOOM_OK;

    struct lc_attn_args p;
    memset(&p, 0, sizeof p);
    p.sc.rows_dim = -1;
    if (cont && lc_reads_result_of(cont, kqv) && lc_scatter_for(be, cont, &tkqv, &p.sc) && lc_tensor_of(be, cont, true, &tc) == LOOM_OK) {
        bool ok = lc_overlap_of(&tc, &tkq) == LC_DISJOINT && lc_overlap_of(&tc, &tsm) == LC_DISJOINT;
        for (int i = 0; i < 4 && ok; i++) ok = lc_overlap_of(&tc, ins[i]) == LC_DISJOINT;
        p.has_sc = ok;
    }
    p.q = q.data;
    p.q_nb0 = q.nb[0];
    p.q_nb2 = q.nb[2];
    p.k = k.data;
    p.k_nb1 = k.nb[1];
    p.k_nb2 = k.nb[2];
    p.v = v.data;
    p.v_nb1 = v.nb[1];
    p.v_nb2 = v.nb[2];
    if (M) {
        p.mask = m.data;
        p.mask_type = m.type;
        p.mask_nb0 = m.nb[0];
        p.mask_nb2 = m.nb[2];
        p.mask_ne2 = m.ne[2];
    } else {
        p.mask_ne2 = 1;
    }
    p.kq = tkq.data;
    p.kq_nb2 = tkq.nb[2];
    p.sm = tsm.data;
    p.sm_nb2 = tsm.nb[2];
    p.kqv = tkqv.data;
    p.kqv_nb2 = tkqv.nb[2];
    p.n_kv = (int)n_kv;
    p.head_dim = (int)hd;
    p.group = (int)(n_head / n_head_kv);
    p.scale = loom_get_op_param_f32(sm, 0);
    void * args[] = {&p};
    const void * fn = K->type == LOOM_TYPE_F16 ? (const void *)lc_attn_kernel<__half> : (const void *)lc_attn_kernel<float>;
    lc_launch(be, fn, dim3((unsigned)n_head), dim3(LC_ATTN_THREADS), args);
    *fused = p.has_sc ? 3 : 2;
    return LC_CHECK_LAUNCH("lc_attn_kernel");
}
