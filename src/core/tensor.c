/* tensor.c -- tensor creation, queries, names, flags and the view family. */
#include "core-impl.h"

#include <stdio.h>
#include <string.h>

int64_t loom_nelements(const struct loom_tensor * t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
int64_t loom_nrows(const struct loom_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t loom_nbytes(const struct loom_tensor * t) {
    for (int i = 0; i < LOOM_MAX_DIMS; i++) {
        if (t->ne[i] <= 0) return 0;
    }
    int64_t blck = loom_blck_size(t->type);
    size_t bytes;
    if (blck == 1) {
        bytes = loom_type_size(t->type);
        for (int i = 0; i < LOOM_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    } else {
        bytes = (size_t)(t->ne[0] / blck) * t->nb[0];
        for (int i = 1; i < LOOM_MAX_DIMS; i++) bytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    }
    return bytes;
}

size_t loom_element_size(const struct loom_tensor * t) { return loom_type_size(t->type); }

bool loom_is_contiguous(const struct loom_tensor * t) {
    size_t next = loom_type_size(t->type);
    if (t->ne[0] != loom_blck_size(t->type) && t->nb[0] != next) return false;
    next *= (size_t)(t->ne[0] / loom_blck_size(t->type));
    for (int i = 1; i < LOOM_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != next) return false; /* a dimension of 1 places no constraint */
        next *= (size_t)t->ne[i];
    }
    return true;
}

bool loom_is_contiguous_rows(const struct loom_tensor * t) {
    return t->ne[0] == loom_blck_size(t->type) || t->nb[0] == loom_type_size(t->type);
}

bool loom_is_transposed(const struct loom_tensor * t) { return t->nb[0] > t->nb[1]; }

bool loom_is_permuted(const struct loom_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

bool loom_is_empty(const struct loom_tensor * t) {
    for (int i = 0; i < LOOM_MAX_DIMS; i++) {
        if (t->ne[i] == 0) return true;
    }
    return false;
}

bool loom_is_view(const struct loom_tensor * t) { return t->view_src != NULL; }

bool loom_are_same_shape(const struct loom_tensor * a, const struct loom_tensor * b) {
    for (int i = 0; i < LOOM_MAX_DIMS; i++) {
        if (a->ne[i] != b->ne[i]) return false;
    }
    return true;
}

bool loom_are_same_layout(const struct loom_tensor * a, const struct loom_tensor * b) {
    if (a->type != b->type || !loom_are_same_shape(a, b)) return false;
    for (int i = 0; i < LOOM_MAX_DIMS; i++) {
        if (a->ne[i] > 1 && a->nb[i] != b->nb[i]) return false;
    }
    return true;
}

bool loom_can_repeat(const struct loom_tensor * b, const struct loom_tensor * a) {
    for (int i = 0; i < LOOM_MAX_DIMS; i++) {
        if (b->ne[i] == 0 || a->ne[i] % b->ne[i] != 0) return false;
    }
    return true;
}

int loom_n_dims(const struct loom_tensor * t) {
    for (int i = LOOM_MAX_DIMS - 1; i >= 1; i--) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

void loom_set_name(struct loom_tensor * t, const char * name) {
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
}

void loom_format_name(struct loom_tensor * t, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
}

const char * loom_get_name(const struct loom_tensor * t) { return t->name; }
void loom_set_input(struct loom_tensor * t) { t->flags |= LOOM_TENSOR_FLAG_INPUT; }
void loom_set_output(struct loom_tensor * t) { t->flags |= LOOM_TENSOR_FLAG_OUTPUT; }
void loom_set_weight(struct loom_tensor * t) { t->flags |= LOOM_TENSOR_FLAG_WEIGHT; }

void loom_set_op_params(struct loom_tensor * t, const void * params, size_t size) {
    LOOM_ASSERT(size <= LOOM_MAX_OP_PARAMS);
    memcpy(t->op_params, params, size);
}
void loom_set_op_param_i32(struct loom_tensor * t, int i, int32_t v) { t->op_params[i] = v; }
void loom_set_op_param_f32(struct loom_tensor * t, int i, float v) { memcpy(&t->op_params[i], &v, 4); }
int32_t loom_get_op_param_i32(const struct loom_tensor * t, int i) { return t->op_params[i]; }
float loom_get_op_param_f32(const struct loom_tensor * t, int i) {
    float v;
    memcpy(&v, &t->op_params[i], 4);
    return v;
}

/* ---------------------------------------------------------------- creation */

struct loom_tensor * loom_new_tensor(struct loom_context * ctx, enum loom_type type, int n_dims, const int64_t * ne) {
    return loom_new_tensor_impl(ctx, type, n_dims, ne, NULL, 0);
}
struct loom_tensor * loom_new_tensor_1d(struct loom_context * ctx, enum loom_type type, int64_t ne0) {
    return loom_new_tensor(ctx, type, 1, &ne0);
}
struct loom_tensor * loom_new_tensor_2d(struct loom_context * ctx, enum loom_type type, int64_t ne0, int64_t ne1) {
    int64_t ne[2] = {ne0, ne1};
    return loom_new_tensor(ctx, type, 2, ne);
}
struct loom_tensor * loom_new_tensor_3d(struct loom_context * ctx, enum loom_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3] = {ne0, ne1, ne2};
    return loom_new_tensor(ctx, type, 3, ne);
}
struct loom_tensor * loom_new_tensor_4d(struct loom_context * ctx, enum loom_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return loom_new_tensor(ctx, type, 4, ne);
}
struct loom_tensor * loom_dup_tensor(struct loom_context * ctx, const struct loom_tensor * src) {
    return loom_new_tensor(ctx, src->type, LOOM_MAX_DIMS, src->ne);
}

/* ---------------------------------------------------------------- views */

static struct loom_tensor * view_impl(struct loom_context * ctx, struct loom_tensor * a, int n_dims,
                                      const int64_t * ne, size_t offset) {
    struct loom_tensor * r = loom_new_tensor_impl(ctx, a->type, n_dims, ne, a, offset);
    loom_format_name(r, "%s (view)", a->name);
    r->op = LOOM_OP_VIEW;
    r->src[0] = a;
    loom_set_op_params(r, &offset, sizeof offset);
    return r;
}

/* The byte extent of a strided view, checked against its source (which must contain it). */
static void check_view_extent(const struct loom_tensor * a, const struct loom_tensor * r, size_t offset) {
    size_t need = loom_nbytes(r);
    size_t have = loom_nbytes(a);
    if (need && (offset > have || need > have - offset)) {
        LOOM_ABORT("view of '%s' out of bounds: offset %zu + %zu bytes > %zu", a->name, offset, need, have);
    }
}

struct loom_tensor * loom_view_1d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, size_t offset) {
    struct loom_tensor * r = view_impl(ctx, a, 1, &ne0, offset);
    check_view_extent(a, r, offset);
    return r;
}

struct loom_tensor * loom_view_2d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    int64_t ne[2] = {ne0, ne1};
    struct loom_tensor * r = view_impl(ctx, a, 2, ne, offset);
    r->nb[1] = nb1;
    r->nb[2] = r->nb[1] * (size_t)ne1;
    r->nb[3] = r->nb[2];
    check_view_extent(a, r, offset);
    return r;
}

struct loom_tensor * loom_view_3d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
    int64_t ne[3] = {ne0, ne1, ne2};
    struct loom_tensor * r = view_impl(ctx, a, 3, ne, offset);
    r->nb[1] = nb1;
    r->nb[2] = nb2;
    r->nb[3] = r->nb[2] * (size_t)ne2;
    check_view_extent(a, r, offset);
    return r;
}

struct loom_tensor * loom_view_4d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    struct loom_tensor * r = view_impl(ctx, a, 4, ne, offset);
    r->nb[1] = nb1;
    r->nb[2] = nb2;
    r->nb[3] = nb3;
    check_view_extent(a, r, offset);
    return r;
}

struct loom_tensor * loom_view_tensor(struct loom_context * ctx, struct loom_tensor * a) {
    struct loom_tensor * r = view_impl(ctx, a, LOOM_MAX_DIMS, a->ne, 0);
    for (int i = 0; i < LOOM_MAX_DIMS; i++) r->nb[i] = a->nb[i];
    return r;
}

static struct loom_tensor * reshape_impl(struct loom_context * ctx, struct loom_tensor * a, int n_dims, const int64_t * ne) {
    LOOM_ASSERT(loom_is_contiguous(a));
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= ne[i];
    LOOM_ASSERT(n == loom_nelements(a));
    struct loom_tensor * r = loom_new_tensor_impl(ctx, a->type, n_dims, ne, a, 0);
    loom_format_name(r, "%s (reshaped)", a->name);
    r->op = LOOM_OP_RESHAPE;
    r->src[0] = a;
    return r;
}

struct loom_tensor * loom_reshape_1d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0) {
    return reshape_impl(ctx, a, 1, &ne0);
}
struct loom_tensor * loom_reshape_2d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1) {
    int64_t ne[2] = {ne0, ne1};
    return reshape_impl(ctx, a, 2, ne);
}
struct loom_tensor * loom_reshape_3d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3] = {ne0, ne1, ne2};
    return reshape_impl(ctx, a, 3, ne);
}
struct loom_tensor * loom_reshape_4d(struct loom_context * ctx, struct loom_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return reshape_impl(ctx, a, 4, ne);
}

struct loom_tensor * loom_permute(struct loom_context * ctx, struct loom_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    int axes[4] = {axis0, axis1, axis2, axis3};
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        LOOM_ASSERT(axes[i] >= 0 && axes[i] < 4);
        seen |= 1 << axes[i];
    }
    LOOM_ASSERT(seen == 15);
    struct loom_tensor * r = view_impl(ctx, a, LOOM_MAX_DIMS, a->ne, 0);
    loom_format_name(r, "%s (permuted)", a->name);
    r->op = LOOM_OP_PERMUTE;
    for (int i = 0; i < 4; i++) {
        r->ne[axes[i]] = a->ne[i];
        r->nb[axes[i]] = a->nb[i];
    }
    loom_set_op_params(r, axes, sizeof axes);
    return r;
}

struct loom_tensor * loom_transpose(struct loom_context * ctx, struct loom_tensor * a) {
    struct loom_tensor * r = loom_permute(ctx, a, 1, 0, 2, 3);
    loom_format_name(r, "%s (transposed)", a->name);
    r->op = LOOM_OP_TRANSPOSE;
    return r;
}
