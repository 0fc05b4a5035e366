/* ops.c -- op constructors: each checks its sources' shapes and types and records a graph node. */
#include "core-impl.h"

#include <assert.h>
#include <string.h>

static bool is_float_type(enum loom_type t) {
    return t == LOOM_TYPE_F32 || t == LOOM_TYPE_F16 || t == LOOM_TYPE_BF16;
}

/* A weight type GET_ROWS and MUL_MAT read: a float type or a quantized type with a dequantizer. */
static bool is_weight_type(enum loom_type t) { return is_float_type(t) || loom_type_get_traits(t)->to_float != NULL; }

static struct loom_tensor * new_node(struct loom_context * ctx, enum loom_op op, enum loom_type type, const int64_t * ne,
                                     struct loom_tensor * a, struct loom_tensor * b) {
    struct loom_tensor * r = loom_new_tensor(ctx, type, LOOM_MAX_DIMS, ne);
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct loom_tensor * loom_get_rows(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * ids) {
    LOOM_ASSERT(is_weight_type(a->type));
    LOOM_ASSERT(ids->type == LOOM_TYPE_I32);
    LOOM_ASSERT(ids->ne[3] == 1 && ids->ne[1] == a->ne[2] && ids->ne[2] == a->ne[3]);
    int64_t ne[4] = {a->ne[0], ids->ne[0], a->ne[2], a->ne[3]};
    return new_node(ctx, LOOM_OP_GET_ROWS, LOOM_TYPE_F32, ne, a, ids);
}

struct loom_tensor * loom_mul_mat(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b) {
    LOOM_ASSERT(is_weight_type(a->type));
    LOOM_ASSERT(b->type == LOOM_TYPE_F32);
    LOOM_ASSERT(a->ne[0] == b->ne[0]);
    LOOM_ASSERT(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0);
    int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    return new_node(ctx, LOOM_OP_MUL_MAT, LOOM_TYPE_F32, ne, a, b);
}

static struct loom_tensor * binary(struct loom_context * ctx, enum loom_op op, struct loom_tensor * a, struct loom_tensor * b) {
    LOOM_ASSERT(is_float_type(a->type));
    LOOM_ASSERT(b->type == LOOM_TYPE_F32);
    LOOM_ASSERT(loom_can_repeat(b, a));
    return new_node(ctx, op, LOOM_TYPE_F32, a->ne, a, b);
}

struct loom_tensor * loom_add(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b) {
    return binary(ctx, LOOM_OP_ADD, a, b);
}

struct loom_tensor * loom_mul(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b) {
    return binary(ctx, LOOM_OP_MUL, a, b);
}

static struct loom_tensor * unary(struct loom_context * ctx, enum loom_op op, struct loom_tensor * a) {
    LOOM_ASSERT(a->type == LOOM_TYPE_F32);
    return new_node(ctx, op, LOOM_TYPE_F32, a->ne, a, NULL);
}

struct loom_tensor * loom_scale(struct loom_context * ctx, struct loom_tensor * a, float s) {
    struct loom_tensor * r = unary(ctx, LOOM_OP_SCALE, a);
    loom_set_op_param_f32(r, 0, s);
    return r;
}

struct loom_tensor * loom_rms_norm(struct loom_context * ctx, struct loom_tensor * a, float eps) {
    struct loom_tensor * r = unary(ctx, LOOM_OP_RMS_NORM, a);
    loom_set_op_param_f32(r, 0, eps);
    return r;
}

struct loom_rope_ext_params loom_rope_ext_default_params(void) {
    return (struct loom_rope_ext_params){.n_ctx_orig = 0, .ext_factor = 0.0f, .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
}

struct loom_tensor * loom_rope_ext(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * pos,
                                   struct loom_tensor * freq_factors, int n_dims, enum loom_rope_mode mode, float freq_base,
                                   float freq_scale, const struct loom_rope_ext_params * ext) {
    LOOM_ASSERT(a->type == LOOM_TYPE_F32);
    LOOM_ASSERT(pos->type == LOOM_TYPE_I32 && loom_nelements(pos) == a->ne[2]);
    LOOM_ASSERT(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0]);
    LOOM_ASSERT(mode == LOOM_ROPE_NORMAL || mode == LOOM_ROPE_NEOX);
    LOOM_ASSERT(!freq_factors || (freq_factors->type == LOOM_TYPE_F32 && freq_factors->ne[0] >= n_dims / 2));
    const struct loom_rope_ext_params def = loom_rope_ext_default_params();
    if (!ext) ext = &def;
    struct loom_tensor * r = new_node(ctx, LOOM_OP_ROPE, LOOM_TYPE_F32, a->ne, a, pos);
    r->src[2] = freq_factors;
    loom_set_op_param_i32(r, 0, n_dims);
    loom_set_op_param_i32(r, 1, (int32_t)mode);
    loom_set_op_param_f32(r, 2, freq_base);
    loom_set_op_param_f32(r, 3, freq_scale);
    loom_set_op_param_i32(r, 4, ext->n_ctx_orig);
    loom_set_op_param_f32(r, 5, ext->ext_factor);
    loom_set_op_param_f32(r, 6, ext->attn_factor);
    loom_set_op_param_f32(r, 7, ext->beta_fast);
    loom_set_op_param_f32(r, 8, ext->beta_slow);
    return r;
}

struct loom_tensor * loom_rope(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * pos,
                               int n_dims, enum loom_rope_mode mode, float freq_base, float freq_scale) {
    return loom_rope_ext(ctx, a, pos, NULL, n_dims, mode, freq_base, freq_scale, NULL);
}

struct loom_rope_ext_params loom_rope_get_ext_params(const struct loom_tensor * rope) {
    return (struct loom_rope_ext_params){
        .n_ctx_orig = loom_get_op_param_i32(rope, 4),
        .ext_factor = loom_get_op_param_f32(rope, 5),
        .attn_factor = loom_get_op_param_f32(rope, 6),
        .beta_fast = loom_get_op_param_f32(rope, 7),
        .beta_slow = loom_get_op_param_f32(rope, 8),
    };
}

bool loom_rope_is_plain(const struct loom_tensor * rope) {
    const struct loom_rope_ext_params e = loom_rope_get_ext_params(rope);
    return rope->op == LOOM_OP_ROPE && !rope->src[2] && e.ext_factor == 0.0f && e.attn_factor == 1.0f;
}

struct loom_tensor * loom_soft_max_ext(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * mask, float scale) {
    LOOM_ASSERT(a->type == LOOM_TYPE_F32);
    if (mask) {
        LOOM_ASSERT(mask->type == LOOM_TYPE_F32 || mask->type == LOOM_TYPE_F16);
        LOOM_ASSERT(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1]);
        LOOM_ASSERT(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0);
    }
    struct loom_tensor * r = new_node(ctx, LOOM_OP_SOFT_MAX, LOOM_TYPE_F32, a->ne, a, mask);
    loom_set_op_param_f32(r, 0, scale);
    return r;
}

struct loom_tensor * loom_soft_max(struct loom_context * ctx, struct loom_tensor * a) {
    return loom_soft_max_ext(ctx, a, NULL, 1.0f);
}

/* K and V of fused attention: a float type, or a block type that can be dequantized row by row. */
static bool is_kv_type(enum loom_type t) {
    return is_float_type(t) || (loom_type_get_traits(t)->to_float != NULL && loom_blck_size(t) > 0);
}

struct loom_tensor * loom_flash_attn_ext(struct loom_context * ctx, struct loom_tensor * q, struct loom_tensor * k,
                                         struct loom_tensor * v, struct loom_tensor * mask, float scale) {
    LOOM_ASSERT(q->type == LOOM_TYPE_F32 && is_kv_type(k->type) && is_kv_type(v->type));
    LOOM_ASSERT(k->ne[0] == q->ne[0] && v->ne[1] == k->ne[1] && v->ne[2] == k->ne[2]);
    LOOM_ASSERT(k->ne[0] % loom_blck_size(k->type) == 0 && v->ne[0] % loom_blck_size(v->type) == 0);
    LOOM_ASSERT(k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0);
    LOOM_ASSERT(k->ne[3] == q->ne[3] && v->ne[3] == q->ne[3]);
    if (mask) {
        LOOM_ASSERT(mask->type == LOOM_TYPE_F32 || mask->type == LOOM_TYPE_F16);
        LOOM_ASSERT(mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1]);
        LOOM_ASSERT(mask->ne[2] > 0 && mask->ne[3] > 0 && q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0);
    }
    int64_t ne[4] = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
    struct loom_tensor * r = new_node(ctx, LOOM_OP_FLASH_ATTN_EXT, LOOM_TYPE_F32, ne, q, k);
    r->src[2] = v;
    r->src[3] = mask;
    loom_set_op_param_f32(r, 0, scale);
    return r;
}

struct loom_tensor * loom_all_reduce(struct loom_context * ctx, struct loom_tensor * a, int group, int rank, int n_ranks) {
    LOOM_ASSERT(a->type == LOOM_TYPE_F32 && loom_is_contiguous(a));
    LOOM_ASSERT(n_ranks >= 1 && rank >= 0 && rank < n_ranks && group >= 0);
    struct loom_tensor * r = new_node(ctx, LOOM_OP_ALL_REDUCE, LOOM_TYPE_F32, a->ne, a, NULL);
    loom_set_op_param_i32(r, 0, group);
    loom_set_op_param_i32(r, 1, rank);
    loom_set_op_param_i32(r, 2, n_ranks);
    return r;
}

struct loom_tensor * loom_silu(struct loom_context * ctx, struct loom_tensor * a) { return unary(ctx, LOOM_OP_SILU, a); }
struct loom_tensor * loom_gelu(struct loom_context * ctx, struct loom_tensor * a) { return unary(ctx, LOOM_OP_GELU, a); }

static bool copyable(enum loom_type from, enum loom_type to) {
    if (is_float_type(from) && is_float_type(to)) return true;
    const bool qfrom = loom_blck_size(from) > 1, qto = loom_blck_size(to) > 1; /* block (quantized) types */
    if ((qfrom && (from == to || to == LOOM_TYPE_F32)) || (qto && from == LOOM_TYPE_F32)) return true;
    return from == LOOM_TYPE_I32 && to == LOOM_TYPE_I32;
}

struct loom_tensor * loom_cpy(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b) {
    LOOM_ASSERT(loom_nelements(a) == loom_nelements(b));
    LOOM_ASSERT(copyable(a->type, b->type));
    struct loom_tensor * r = loom_view_tensor(ctx, b);
    loom_format_name(r, "%s (copy of %s)", b->name, a->name);
    r->op = LOOM_OP_CPY;
    r->src[0] = a;
    r->src[1] = b;
    memset(r->op_params, 0, sizeof r->op_params);
    return r;
}

struct loom_tensor * loom_set_rows(struct loom_context * ctx, struct loom_tensor * a, struct loom_tensor * b, struct loom_tensor * ids) {
    /* a block type (a quantized KV cache) takes whole rows, quantized with the type's from_float */
    LOOM_ASSERT(is_float_type(a->type) || (loom_type_get_traits(a->type)->from_float && loom_blck_size(a->type) > 1));
    LOOM_ASSERT(b->type == LOOM_TYPE_F32 && ids->type == LOOM_TYPE_I32);
    LOOM_ASSERT(a->ne[2] == 1 && a->ne[3] == 1 && b->ne[2] == 1 && b->ne[3] == 1);
    LOOM_ASSERT(a->ne[0] == b->ne[0] && loom_nelements(ids) == b->ne[1] && ids->ne[0] == b->ne[1]);
    struct loom_tensor * r = loom_view_tensor(ctx, a);
    loom_format_name(r, "%s (rows from %s)", a->name, b->name);
    r->op = LOOM_OP_SET_ROWS;
    r->src[0] = b;
    r->src[1] = ids;
    r->src[2] = a;
    memset(r->op_params, 0, sizeof r->op_params);
    return r;
}

struct loom_tensor * loom_dup(struct loom_context * ctx, struct loom_tensor * a) {
    LOOM_ASSERT(copyable(a->type, a->type));
    return new_node(ctx, LOOM_OP_DUP, a->type, a->ne, a, NULL);
}

struct loom_tensor * loom_cont_4d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    LOOM_ASSERT(copyable(a->type, a->type));
    LOOM_ASSERT(ne0 * ne1 * ne2 * ne3 == loom_nelements(a));
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    struct loom_tensor * r = new_node(ctx, LOOM_OP_CONT, a->type, ne, a, NULL);
    loom_format_name(r, "%s (cont)", a->name);
    return r;
}

struct loom_tensor * loom_cont(struct loom_context * ctx, struct loom_tensor * a) {
    return loom_cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

struct loom_tensor * loom_cont_2d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1) {
    return loom_cont_4d(ctx, a, ne0, ne1, 1, 1);
}

struct loom_tensor * loom_argmax(struct loom_context * ctx, struct loom_tensor * a) {
    LOOM_ASSERT(a->type == LOOM_TYPE_F32);
    LOOM_ASSERT(a->ne[2] == 1 && a->ne[3] == 1);
    int64_t ne[4] = {a->ne[1], 1, 1, 1};
    return new_node(ctx, LOOM_OP_ARGMAX, LOOM_TYPE_I32, ne, a, NULL);
}

static const char * const op_names[LOOM_OP_COUNT] = {
    [LOOM_OP_NONE] = "NONE",         [LOOM_OP_DUP] = "DUP",         [LOOM_OP_CPY] = "CPY",
    [LOOM_OP_CONT] = "CONT",         [LOOM_OP_ADD] = "ADD",         [LOOM_OP_MUL] = "MUL",
    [LOOM_OP_SCALE] = "SCALE",       [LOOM_OP_RMS_NORM] = "RMS_NORM", [LOOM_OP_MUL_MAT] = "MUL_MAT",
    [LOOM_OP_GET_ROWS] = "GET_ROWS", [LOOM_OP_ROPE] = "ROPE",       [LOOM_OP_SOFT_MAX] = "SOFT_MAX",
    [LOOM_OP_SILU] = "SILU",         [LOOM_OP_GELU] = "GELU",       [LOOM_OP_ARGMAX] = "ARGMAX",     [LOOM_OP_SET_ROWS] = "SET_ROWS",
    [LOOM_OP_VIEW] = "VIEW",         [LOOM_OP_RESHAPE] = "RESHAPE", [LOOM_OP_PERMUTE] = "PERMUTE",
    [LOOM_OP_TRANSPOSE] = "TRANSPOSE", [LOOM_OP_FLASH_ATTN_EXT] = "FLASH_ATTN_EXT", [LOOM_OP_ALL_REDUCE] = "ALL_REDUCE",
};
static_assert(sizeof op_names / sizeof op_names[0] == LOOM_OP_COUNT, "one name per op");

const char * loom_op_name(enum loom_op op) {
    if ((int)op < 0 || op >= LOOM_OP_COUNT) return "?";
    return op_names[op];
}

bool loom_op_is_view(enum loom_op op) {
    return op == LOOM_OP_VIEW || op == LOOM_OP_RESHAPE || op == LOOM_OP_PERMUTE || op == LOOM_OP_TRANSPOSE;
}
