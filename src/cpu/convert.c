/* convert.c -- converting rows between F32/F16/BF16, dense (SIMD through the kernel table) or strided,
 * and dequantizing quantized rows to F32. */
#include "cpu/cpu-impl.h"

void lcpu_to_f32(const struct cpu_vec * vec, enum loom_type type, const void * src, size_t stride, float * dst, int64_t n) {
    const uint8_t * s = src;
    if (cpu_is_quant_type(type)) {
        loom_type_get_traits(type)->to_float(src, dst, n);
        return;
    }
    if (stride == loom_type_size(type)) {
        switch (type) {
        case LOOM_TYPE_F32: memcpy(dst, s, (size_t)n * 4); return;
        case LOOM_TYPE_F16: vec->f16_to_f32((const uint16_t *)s, dst, n); return;
        case LOOM_TYPE_BF16: vec->bf16_to_f32((const uint16_t *)s, dst, n); return;
        default: break;
        }
    }
    for (int64_t i = 0; i < n; i++) dst[i] = cpu_load_f32(type, s + i * (int64_t)stride);
}

static void from_f32(const struct cpu_vec * vec, const float * src, enum loom_type type, void * dst, int64_t n) {
    switch (type) {
    case LOOM_TYPE_F16: vec->f32_to_f16(src, dst, n); break;
    case LOOM_TYPE_BF16: vec->f32_to_bf16(src, dst, n); break;
    default: memcpy(dst, src, (size_t)n * 4); break;
    }
}

void lcpu_from_f32(const struct cpu_vec * vec, const float * src, enum loom_type type, void * dst, size_t stride, int64_t n) {
    const size_t es = loom_type_size(type);
    uint8_t * d = dst;
    if (stride == es) {
        from_f32(vec, src, type, dst, n);
    } else if (es == 2) { /* converted a piece at a time with the SIMD kernels, then scattered */
        uint16_t tmp[256];
        for (int64_t i = 0; i < n; i += 256) {
            const int64_t m = n - i < 256 ? n - i : 256;
            from_f32(vec, src + i, type, tmp, m);
            for (int64_t q = 0; q < m; q++) memcpy(d + (i + q) * (int64_t)stride, &tmp[q], 2);
        }
    } else {
        for (int64_t i = 0; i < n; i++) memcpy(d + i * (int64_t)stride, &src[i], 4);
    }
}

void lcpu_convert(const struct cpu_vec * vec, enum loom_type src_type, const void * src, enum loom_type dst_type, void * dst,
                 int64_t n) {
    if (src_type == dst_type) {
        memcpy(dst, src, (size_t)n * loom_type_size(src_type));
    } else if (src_type == LOOM_TYPE_F32) {
        from_f32(vec, src, dst_type, dst, n);
    } else if (dst_type == LOOM_TYPE_F32) {
        lcpu_to_f32(vec, src_type, src, loom_type_size(src_type), dst, n);
    } else {
        /* F16 <-> BF16 through a small F32 buffer */
        float tmp[256];
        const uint8_t * s = src;
        uint8_t * d = dst;
        for (int64_t i = 0; i < n; i += 256) {
            int64_t m = n - i < 256 ? n - i : 256;
            lcpu_to_f32(vec, src_type, s + 2 * i, 2, tmp, m);
            from_f32(vec, tmp, dst_type, d + 2 * i, m);
        }
    }
}

const float * lcpu_row_f32(const struct cpu_params * p, const struct loom_tensor * t, int64_t i1, int64_t i2, int64_t i3,
                          float * buf) {
    const uint8_t * row = cpu_elem(t, 0, i1, i2, i3);
    if (t->type == LOOM_TYPE_F32 && t->nb[0] == 4) return (const float *)row;
    lcpu_to_f32(p->vec, t->type, row, t->nb[0], buf, t->ne[0]);
    return buf;
}
