/* cli-devices.c -- devices as the commands show them: --list-devices, and the memory breakdown table
 * (per device, total = free + (model + context + compute) + unaccounted). */
#include "cli-devices.h"

#include "cli-util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long mib(size_t bytes) { return (long long)((bytes + (1 << 19)) >> 20); }

static const char * type_name(enum loom_backend_dev_type t) {
    return t == LOOM_BACKEND_DEV_TYPE_CPU ? "CPU" : t == LOOM_BACKEND_DEV_TYPE_GPU ? "GPU" : "ACCEL";
}

/* 's' as a JSON string's contents (quotes, backslashes and control characters escaped). */
static void json_string(FILE * f, const char * s) {
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

void cli_list_devices(bool json) {
    const size_t n = loom_backend_dev_count();
    if (json) printf("[\n");
    else printf("Available devices:\n");
    for (size_t i = 0; i < n; i++) {
        loom_backend_dev_t dev = loom_backend_dev_get(i);
        size_t free_mem = 0, total = 0;
        loom_backend_dev_memory(dev, &free_mem, &total);
        if (json) {
            printf("  {\"name\": \"");
            json_string(stdout, loom_backend_dev_name(dev));
            printf("\", \"type\": \"%s\", \"description\": \"", type_name(loom_backend_dev_type(dev)));
            json_string(stdout, loom_backend_dev_description(dev));
            printf("\", \"memory_free\": %zu, \"memory_total\": %zu}%s\n", free_mem, total, i + 1 < n ? "," : "");
        } else {
            printf("  %s: %s (%s, %lld MiB, %lld MiB free)\n", loom_backend_dev_name(dev), loom_backend_dev_description(dev),
                   type_name(loom_backend_dev_type(dev)), mib(total), mib(free_mem));
        }
    }
    if (json) printf("]\n");
}

void cli_print_memory_breakdown(const struct loom_model * model, const struct loom_llama_context * lctx) {
    fprintf(stderr, "memory breakdown [MiB] | %7s   %7s   %7s   %7s   %7s   %7s   %11s\n", "total", "free", "self", "model", "context",
            "compute", "unaccounted");
    for (size_t i = 0; i < loom_backend_dev_count(); i++) {
        loom_backend_dev_t dev = loom_backend_dev_get(i);
        if (loom_backend_dev_type(dev) == LOOM_BACKEND_DEV_TYPE_CPU) continue;
        struct loom_llama_memory m;
        loom_llama_memory_breakdown(model, lctx, dev, &m);
        const size_t self = m.model + m.context + m.compute;
        if (!self) continue; /* a device this run does not use */
        size_t free_mem = 0, total = 0;
        loom_backend_dev_memory(dev, &free_mem, &total);
        const long long unaccounted = mib(total) - mib(free_mem) - mib(self);
        fprintf(stderr, "  - %-19s| %7lld = %7lld + (%7lld = %7lld + %7lld + %7lld) + %11lld\n", loom_backend_dev_name(dev), mib(total),
                mib(free_mem), mib(self), mib(m.model), mib(m.context), mib(m.compute), unaccounted);
    }
    struct loom_llama_memory h;
    loom_llama_memory_breakdown(model, lctx, NULL, &h);
    fprintf(stderr, "  - %-19s| %7s   %7s   %7lld = %7lld + %7lld + %7lld\n", "Host", "", "", mib(h.model + h.context + h.compute),
            mib(h.model), mib(h.context), mib(h.compute));
}

long long cli_ngl_default(void) { return loom_backend_dev_by_type(LOOM_BACKEND_DEV_TYPE_GPU) ? CLI_NGL_AUTO : 0; }

bool cli_fit_layers(struct loom_model_file * file, struct loom_model_params * mp, struct loom_llama_context_params cp, long long margin_mib) {
    struct loom_fit * f = malloc(sizeof *f);
    if (!f || loom_model_fit(file, *mp, cp, (size_t)margin_mib << 20, f) != LOOM_OK) {
        free(f);
        return false;
    }
    mp->n_gpu_layers = f->n_gpu_layers;
    if (f->device) {
        const double M = 1048576.0;
        uint64_t weights = 0;
        for (int i = 0; i < f->n_layer; i++) weights += f->layer_bytes[i];
        fprintf(stderr, "-ngl auto: %d of %d layers on %s (%.2f MiB of layer weights + %.2f MiB of KV cache per layer on average, "
                        "output %.2f MiB, compute %.2f MiB; %.2f MiB free, %.2f MiB kept free; %.2f MiB placed)\n",
                f->n_gpu_layers, f->n_layer, f->device, weights / M / (f->n_layer ? f->n_layer : 1), f->kv_layer_bytes / M,
                f->output_bytes / M, f->compute_bytes / M, f->free_bytes / M, f->margin_bytes / M, f->need_bytes / M);
    }
    free(f);
    return true;
}
