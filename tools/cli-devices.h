/* cli-devices.h -- devices as the commands show them (--list-devices, the memory breakdown table)
 * and -ngl, with its auto: the layers that fit on the offload device. */
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

/* The default -ngl: auto when a GPU is registered, else 0. */
long long cli_ngl_default(void);
/* -ngl auto: sets mp->n_gpu_layers to the layers of 'file' that fit on the offload device with
 * the context 'cp' and 'margin_mib' MiB left free (a dry run, loom_model_fit), and prints the
 * choice with the sizes it rests on (nothing when there is no device: 0 layers). False when the
 * dry run failed (its error logged, for cli_last_error). */
bool cli_fit_layers(struct loom_model_file * file, struct loom_model_params * mp, struct loom_llama_context_params cp, long long margin_mib);

#endif
