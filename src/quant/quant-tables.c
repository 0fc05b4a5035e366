/* quant-tables.c -- constant tables shared by the quantized types' codecs and kernels. */
#include "quant/quant-blocks.h"

/* IQ4_NL / IQ4_XS code book: the value of each 4-bit index, before the block scale (GGUF spec). */
const int8_t loom_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
