/* cuda-dequant.cuh -- quantized tensors outside the matrix-vector kernels: dequantization (cuBLAS
 * weights, CPY / GET_ROWS from a quantized tensor) and quantization to Q8_0 / Q4_0 (CPY,
 * SET_ROWS: a quantized KV cache). */
#ifndef LOOM_CUDA_DEQUANT_CUH
#define LOOM_CUDA_DEQUANT_CUH

#include "cuda-common.cuh"

/* True when 't' is of a quantized type the kernels read (lc_is_quant_type, cuda-quant.cuh) with
 * whole blocks per row (ne[0] a multiple of the block length, nb[0] the block size) and strides
 * that keep the alignment the kernels need (lc_quant_align). */
bool lc_quant_strides_ok(const struct loom_tensor * t);
/* Queues d = the elements of quantized 's' converted to d's type (F16 or F32), same shape, any
 * strides of d (rows of s: whole blocks). Returns LOOM_ERR_UNSUPPORTED for a type without a
 * decoder, else the launch's status. */
enum loom_status lc_dequant(const struct lc_backend * be, const struct lc_tensor * s, const struct lc_tensor * d);

/* CPY / DUP / CONT with a quantized side: quantized -> F32 / F16 (every type), F32 -> Q8_0 /
 * Q4_0, and a quantized tensor to its own type (its bytes); same shape, or both contiguous. */
bool lc_cpy_quant_supported(const struct loom_tensor * op);
enum loom_status lc_cpy_quant(struct lc_backend * be, struct loom_tensor * dst);
/* GET_ROWS from a quantized table (F32 result); an id outside the table gives a zero row and
 * raises the backend's error flag. */
bool lc_get_rows_quant_supported(const struct loom_tensor * op);
enum loom_status lc_get_rows_quant(struct lc_backend * be, struct loom_tensor * dst);
/* SET_ROWS of F32 rows into a Q8_0 / Q4_0 table (each row quantized block by block); an id
 * outside the table writes nothing and raises the error flag. */
bool lc_set_rows_quant_supported(const struct loom_tensor * op);
enum loom_status lc_set_rows_quant(struct lc_backend * be, struct loom_tensor * dst);

#endif
