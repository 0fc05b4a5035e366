/* cli-devices.h -- devices as the commands show them: --list-devices and the memory breakdown table. */
#ifndef LOOM_TOOLS_CLI_DEVICES_H
#define LOOM_TOOLS_CLI_DEVICES_H

#include "loom-llama.h"

#include <stdbool.h>

/* Prints the registry's devices on stdout: name, description, type, total and free memory (MiB),
 * one a line under "Available devices:", or with 'json' an array of objects with the fields
 * name, type (CPU, GPU, ACCEL), description, memory_free and memory_total (bytes). */
void cli_list_devices(bool json);

/* Prints, for each device the run uses and then the host, the MiB a model and its context
 * ('lctx' may be NULL: the weights alone) hold: self = model + context (KV cache) + compute, and
 * for a device also total = free + self + unaccounted (memory held by others, or not counted). */
void cli_print_memory_breakdown(const struct loom_model * model, const struct loom_llama_context * lctx);

#endif
