/* cuda-common.cuh -- what every file of the CUDA backend shares: the device, buffer and backend
 * records, error checking, the tensor descriptor kernels take, element loads and stores, and
 * launch-shape helpers. Internal to src/cuda/. */
#ifndef LOOM_CUDA_COMMON_CUH
#define LOOM_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "backend/backend-impl.h"
#include "loom-cuda.h"
#include "cuda-fastdiv.h"
}

#define LC_MAX_DEVICES 16
#define LC_ALIGNMENT 256 /* bytes: alignment of every tensor address in device and pinned buffers */

/* ---------------------------------------------------------------- records */

struct lc_device {
    int id;                          /* CUDA ordinal */
    char name[16];                   /* "CUDA0" */
    char description[256];           /* the GPU's name */
    char host_buft_name[32];         /* "CUDA0_Host" */
    size_t max_size;                 /* bytes of one buffer; SIZE_MAX = unlimited */
    int sm_count;
    bool host_ptr_is_dev_ptr;        /* registered host memory has the same address on the device */
    bool register_read_only;         /* cudaHostRegisterReadOnly is supported */
    struct loom_backend_device dev;
    struct loom_backend_buffer_type buft;       /* device memory */
    struct loom_backend_buffer_type host_buft;  /* pinned host memory */
};

enum lc_buffer_kind {
    LC_BUFFER_DEVICE = 0,  /* cudaMalloc: tensor->data is a device address */
    LC_BUFFER_PINNED,      /* cudaHostAlloc: tensor->data is a host address */
    LC_BUFFER_MAPPED,      /* caller memory under cudaHostRegister: tensor->data is a host address */
};

struct lc_registration {             /* one cudaHostRegister call this buffer made */
    char * start;
    size_t size;                     /* bytes */
};

struct lc_buffer {
    struct lc_device * dev;
    enum lc_buffer_kind kind;
    char * base;                     /* address tensors use (see kind) */
    ptrdiff_t delta;                 /* device address = tensor->data + delta (0 for device memory) */
    bool read_only;                  /* the device may not write (registered read-only) */
    int n_regs;
    struct lc_registration * regs;   /* MAPPED only: the spans this buffer registered itself */
};

/* One piece of a graph_compute replayed as a CUDA graph (cuda-exec.cu). */
struct lc_graph_chunk {
    cudaGraphExec_t exec;            /* NULL: none instantiated yet */
    uint64_t key;                    /* the launch sequence 'exec' was instantiated from */
};

#define LC_GRAPH_CHUNKS 32
#define LC_CUBLAS_WORKSPACE ((size_t)32 << 20) /* bytes: what NVIDIA advises for Hopper */
#define LC_TAIL_COUNTERS 4096 /* arrival counters of kernels whose last block computes a fused node (cuda-mulmat.cu) */
#define LC_PRE_MAX_K 65536    /* the longest row a pre-norm takes (cuda-mulmat.cu), F32 elements */
#define LC_PRE_MAX_PARTS 8192 /* the most partial sums of squares a pre-norm takes */

/* What the last launch left for a pre-norm of the products after it (cuda-mulmat.cu): u = h * g in
 * be->pre_u and nparts sums of h^2 in be->pre_parts, for the norm of 'h' (device address, K
 * elements) with the weight row 'g'. */
struct lc_pre_handoff {
    bool valid;
    const char * h;
    const char * g;
    int64_t K;
    int nparts;
};

/* What the last launch left for the quantized product after it: the 8-bit runs (lc_a8 records,
 * one column) of its F32 result 'src' (device address, K elements) at 'rec' (one of
 * be->q8_hand), written by the launch itself (the attention of one token; a residual product's
 * RMS_PART tail, for u), so the product reading 'src' needs no quantization kernel of its own
 * (cuda-mulmat-plan.cu). */
struct lc_q8_handoff {
    bool valid;
    const char * src;
    int64_t K;
    char * rec;
};
#define LC_Q8_RUNS (LC_PRE_MAX_K / 32) /* the most runs of 32 a handoff's records take */

/* What the last cuBLAS product left in scratch: 'src' converted to 'type' at scratch + 'off'
 * (cuda-mulmat.cu); reused by the next product of the same source in the same compute. */
struct lc_conv_cache {
    const struct loom_tensor * src;  /* NULL: nothing valid */
    const char * data;               /* device address of the source */
    char * lo, * hi;                 /* byte extent of the source (invalidated by writes there) */
    int type;
    size_t off;                      /* bytes into scratch */
};

struct lc_profile;                   /* cuda-profile.cu */

/* A backend's options: the init parameters (loom-cuda.h), parsed when the backend is created. */
struct lc_options {
    bool graphs;                     /* graphs=0: kernels launched directly, never captured */
    bool fuse;                       /* fuse=0: one kernel per node (no fusion of any kind) */
    int profile;                     /* profile=1: per-kernel GPU times, 2: host times; 0 off */
    int mv_blocks;                   /* mv_blocks=N: at most N blocks per persistent product (tests); 0: as many as fit */
};

struct lc_backend {
    struct lc_device * dev;
    cudaStream_t stream;
    cublasHandle_t cublas;
    void * cublas_ws;                /* cuBLAS workspace, LC_CUBLAS_WORKSPACE bytes (NULL: cuBLAS's own) */
    char * scratch;                  /* device memory for per-op temporaries (converted operands) */
    size_t scratch_size;             /* bytes */
    char * act8;                     /* the 8-bit activations of a quantized matrix-vector product (cuda-matvec-q.cu) */
    size_t act8_size;                /* bytes */
    int * err_dev;                   /* device flag row kernels raise (LC_ERR_GET_ROWS, LC_ERR_SET_ROWS) */
    int * err_host;                  /* pinned copy read at synchronize */
    bool err_pending;                /* a copy of err_dev into err_host is queued */
    unsigned * tail_count;           /* LC_TAIL_COUNTERS device counters, zero between launches (cuda-mulmat.cu) */
    struct lc_options opts;
    bool graphs;                     /* replay token-generation splits as CUDA graphs (opts.graphs, off after a failure) */
    float * pre_u;                   /* LC_PRE_MAX_K device floats: a pre-norm's activations */
    float * pre_parts;               /* LC_PRE_MAX_PARTS device floats: its partial sums of squares */
    struct lc_pre_handoff pre_next;  /* set by the launch group being queued */
    struct lc_pre_handoff pre_avail; /* left by the launch group queued before it */
    char * q8_hand[2];               /* LC_Q8_RUNS lc_a8 records each: those of a lc_q8_handoff (lc_q8_free) */
    struct lc_q8_handoff q8_next;    /* set by the launch group being queued */
    struct lc_q8_handoff q8_avail;   /* left by the launch group queued before it */
    bool capturing;                  /* kernels are being captured: no memcpy nodes, no syncs */
    bool pdl_prev;                   /* the last work queued on the stream is one of our kernels (not a copy) */
    bool memcpy_queued;              /* a cudaMemcpyAsync was queued by the launch group in progress */
    struct lc_graph_chunk chunks[LC_GRAPH_CHUNKS];
    int n_chunks_replay;             /* chunks the last captured compute used; 0: nothing to replay */
    uint64_t replay_fp;              /* fingerprint of that compute's graph (cuda-exec.cu) */
    bool replay_gathers;             /* that graph has row kernels that may raise err_dev */
    int64_t graph_instantiated, graph_updated, graph_replayed; /* chunks made anew / updated in place / computes replayed (profile) */
    struct lc_conv_cache conv;
    struct lc_profile * prof;        /* opts.profile, else NULL */
    /* loom_cuda_get_stats: the sums (stats), the compute being planned (cur), what the last
     * captured compute counted (replay: added again by each replay of it); fusions: the
     * LOOM_CUDA_FUSION_* bits the planner set for the launch group being queued (cuda-exec.cu) */
    struct loom_cuda_stats stats, cur, replay_stats;
    unsigned fusions;
    struct loom_backend backend;
};

/* Notes that the launch group being queued carries fusion 'f' (for loom_cuda_get_stats). */
static inline void lc_note_fusion(struct lc_backend * be, enum loom_cuda_fusion f) { be->fusions |= 1u << f; }

/* The record buffer of be->q8_hand the launch group being queued may write: not the one the group
 * before left (q8_avail), which this group's kernels may still read while it writes; every
 * earlier kernel has ended by then (its writes come after its wait for the kernel before). */
static inline char * lc_q8_free(const struct lc_backend * be) {
    return be->q8_avail.valid && be->q8_avail.rec == be->q8_hand[0] ? be->q8_hand[1] : be->q8_hand[0];
}

/* What the launch group being queued leaves for the next one: the records of 'src' (K elements) at 'rec'. */
static inline void lc_q8_leave(struct lc_backend * be, const char * src, int64_t K, char * rec) {
    be->q8_next.valid = true;
    be->q8_next.src = src;
    be->q8_next.K = K;
    be->q8_next.rec = rec;
}

/* ---------------------------------------------------------------- errors */

/* Logs a failed CUDA runtime call ('call' is its text, 'where' the function) and returns
 * LOOM_ERR_BACKEND; LOOM_OK for cudaSuccess. Clears the error so later calls are not blamed. */
enum loom_status lc_check(cudaError_t err, const char * call, const char * where);
enum loom_status lc_check_cublas(cublasStatus_t st, const char * call, const char * where);
#define LC_CHECK(call) lc_check((call), #call, __func__)
#define LC_CHECK_CUBLAS(call) lc_check_cublas((call), #call, __func__)
/* Returns from the enclosing function when 'call' fails. */
#define LC_TRY(call)                                                   \
    do {                                                               \
        enum loom_status lc_st_ = LC_CHECK(call);                      \
        if (lc_st_ != LOOM_OK) return lc_st_;                          \
    } while (0)

/* ---------------------------------------------------------------- buffers (cuda-buffer.cu) */

void lc_buffer_types_init(struct lc_device * d);
/* The CUDA buffer behind 'buffer', or NULL when it is not one of ours. */
struct lc_buffer * lc_buffer_of(loom_backend_buffer_t buffer);
bool lc_buft_is_host(loom_backend_buffer_type_t buft);     /* a CUDA pinned host buffer type */
loom_backend_buffer_t lc_buffer_from_host_ptr(loom_backend_dev_t dev, void * ptr, size_t size);

/* ---------------------------------------------------------------- devices and execution */

/* The device's answer to supports_op (cuda-device.cu). */
bool lc_supports_op(loom_backend_dev_t dev, const struct loom_tensor * op);
struct loom_backend_comm;
/* The module's comm_init (cuda-module.h): NCCL where the build has it (cuda-nccl.cu). */
enum loom_status lc_comm_init(struct loom_backend_comm * comm);
/* Queues every node of 'g' on the backend's stream (cuda-exec.cu); nothing waits for the device. */
enum loom_status lc_graph_compute(struct lc_backend * be, struct loom_cgraph * g);
/* Destroys the backend's executable CUDA graphs. */
void lc_graphs_free(struct lc_backend * be);
/* The module's get_stats (cuda-module.h): the counts of CUDA backend 'backend'. */
void lc_get_stats(loom_backend_t backend, struct loom_cuda_stats * stats);

/* ---------------------------------------------------------------- the tensor descriptor */

/* What a kernel needs of one tensor, passed by value. */
struct lc_tensor {
    char * data;       /* device address of element (0, 0, 0, 0) */
    int type;          /* enum loom_type */
    int64_t ne[4];     /* elements */
    int64_t nb[4];     /* bytes */
};

/* True when 't' is a model weight (flagged, or in a weights buffer): nothing in a graph writes it. */
bool lc_is_weight(const struct loom_tensor * t);

/* Describes 't' for kernels: resolves its storage (views through their base), translates host
 * addresses of pinned and mapped buffers to device addresses, and checks that 'be' can read it
 * (and write it when 'write'). Errors: LOOM_ERR_INVALID_ARG (no data), LOOM_ERR_UNSUPPORTED (a
 * buffer this device cannot reach, a misaligned address). */
enum loom_status lc_tensor_of(const struct lc_backend * be, const struct loom_tensor * t, bool write, struct lc_tensor * out);
/* The views of node 'dst' (written) and of its sources 0 and 1 (read): lc_tensor_of for each; when
 * the node has no second source, '*s1' is set to '*s0' (present but unused). */
enum loom_status lc_operands_of(const struct lc_backend * be, const struct loom_tensor * dst, struct lc_tensor * s0, struct lc_tensor * s1,
                                struct lc_tensor * d);
/* A contiguous descriptor of shape 'ne' and 'type' at device address 'data'. */
struct lc_tensor lc_tensor_contiguous(void * data, int type, const int64_t * ne);
static inline int64_t lc_nelements(const struct lc_tensor * t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
static inline int64_t lc_nrows(const struct lc_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }
bool lc_is_contiguous(const struct lc_tensor * t);
/* True for F32, F16 and BF16 (the float types the kernels read and write). */
bool lc_is_float_type(int type);
/* True when every stride of 't' is a multiple of its element size (plain types only). */
bool lc_strides_ok(const struct loom_tensor * t);

/* ---------------------------------------------------------------- device helpers */

__device__ __forceinline__ float lc_load(const char * p, int type) {
    if (type == LOOM_TYPE_F32) return *(const float *)p;
    if (type == LOOM_TYPE_F16) return __half2float(*(const __half *)p);
    return __bfloat162float(*(const __nv_bfloat16 *)p);
}

__device__ __forceinline__ void lc_store(char * p, int type, float v) {
    if (type == LOOM_TYPE_F32) *(float *)p = v;
    else if (type == LOOM_TYPE_F16) *(__half *)p = __float2half_rn(v);
    else *(__nv_bfloat16 *)p = __float2bfloat16_rn(v);
}

/* Byte offset of row 'r' (over dims 1..3 in order) of 't'. */
__device__ __forceinline__ int64_t lc_row_offset(const struct lc_tensor & t, int64_t r) {
    int64_t i1 = r % t.ne[1];
    int64_t i23 = r / t.ne[1];
    int64_t i2 = i23 % t.ne[2];
    int64_t i3 = i23 / t.ne[2];
    return i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

/* SiLU and tanh-GELU, shared by the element-wise kernels and the fused epilogues so that both
 * round alike. */
__device__ __forceinline__ float lc_silu(float x) { return x / (1.0f + __expf(-x)); }
__device__ __forceinline__ float lc_gelu(float x) {
    /* 0.5 x (1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) */
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + __expf(-2.0f * u));
}

__device__ __forceinline__ float lc_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float lc_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum (MAX false) or maximum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. 'shared' holds 32 floats. */
template <bool MAX> __device__ __forceinline__ float lc_block_reduce(float v, float * shared) {
    v = MAX ? lc_warp_max(v) : lc_warp_sum(v);
    if (blockDim.x == 32) return v;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? shared[lane] : MAX ? -INFINITY : 0.0f;
    return MAX ? lc_warp_max(v) : lc_warp_sum(v);
}

__device__ __forceinline__ float lc_block_sum(float v, float * shared) { return lc_block_reduce<false>(v, shared); }
__device__ __forceinline__ float lc_block_max(float v, float * shared) { return lc_block_reduce<true>(v, shared); }

/* ---------------------------------------------------------------- memory extents */

/* How two tensors' bytes relate: disjoint, the very same elements (same address, type, shape
 * and strides: an element-wise kernel may read one and write the other in place), or any other
 * overlap. */
enum lc_overlap { LC_DISJOINT = 0, LC_SAME, LC_PARTIAL };
enum lc_overlap lc_overlap_of(const struct lc_tensor * a, const struct lc_tensor * b);
/* First byte and one past the last byte 't' spans. */
void lc_extent(const struct lc_tensor * t, char ** lo, char ** hi);

/* ---------------------------------------------------------------- fused copies */

/* Values of the backend's error flag (err_dev) that row kernels raise; the first one raised is kept. */
enum { LC_ERR_GET_ROWS = 1, LC_ERR_SET_ROWS = 2 };

/* A copy fused into the kernel that produces its source: element at byte offset 'o' of the dense
 * producer output goes to data + sum_k ((o / snb[k]) % sne[k]) * dnb[k] (dims with sne 1 are
 * skipped), converted to 'type'. Describes CPY/DUP/CONT of a dense permutation (a reshape,
 * transpose or permute view) of the producer's output, and SET_ROWS of one: there the index of
 * dimension 'rows_dim' is replaced by the row id it names (int32 at rows + index * rows_nb); an
 * id outside [0, rows_max) stores nothing and raises 'err'. */
enum { LC_SCATTER_ROW0 = -2 };
struct lc_scatter {
    char * data;
    int type;
    int64_t sne[4], snb[4];          /* the view the copy reads: elements, bytes */
    int64_t dnb[4];                  /* bytes in the destination per step of each view index */
    int rows_dim;                    /* SET_ROWS: the view's row dimension; -1 otherwise */
    const char * rows;
    int64_t rows_nb, rows_max;
    int * err;
    /* the same map without 64-bit divisions, set when the producer has fewer than 2^32 elements:
     * the element index o / 4 splits in mixed radix over the view's 'nfd' dims of more than one
     * element, smallest stride first (radix fd[x]), index x going 'pdnb[x]' bytes; x == 'prow' is
     * the SET_ROWS dimension (-1: none; LC_SCATTER_ROW0: a single row, whose id every element takes);
     * nfd -1: the map above */
    int nfd, prow;
    struct lc_fastdiv fd[4];
    int64_t pdnb[4];
};

/* Fills 's' for copy node 'cpy' (CPY, DUP, CONT or SET_ROWS) when its source is a dense
 * permutation of exactly the bytes of 'prod' (a contiguous F32 tensor computed by the same kernel)
 * and its destination is disjoint from 'prod'; false otherwise (the copy then runs on its own). */
bool lc_scatter_for(const struct lc_backend * be, const struct loom_tensor * cpy, const struct lc_tensor * prod, struct lc_scatter * s);

/* True when copy node 'cpy' reads 'prod' itself or a view of it (lc_scatter_for checks the bytes). */
static inline bool lc_reads_result_of(const struct loom_tensor * cpy, const struct loom_tensor * prod) {
    return cpy->src[0] && (cpy->src[0] == prod || cpy->src[0]->view_src == prod);
}

/* Stores 'v', the producer's element at byte offset 'o', where 's' sends it. */
__device__ __forceinline__ void lc_scatter_store(const struct lc_scatter & s, int64_t o, float v) {
    int64_t off = 0;
    if (s.nfd >= 0) {
        uint32_t e = (uint32_t)(o >> 2);
        int64_t row = s.prow == LC_SCATTER_ROW0 ? 0 : -1; /* the SET_ROWS index */
#pragma unroll
        for (int x = 0; x < 4; x++) {
            if (x >= s.nfd) break;
            uint32_t i = e, q = 0;
            if (x + 1 < s.nfd) i = lc_fastdiv_qr(e, s.fd[x], &q);
            e = q;
            if (x == s.prow) row = i;
            else off += (int64_t)i * s.pdnb[x];
        }
        if (row >= 0) {
            const int32_t id = *(const int32_t *)(s.rows + row * s.rows_nb);
            if (id < 0 || id >= s.rows_max) {
                atomicCAS(s.err, 0, LC_ERR_SET_ROWS);
                return;
            }
            off += id * s.dnb[s.rows_dim];
        }
        lc_store(s.data + off, s.type, v);
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (k == s.rows_dim) {
            const int32_t id = *(const int32_t *)(s.rows + ((o / s.snb[k]) % s.sne[k]) * s.rows_nb);
            if (id < 0 || id >= s.rows_max) {
                atomicCAS(s.err, 0, LC_ERR_SET_ROWS);
                return;
            }
            off += id * s.dnb[k];
        } else if (s.sne[k] > 1) {
            off += ((o / s.snb[k]) % s.sne[k]) * s.dnb[k];
        }
    }
    lc_store(s.data + off, s.type, v);
}

/* ---------------------------------------------------------------- programmatic dependent launch
 * Every kernel lets the next one launch as soon as all its blocks have started; a kernel launched
 * with cudaLaunchAttributeProgrammaticStreamSerialization (the matrix-vector kernels) must wait
 * for its predecessor's completion before it reads what that wrote or writes anything. Both are
 * no-ops where nothing is programmatic. */
__device__ __forceinline__ void lc_pdl_trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void lc_pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Launches kernel 'func' with its arguments 'args' (pointers to each, in order) on the backend's
 * stream -- programmatically when PDL is on and the last work queued is one of our kernels, so it
 * may start while that one drains: every kernel launched this way calls lc_pdl_wait() before it
 * touches memory. 'smem': bytes of dynamic shared memory. A launch error is left for LC_CHECK_LAUNCH. */
void lc_launch(const struct lc_backend * be, const void * func, dim3 grid, dim3 block, void ** args, size_t smem = 0);

/* ---------------------------------------------------------------- launch shapes */

/* A 2-D launch over [ne0, nrows]: threads along x cover elements of a row, threads along y and
 * the grid's y cover rows (kernels loop over rows with stride gridDim.y * blockDim.y). */
struct lc_rows_launch {
    dim3 grid, block;
};
struct lc_rows_launch lc_rows_launch_for(int64_t ne0, int64_t nrows);
/* Blocks of 256 threads for a flat loop over 'n' elements (grid-stride beyond 2^20 blocks). */
static inline unsigned lc_flat_blocks(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > (1 << 20) ? (1 << 20) : b);
}

/* Checks the last launch; logs naming 'what' on failure. */
#define LC_CHECK_LAUNCH(what) lc_check(cudaGetLastError(), what, __func__)

#endif
