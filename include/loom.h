/* loom.h -- Loom's tensor core: status codes, logging, types, contexts, tensors, ops, graphs.
 *
 * Conventions used throughout (the field's, as in ggml and GGUF):
 *  - 'ne[i]' is the number of elements along dimension i; dimension 0 is the contiguous one.
 *  - 'nb[i]' is the stride in bytes of dimension i; for a block type nb[0] is the block size in
 *    bytes and ne[0] counts elements (a multiple of the block length).
 *  - Shapes in docs are written in ne order: [ne0, ne1, ne2, ne3].
 *  - A view shares its base's storage: 'view_src' is always the base (never another view) and
 *    'view_offs' is the absolute byte offset into the base's data.
 *
 * Errors: anything the outside world can cause is returned as 'enum loom_status' (or NULL plus a
 * logged reason); broken invariants inside the library abort through LOOM_ASSERT with file:line.
 * The library never prints to stdout and never exits; it logs through 'loom_log_set'.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* LOOM_API marks the public API: the functions libloom.so exports. The library is compiled with
 * hidden visibility, so every other function (internal, whatever its name) stays inside it. */
#if defined(__GNUC__) || defined(__clang__)
#define LOOM_API __attribute__((visibility("default")))
#else
#define LOOM_API
#endif

#define LOOM_MAX_DIMS 4
#define LOOM_MAX_SRC 6
#define LOOM_MAX_OP_PARAMS 64 /* bytes */
#define LOOM_MAX_NAME 64
#define LOOM_DEFAULT_GRAPH_SIZE 4096
#define LOOM_MEM_ALIGN 64 /* bytes: alignment of data allocated by a context */

/* ---------------------------------------------------------------- status and logging */

enum loom_status {
    LOOM_OK = 0,
    LOOM_ERR_INVALID_ARG,  /* a bad argument: shape, flag, offset out of range */
    LOOM_ERR_OOM,          /* host or device memory exhausted */
    LOOM_ERR_IO,           /* open/read/write/mmap failed */
    LOOM_ERR_FORMAT,       /* malformed file (GGUF, checkpoint, tokenizer) */
    LOOM_ERR_UNSUPPORTED,  /* valid, but not something Loom (or this device) supports */
    LOOM_ERR_TOO_LARGE,    /* a tensor larger than a buffer type's max_size, a prompt longer than the context */
    LOOM_ERR_CANCELLED,    /* a progress callback asked to stop */
    LOOM_ERR_BACKEND,      /* a device reported a failure */
    LOOM_STATUS_COUNT
};

/* Returns a short constant description of 's' ("ok", "out of memory", ...); never NULL. */
LOOM_API const char * loom_status_str(enum loom_status s);

enum loom_log_level {
    LOOM_LOG_DEBUG = 0,
    LOOM_LOG_INFO,
    LOOM_LOG_WARN,
    LOOM_LOG_ERROR,
    LOOM_LOG_LEVEL_COUNT
};

/* 'text' is one complete message without a trailing newline. */
typedef void (*loom_log_callback)(enum loom_log_level level, const char * text, void * user_data);

/* Sets where library messages go. NULL restores the default (stderr, INFO and above; DEBUG when
 * the environment variable LOOM_DEBUG is set). Not thread-safe against concurrent logging. */
LOOM_API void loom_log_set(loom_log_callback cb, void * user_data);
/* The callback and user data in use (NULL: the default), so that a caller can divert messages
 * for a while and then put them back with loom_log_set. */
LOOM_API void loom_log_get(loom_log_callback * cb, void ** user_data);

/* Logs a printf-style message through the current callback. */
LOOM_API void loom_log(enum loom_log_level level, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Aborts with file:line and a message; for broken invariants only, never for bad input. */
LOOM_API void loom_abort(const char * file, int line, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4), noreturn))
#endif
    ;

#define LOOM_ABORT(...) loom_abort(__FILE__, __LINE__, __VA_ARGS__)
#define LOOM_ASSERT(x)                                       \
    do {                                                     \
        if (!(x)) loom_abort(__FILE__, __LINE__, "assertion failed: %s", #x); \
    } while (0)

/* ---------------------------------------------------------------- types */

/* Tensor element types. The values are the GGUF type ids (GGUF spec, "ggml_type"); ids the
 * format has retired (4, 5, 31-33, 36-38) are gaps. The traits table knows block length and
 * block size of every id listed here, so files holding any of them can be validated and
 * described; compute support is narrower (see 'loom_type_traits.to_float'). */
enum loom_type {
    LOOM_TYPE_F32 = 0,
    LOOM_TYPE_F16 = 1,
    LOOM_TYPE_Q4_0 = 2,
    LOOM_TYPE_Q4_1 = 3,
    LOOM_TYPE_Q5_0 = 6,
    LOOM_TYPE_Q5_1 = 7,
    LOOM_TYPE_Q8_0 = 8,
    LOOM_TYPE_Q8_1 = 9,
    LOOM_TYPE_Q2_K = 10,
    LOOM_TYPE_Q3_K = 11,
    LOOM_TYPE_Q4_K = 12,
    LOOM_TYPE_Q5_K = 13,
    LOOM_TYPE_Q6_K = 14,
    LOOM_TYPE_Q8_K = 15,
    LOOM_TYPE_IQ2_XXS = 16,
    LOOM_TYPE_IQ2_XS = 17,
    LOOM_TYPE_IQ3_XXS = 18,
    LOOM_TYPE_IQ1_S = 19,
    LOOM_TYPE_IQ4_NL = 20,
    LOOM_TYPE_IQ3_S = 21,
    LOOM_TYPE_IQ2_S = 22,
    LOOM_TYPE_IQ4_XS = 23,
    LOOM_TYPE_I8 = 24,
    LOOM_TYPE_I16 = 25,
    LOOM_TYPE_I32 = 26,
    LOOM_TYPE_I64 = 27,
    LOOM_TYPE_F64 = 28,
    LOOM_TYPE_IQ1_M = 29,
    LOOM_TYPE_BF16 = 30,
    LOOM_TYPE_TQ1_0 = 34,
    LOOM_TYPE_TQ2_0 = 35,
    LOOM_TYPE_MXFP4 = 39,
    LOOM_TYPE_COUNT = 40
};

typedef void (*loom_to_float_fn)(const void * src, float * dst, int64_t n);
typedef void (*loom_from_float_fn)(const float * src, void * dst, int64_t n);

struct loom_type_traits {
    const char * name;          /* "f32", "q8_0", ...; NULL for an unknown id */
    int64_t blck_size;          /* elements per block (1 for plain types); 0 for an unknown id */
    size_t type_size;           /* bytes per block */
    loom_to_float_fn to_float;  /* NULL where Loom cannot compute with the type */
    loom_from_float_fn from_float;
};

/* Traits of 'type'; for an id that is out of range or unknown, a record with blck_size 0. */
LOOM_API const struct loom_type_traits * loom_type_get_traits(enum loom_type type);
/* True when 'type' is an id the table knows (any GGUF type), whether or not Loom computes with it. */
LOOM_API bool loom_type_is_known(int type);
LOOM_API const char * loom_type_name(enum loom_type type);   /* "?" for unknown ids */
LOOM_API int64_t loom_blck_size(enum loom_type type);
LOOM_API size_t loom_type_size(enum loom_type type);          /* bytes per block */
/* Bytes of one row of 'ne0' elements; 'ne0' must be a multiple of the block length. */
LOOM_API size_t loom_row_size(enum loom_type type, int64_t ne0);

/* Scalar conversions (IEEE 754 binary16 and bfloat16; round to nearest even, NaN kept NaN). */
LOOM_API float loom_fp16_to_fp32(uint16_t h);
LOOM_API uint16_t loom_fp32_to_fp16(float f);
LOOM_API float loom_bf16_to_fp32(uint16_t h);
LOOM_API uint16_t loom_fp32_to_bf16(float f);

/* ---------------------------------------------------------------- ops */

enum loom_op {
    LOOM_OP_NONE = 0,  /* a leaf: data comes from outside */
    LOOM_OP_DUP,
    LOOM_OP_CPY,
    LOOM_OP_CONT,
    LOOM_OP_ADD,
    LOOM_OP_MUL,
    LOOM_OP_SCALE,
    LOOM_OP_RMS_NORM,
    LOOM_OP_MUL_MAT,
    LOOM_OP_GET_ROWS,
    LOOM_OP_ROPE,
    LOOM_OP_SOFT_MAX,
    LOOM_OP_SILU,
    LOOM_OP_GELU,
    LOOM_OP_ARGMAX,
    LOOM_OP_SET_ROWS,
    LOOM_OP_VIEW,
    LOOM_OP_RESHAPE,
    LOOM_OP_PERMUTE,
    LOOM_OP_TRANSPOSE,
    LOOM_OP_FLASH_ATTN_EXT,
    LOOM_OP_ALL_REDUCE,
    LOOM_OP_COUNT
};

LOOM_API const char * loom_op_name(enum loom_op op);   /* "MUL_MAT", ... */
/* True for ops that only reinterpret their source's storage (VIEW, RESHAPE, PERMUTE, TRANSPOSE). */
LOOM_API bool loom_op_is_view(enum loom_op op);

enum loom_tensor_flag {
    LOOM_TENSOR_FLAG_INPUT = 1,   /* set from outside before each compute */
    LOOM_TENSOR_FLAG_OUTPUT = 2,  /* read after compute: the allocator never reuses its memory */
    LOOM_TENSOR_FLAG_WEIGHT = 4,  /* a model parameter: the scheduler runs its consumers where it lives */
};

struct loom_backend_buffer;

struct loom_tensor {
    enum loom_type type;
    int64_t ne[LOOM_MAX_DIMS];  /* elements */
    size_t nb[LOOM_MAX_DIMS];   /* bytes */

    enum loom_op op;
    int32_t op_params[LOOM_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;               /* enum loom_tensor_flag bits */
    struct loom_tensor * src[LOOM_MAX_SRC];

    struct loom_tensor * view_src;  /* the base (never a view) when this is a view, else NULL */
    size_t view_offs;               /* bytes from the base's data */

    struct loom_backend_buffer * buffer;  /* where the data lives; NULL for context-allocated data */
    void * data;                          /* address in the buffer's address space (not always a host pointer) */

    char name[LOOM_MAX_NAME];
};

/* ---------------------------------------------------------------- tensor queries */

LOOM_API int64_t loom_nelements(const struct loom_tensor * t);  /* ne0*ne1*ne2*ne3 */
LOOM_API int64_t loom_nrows(const struct loom_tensor * t);   /* ne1*ne2*ne3 */
/* Bytes spanned by 't' from its first to one past its last element, honouring strides
 * (for a contiguous tensor: nelements * type size / block length). */
LOOM_API size_t loom_nbytes(const struct loom_tensor * t);
LOOM_API size_t loom_element_size(const struct loom_tensor * t);  /* bytes per element of a plain type */
LOOM_API bool loom_is_contiguous(const struct loom_tensor * t);   /* dense row-major in ne order */
/* Rows are dense (nb0 = element size) though rows themselves may be strided. */
LOOM_API bool loom_is_contiguous_rows(const struct loom_tensor * t);
LOOM_API bool loom_is_transposed(const struct loom_tensor * t);   /* nb0 > nb1 */
LOOM_API bool loom_is_permuted(const struct loom_tensor * t);     /* strides not increasing */
LOOM_API bool loom_is_empty(const struct loom_tensor * t);        /* some ne[i] == 0 */
LOOM_API bool loom_is_view(const struct loom_tensor * t);         /* view_src != NULL */
LOOM_API bool loom_are_same_shape(const struct loom_tensor * a, const struct loom_tensor * b);
LOOM_API bool loom_are_same_layout(const struct loom_tensor * a, const struct loom_tensor * b); /* shape, type and strides */
/* True when 'b' broadcasts to 'a': a->ne[i] % b->ne[i] == 0 for every i. */
LOOM_API bool loom_can_repeat(const struct loom_tensor * b, const struct loom_tensor * a);
/* Number of dimensions ignoring trailing 1s (at least 1). */
LOOM_API int loom_n_dims(const struct loom_tensor * t);

LOOM_API void loom_set_name(struct loom_tensor * t, const char * name);  /* truncated to LOOM_MAX_NAME-1 */
LOOM_API void loom_format_name(struct loom_tensor * t, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
LOOM_API const char * loom_get_name(const struct loom_tensor * t);
LOOM_API void loom_set_input(struct loom_tensor * t);
LOOM_API void loom_set_output(struct loom_tensor * t);
LOOM_API void loom_set_weight(struct loom_tensor * t);

/* Op parameters are stored as raw 32-bit words; these read and write them. */
LOOM_API int32_t loom_get_op_param_i32(const struct loom_tensor * t, int i);
LOOM_API float loom_get_op_param_f32(const struct loom_tensor * t, int i);

/* ---------------------------------------------------------------- contexts */

struct loom_context;

struct loom_init_params {
    size_t mem_size;     /* bytes of arena: tensor metadata, graphs and (unless no_alloc) data */
    void * mem_buffer;   /* caller-owned arena, or NULL to allocate one (freed by loom_free) */
    bool no_alloc;       /* metadata only: data is placed later by a backend buffer */
};

/* Bytes one tensor's metadata takes in an arena (use mem_size = n_tensors * this + graphs). */
LOOM_API size_t loom_tensor_overhead(void);
/* Bytes a graph of 'size' nodes takes in an arena. */
LOOM_API size_t loom_graph_overhead(size_t size);

/* Creates a context. Returns NULL (with a logged reason) when the arena cannot be allocated. */
LOOM_API struct loom_context * loom_init(struct loom_init_params params);
LOOM_API void loom_free(struct loom_context * ctx);
LOOM_API bool loom_get_no_alloc(const struct loom_context * ctx);
LOOM_API void loom_set_no_alloc(struct loom_context * ctx, bool no_alloc);
LOOM_API size_t loom_used_mem(const struct loom_context * ctx);   /* bytes of the arena in use */
/* Iterates the tensors created in 'ctx' in creation order; NULL at the end. */
LOOM_API struct loom_tensor * loom_get_first_tensor(const struct loom_context * ctx);
LOOM_API struct loom_tensor * loom_get_next_tensor(const struct loom_context * ctx, struct loom_tensor * t);
/* Linear lookup by name; NULL when absent. */
LOOM_API struct loom_tensor * loom_get_tensor(const struct loom_context * ctx, const char * name);

/* ---------------------------------------------------------------- tensor creation
 * Running out of arena is a programming error (the caller sizes the context) and aborts. */

/* A tensor of 'n_dims' (1..4) dimensions 'ne' (elements; ne[0] a multiple of the type's block
 * length) with contiguous strides; its data comes from the arena unless the context is no_alloc. */
LOOM_API struct loom_tensor * loom_new_tensor(struct loom_context * ctx, enum loom_type type, int n_dims, const int64_t * ne);
LOOM_API struct loom_tensor * loom_new_tensor_1d(struct loom_context * ctx, enum loom_type type, int64_t ne0);
LOOM_API struct loom_tensor * loom_new_tensor_2d(struct loom_context * ctx, enum loom_type type, int64_t ne0, int64_t ne1);
LOOM_API struct loom_tensor * loom_new_tensor_3d(struct loom_context * ctx, enum loom_type type, int64_t ne0, int64_t ne1, int64_t ne2);
LOOM_API struct loom_tensor * loom_new_tensor_4d(struct loom_context * ctx, enum loom_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* A new tensor with the type and shape of 'src' (contiguous strides), no op. */
LOOM_API struct loom_tensor * loom_dup_tensor(struct loom_context * ctx, const struct loom_tensor * src);

/* ---------------------------------------------------------------- views
 * Views share the storage of their source's base; the result's 'view_src' is that base and
 * 'view_offs' is absolute. Sources may live in another context or buffer (the KV cache). */

/* Views of 'a' at byte 'offset' with the given shape and row strides nb1..nb3 (bytes);
 * nb0 is the element size. The viewed extent must lie inside 'a'. */
LOOM_API struct loom_tensor * loom_view_1d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, size_t offset);
LOOM_API struct loom_tensor * loom_view_2d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
LOOM_API struct loom_tensor * loom_view_3d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
LOOM_API struct loom_tensor * loom_view_4d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* A view with the same shape and strides as 'a'. */
LOOM_API struct loom_tensor * loom_view_tensor(struct loom_context * ctx, struct loom_tensor * a);
/* Reinterprets a contiguous 'a' with a new shape of the same element count. */
LOOM_API struct loom_tensor * loom_reshape_1d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0);
LOOM_API struct loom_tensor * loom_reshape_2d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1);
LOOM_API struct loom_tensor * loom_reshape_3d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
LOOM_API struct loom_tensor * loom_reshape_4d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* Moves source dimension i to result dimension axis_i (a permutation of 0..3), as ggml_permute:
 * result.ne[axis_i] = a.ne[i], result.nb[axis_i] = a.nb[i]. */
LOOM_API struct loom_tensor * loom_permute(struct loom_context * ctx, struct loom_tensor * a, int axis0, int axis1, int axis2, int axis3);
/* Swaps dimensions 0 and 1. */
LOOM_API struct loom_tensor * loom_transpose(struct loom_context * ctx, struct loom_tensor * a);

/* ---------------------------------------------------------------- ops
 * Each returns a new node; its result is F32 unless stated. Sources may be non-contiguous
 * wherever stated. Shapes in ne order. */

/* rows = a[:, ids[i], i2, i3]: a [ne0, n_rows, ne2, ne3] of F32/F16/BF16 or a quantized type with
 * a to_float (its rows dequantized), ids I32 [n, ne2, ne3]
 * (ids->ne[1] == a->ne[2]) -> F32 [ne0, n, ne2, ne3]. An id outside [0, n_rows) yields zeros and a
 * logged error (never an out-of-bounds read). */
LOOM_API struct loom_tensor * loom_get_rows(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * ids);

/* dst[i, j, i2, i3] = sum_k a[k, i, i2/r2, i3/r3] * b[k, j, i2, i3]
 * a [K, M, ne2a, ne3a] (F32/F16/BF16, or a quantized type with a to_float: then a's rows are
 * dense blocks), b [K, N, ne2b, ne3b] (F32), r2 = ne2b/ne2a, r3 = ne3b/ne3a (must divide evenly)
 * -> F32 [M, N, ne2b, ne3b]. Both may be non-contiguous (rows strided, transposed or permuted). */
LOOM_API struct loom_tensor * loom_mul_mat(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b);

/* Element-wise a + b and a * b with 'b' broadcast to 'a' (loom_can_repeat(b, a)); a and b F32
 * (a may also be F16/BF16: the result is F32 with a's shape). */
LOOM_API struct loom_tensor * loom_add(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b);
LOOM_API struct loom_tensor * loom_mul(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b);
/* a * s, a F32. */
LOOM_API struct loom_tensor * loom_scale(struct loom_context * ctx, struct loom_tensor * a, float s);
/* Per row (over ne0): x / sqrt(mean(x^2) + eps). a F32 [ne0, ...]. (Zhang & Sennrich 2019.) */
LOOM_API struct loom_tensor * loom_rms_norm(struct loom_context * ctx, struct loom_tensor * a, float eps);

enum loom_rope_mode {
    LOOM_ROPE_NORMAL = 0,  /* rotates pairs (2i, 2i+1) of each head (the original RoPE, GGUF llama) */
    LOOM_ROPE_NEOX = 2,    /* rotates pairs (i, i + n_dims/2) (GPT-NeoX layout) */
};
/* Rotary position embedding (Su et al. 2021, RoFormer). a F32 [head_dim, n_head, n_tokens, 1],
 * pos I32 [n_tokens]. The first 'n_dims' (even, <= head_dim) elements of each head are rotated by
 * angle pos * freq_scale * freq_base^(-2i/n_dims) for pair i; the rest are copied. */
LOOM_API struct loom_tensor * loom_rope(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * pos,
                               int n_dims, enum loom_rope_mode mode, float freq_base, float freq_scale);

/* Parameters of loom_rope_ext beyond loom_rope's (the field's rope_ext set). */
struct loom_rope_ext_params {
    int32_t n_ctx_orig;    /* YaRN: the context the model was trained with (tokens) */
    float ext_factor;      /* YaRN: weight of the extrapolation ramp (0 = off: plain scaled RoPE) */
    float attn_factor;     /* multiplies cos and sin (1 = none) */
    float beta_fast;       /* YaRN: rotations per context above which a pair keeps its frequency (32) */
    float beta_slow;       /* YaRN: rotations per context below which a pair is fully interpolated (1) */
};

/* Defaults that make loom_rope_ext equal loom_rope: n_ctx_orig 0, ext_factor 0, attn_factor 1,
 * beta_fast 32, beta_slow 1. */
LOOM_API struct loom_rope_ext_params loom_rope_ext_default_params(void);

/* RoPE with frequency factors and YaRN (Peng et al. 2023, "YaRN: Efficient Context Window
 * Extension of Large Language Models", sections 3.2-3.4, in the field's discretised form).
 * For pair i (0 <= i < n_dims/2), at position p:
 *   theta_e = p * freq_base^(-2i/n_dims) / f[i]     (f = 'freq_factors' F32 [>= n_dims/2], or 1)
 *   theta_i = freq_scale * theta_e
 *   theta   = theta_i * (1 - r_i) + theta_e * r_i,  r_i = ext_factor * ramp(i)
 *   ramp(i) = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1), with lo = max(0, floor(d(beta_fast))),
 *             hi = min(n_dims - 1, ceil(d(beta_slow))), d(b) = n_dims ln(n_ctx_orig / (2 pi b)) / (2 ln freq_base)
 *             (d(b): the pair that turns b times over n_ctx_orig positions)
 *   m       = attn_factor * (ext_factor != 0 ? 1 + 0.1 ln(1 / freq_scale) : 1)   (YaRN's attention temperature)
 * and the pair (x0, x1) becomes m * (x0 cos theta - x1 sin theta, x0 sin theta + x1 cos theta).
 * Shapes as loom_rope; 'freq_factors' may be NULL (Llama 3.1 ships them as rope_freqs.weight). */
LOOM_API struct loom_tensor * loom_rope_ext(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * pos,
                                   struct loom_tensor * freq_factors, int n_dims, enum loom_rope_mode mode, float freq_base,
                                   float freq_scale, const struct loom_rope_ext_params * ext);

/* The YaRN parameters of a ROPE node (loom_rope_ext_default_params for one made by loom_rope). */
LOOM_API struct loom_rope_ext_params loom_rope_get_ext_params(const struct loom_tensor * rope);
/* True when a ROPE node is plain loom_rope (no frequency factors, YaRN off, attn_factor 1): the
 * rotation a backend without the extensions can still compute. */
LOOM_API bool loom_rope_is_plain(const struct loom_tensor * rope);

/* Per row over ne0: softmax(a * scale + mask), with the row maximum subtracted first.
 * a F32 [ne0, ne1, ne2, ne3]; mask optional (NULL), F32 or F16 [ne0, >= ne1, m2, m3] broadcast
 * over dims 2 and 3 (ne2 % m2 == 0, ne3 % m3 == 0); -INFINITY entries mask out. A row that is
 * entirely -inf yields zeros. */
LOOM_API struct loom_tensor * loom_soft_max(struct loom_context * ctx, struct loom_tensor * a);
LOOM_API struct loom_tensor * loom_soft_max_ext(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * mask, float scale);

/* Fused attention: for each query, softmax(q K^T * scale + mask) V in one pass over the KV cells,
 * with the running maximum and sum of the online softmax (Milakov & Gimelshein 2018, "Online
 * normalizer calculation for softmax"; Dao et al. 2022, "FlashAttention"), never forming the
 * [n_kv, n_q] score matrix.
 *   q F32 [D, n_q, H, B];  k [D, n_kv, H_kv, B];  v [Dv, n_kv, H_kv, B]
 * k and v: F32, F16, BF16 (or a block type with a 'to_float', ne0 a multiple of its block length),
 * rows dense (nb0 the element size), any row strides (views of a KV cache). Grouped-query
 * attention: H % H_kv == 0 and query head h reads KV head h / (H / H_kv). mask optional (NULL), F32 or
 * F16 [n_kv, >= n_q, m2, m3] with H % m2 == 0 and B % m3 == 0, added to the scaled scores (mask
 * row i is query i's); -INFINITY masks a cell out; a query whose cells are all masked gets zeros.
 * -> F32 [Dv, H, n_q, B]: the heads of one query are adjacent, so a reshape gives [Dv * H, n_q].
 * The field calls this op FLASH_ATTN_EXT. */
LOOM_API struct loom_tensor * loom_flash_attn_ext(struct loom_context * ctx, struct loom_tensor * q, struct loom_tensor * k,
                                         struct loom_tensor * v, struct loom_tensor * mask, float scale);

/* One rank's part of an all-reduce across devices: the sum over the 'n_ranks' nodes of group
 * 'group' (ranks 0..n_ranks-1, one node each, of equal shape) of their sources. a F32 contiguous
 * -> F32 of a's shape. No device computes it: the scheduler runs a group's nodes at once through
 * its communicator (loom_backend_sched_set_comm), rank r on the communicator's backend r. Used by
 * tensor-parallel layers (-sm row) after the products split by input columns. */
LOOM_API struct loom_tensor * loom_all_reduce(struct loom_context * ctx, struct loom_tensor * a, int group, int rank, int n_ranks);

/* x * sigmoid(x) (Hendrycks & Gimpel 2016 "SiLU"). a F32. */
LOOM_API struct loom_tensor * loom_silu(struct loom_context * ctx, struct loom_tensor * a);
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (the tanh approximation of GELU). a F32. */
LOOM_API struct loom_tensor * loom_gelu(struct loom_context * ctx, struct loom_tensor * a);

/* Copies the values of 'a' into 'b' (same element count, any shapes/strides), converting
 * between F32/F16/BF16 (I32 to I32 only), quantizing F32 into a block type (Q4_0 ... IQ4_XS,
 * each row's blocks coded as the type's from_float codes them) or dequantizing one into F32;
 * a block type's side keeps rows of whole blocks. Returns a view of 'b' that depends on the copy. */
LOOM_API struct loom_tensor * loom_cpy(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b);

/* Scatters rows: a[:, ids[i]] = b[:, i] for i < n, converted to a's type. a [ne0, n_rows] of
 * F32/F16/BF16 with any strides (a transposed view stores columns), or of a block type with a
 * 'from_float' (Q8_0, Q4_0: a quantized KV cache) with dense rows, each quantized whole; b F32
 * [ne0, n] with any strides (dense rows for a block type), ids I32 [n]. Returns a view of 'a' that depends on the writes; rows not named keep
 * their values. An id outside [0, n_rows) writes nothing and is reported as an error (never an
 * out-of-bounds write). The rows a graph writes are data, so one graph serves every position
 * (the KV cache store of token generation). */
LOOM_API struct loom_tensor * loom_set_rows(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b, struct loom_tensor * ids);
/* A new contiguous tensor of a's type and shape holding a's values. */
LOOM_API struct loom_tensor * loom_dup(struct loom_context * ctx, struct loom_tensor * a);
/* A contiguous copy of 'a' (same type), optionally with a new shape of equal element count. */
LOOM_API struct loom_tensor * loom_cont(struct loom_context * ctx, struct loom_tensor * a);
LOOM_API struct loom_tensor * loom_cont_2d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1);
LOOM_API struct loom_tensor * loom_cont_4d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* Index of the maximum along ne0 for each row: a F32 [ne0, ne1] -> I32 [ne1]. Ties go to the
 * lowest index; NaN entries are ignored (a row of only NaN gives 0). */
LOOM_API struct loom_tensor * loom_argmax(struct loom_context * ctx, struct loom_tensor * a);

/* ---------------------------------------------------------------- graphs */

/* A graph of nodes in execution order (its body: src/core/loom-internal.h). */
struct loom_cgraph;

/* A graph of capacity LOOM_DEFAULT_GRAPH_SIZE (or 'size') allocated in 'ctx'. */
LOOM_API struct loom_cgraph * loom_new_graph(struct loom_context * ctx);
LOOM_API struct loom_cgraph * loom_new_graph_custom(struct loom_context * ctx, size_t size);
/* Adds 'tensor' and everything it depends on (depth first, sources before consumers, each
 * tensor once). View ops are nodes; a view's base is reached through src[0]. Exceeding the
 * capacity aborts (the caller sizes the graph). */
LOOM_API void loom_build_forward_expand(struct loom_cgraph * g, struct loom_tensor * tensor);
LOOM_API int loom_graph_n_nodes(const struct loom_cgraph * g);
/* Node i; negative i counts from the end (-1 is the last node). */
LOOM_API struct loom_tensor * loom_graph_node(const struct loom_cgraph * g, int i);
/* Empties 'g' (capacity kept). */
LOOM_API void loom_graph_clear(struct loom_cgraph * g);
/* Logs nodes and leafs with op, type, shape and name at INFO level. */
LOOM_API void loom_graph_print(const struct loom_cgraph * g);


/* ---------------------------------------------------------------- misc */

LOOM_API int64_t loom_time_us(void);   /* monotonic microseconds */
LOOM_API int64_t loom_time_ns(void);   /* monotonic nanoseconds (the same clock) */
/* CPUs this process may run on (its affinity mask; else the processors online), at least 1. */
LOOM_API int loom_n_cpus(void);
/* Threads the CPU kernels use unless told: LOOM_N_THREADS (1..1024; anything else is ignored with a
 * warning), else loom_n_cpus(). */
LOOM_API int loom_default_n_threads(void);
/* Reads the whole file at 'path' (a regular file or a pipe) into a new heap buffer ('*data', freed
 * by the caller) of '*size' bytes, followed by a NUL byte that '*size' does not count. Errors
 * (logged with the reason, '*data' NULL): LOOM_ERR_IO (cannot open or read), LOOM_ERR_TOO_LARGE
 * (more than 'max_bytes'), LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_read_file(const char * path, size_t max_bytes, void ** data, size_t * size);
/* Rounds 'x' up to a multiple of 'align' (a power of two). */
static inline size_t loom_pad(size_t x, size_t align) { return (x + align - 1) & ~(align - 1); }

#ifdef __cplusplus
}
#endif

#endif /* LOOM_H */
