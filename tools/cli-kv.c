/* cli-kv.c -- parsing of the KV cache type and flash-attention flags (see cli-kv.h). */
#include "cli-kv.h"

#include <stdio.h>
#include <string.h>

/* The names the flags take; the library refuses, with one line, a type the build cannot store
 * (the quantized ones need the quantizers). */
static const enum loom_type cache_types[] = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0};

bool cli_parse_cache_type(const char * cmd, const char * opt, const char * arg, enum loom_type * out) {
    for (size_t i = 0; i < sizeof cache_types / sizeof cache_types[0]; i++) {
        if (!strcmp(arg, loom_type_name(cache_types[i]))) {
            *out = cache_types[i];
            return true;
        }
    }
    fprintf(stderr, "loom %s: invalid value '%s' for %s (f32, f16, bf16, q8_0 or q4_0)\n", cmd, arg, opt);
    return false;
}

bool cli_parse_flash_attn(const char * cmd, const char * opt, const char * arg, enum loom_llama_flash_attn * out) {
    if (!arg) *out = LOOM_LLAMA_FLASH_ATTN_ON; /* a bare -fa: the field's llama-cli and llama-perplexity turn it on */
    else if (!strcmp(arg, "on") || !strcmp(arg, "1")) *out = LOOM_LLAMA_FLASH_ATTN_ON;
    else if (!strcmp(arg, "off") || !strcmp(arg, "0")) *out = LOOM_LLAMA_FLASH_ATTN_OFF;
    else if (!strcmp(arg, "auto") || !strcmp(arg, "-1")) *out = LOOM_LLAMA_FLASH_ATTN_AUTO;
    else {
        fprintf(stderr, "loom %s: invalid value '%s' for %s (on, off or auto; 1, 0 or -1)\n", cmd, arg, opt);
        return false;
    }
    return true;
}

const char * cli_flash_attn_name(enum loom_llama_flash_attn fa) {
    return fa == LOOM_LLAMA_FLASH_ATTN_ON ? "on" : fa == LOOM_LLAMA_FLASH_ATTN_OFF ? "off" : "auto";
}

void cli_flash_attn_needs_value(const char * cmd, const char * opt, const char * got) {
    if (got) fprintf(stderr, "loom %s: option '%s' needs a value (on, off or auto; 1, 0 or -1; a comma list for several), not the option '%s'\n",
                     cmd, opt, got);
    else fprintf(stderr, "loom %s: option '%s' needs a value (on, off or auto; 1, 0 or -1; a comma list for several)\n", cmd, opt);
}
