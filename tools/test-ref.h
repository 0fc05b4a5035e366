/* test-ref.h -- the independent op reference shared by every op test (`loom test-ops`, test-cuda
 * and the unit tests): naive loops in double precision over host images of a node's sources,
 * honouring every stride, and the error bound each op's result must meet. */
#ifndef LOOM_TOOLS_TEST_REF_H
#define LOOM_TOOLS_TEST_REF_H

#include "loom.h"

#include <stdbool.h>
#include <stdint.h>

/* A tensor as the reference sees it: metadata plus the host image of its base's bytes. */
struct test_view {
    const struct loom_tensor * t;
    const uint8_t * image;   /* the base's bytes; element (i0..i3) at view_offs + sum i*nb; NULL: unknown */
};

/* Element (i0, i1, i2, i3) of 'v' as a double: float and I32 types read, a block type's element
 * dequantized with its block. NaN for a type without a reader or a view without an image. */
double test_view_get(const struct test_view * v, int64_t i0, int64_t i1, int64_t i2, int64_t i3);

/* Row (i1, i2, i3) of node 'dst' (dst->ne[0] values into 'out') in double precision. 'src[k]' is the
 * view of dst->src[k] (same slots as the node's; unused slots are ignored); the op's parameters are
 * read from the node (loom.h's op constructors document them). SET_ROWS reads the destination's
 * rows that no id names from src[2], its values before the op. Returns false (row of NaN) for an op
 * the reference does not know. */
bool test_ref_row(const struct loom_tensor * dst, const struct test_view * src, int64_t i1, int64_t i2, int64_t i3,
                  double * out);

/* Normalized mean squared error bound the result of node 'dst' must meet (see test-ops-ref.c). */
double test_ref_threshold(const struct loom_tensor * dst);

#endif
