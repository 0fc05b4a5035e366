/* cli-kv.h -- the KV cache and attention flags shared by `loom run` and `loom bench`: cache types
 * (--cache-type-k/-ctk, --cache-type-v/-ctv) and flash attention (-fa), spelled as the field's tools. */
#ifndef LOOM_TOOLS_CLI_KV_H
#define LOOM_TOOLS_CLI_KV_H

#include "loom-llama.h"

#include <stdbool.h>

/* The cache type named 'arg' (f32, f16, bf16, q8_0, q4_0); on failure prints "loom CMD: invalid
 * value 'ARG' for OPTION (...)" and returns false. */
bool cli_parse_cache_type(const char * cmd, const char * opt, const char * arg, enum loom_type * out);
/* on|off|auto (also 1|0|-1); 'arg' NULL (a bare -fa, which the field's llama-cli and
 * llama-perplexity take as a switch) is on. On failure prints one line naming the choices and
 * returns false. */
bool cli_parse_flash_attn(const char * cmd, const char * opt, const char * arg, enum loom_llama_flash_attn * out);
/* bench's one line for a -fa without its value list (llama-bench's -fa takes one): 'got' the
 * option that came in its place, or NULL at the end of the command line. */
void cli_flash_attn_needs_value(const char * cmd, const char * opt, const char * got);
/* "on", "off" or "auto". */
const char * cli_flash_attn_name(enum loom_llama_flash_attn fa);

#endif
