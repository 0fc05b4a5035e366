/* split.c -- which devices a model uses and how its layers (or, with -sm row, its heads and rows)
 * are shared between them: the field's --split-mode, --tensor-split and --main-gpu. */
#include "model-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char * loom_split_mode_name(enum loom_split_mode mode) {
    switch (mode) {
    case LOOM_SPLIT_MODE_NONE: return "none";
    case LOOM_SPLIT_MODE_LAYER: return "layer";
    case LOOM_SPLIT_MODE_ROW: return "row";
    default: return NULL;
    }
}

/* Adds the devices named in the comma list 'list' to devs (at most LOOM_MAX_DEVICES). */
static enum loom_status parse_list(const char * list, loom_backend_dev_t * devs, int * n) {
    *n = 0;
    for (const char * s = list; *s;) {
        const size_t len = strcspn(s, ",");
        char name[64];
        if (len == 0 || len >= sizeof name) {
            loom_log(LOOM_LOG_ERROR, "device list '%s': an empty or too long name", list);
            return LOOM_ERR_INVALID_ARG;
        }
        memcpy(name, s, len);
        name[len] = 0;
        loom_backend_dev_t d = loom_backend_dev_by_name(name);
        if (!d) {
            loom_log(LOOM_LOG_ERROR, "no device named '%s'", name);
            return LOOM_ERR_INVALID_ARG;
        }
        if (loom_backend_dev_type(d) == LOOM_BACKEND_DEV_TYPE_CPU) {
            loom_log(LOOM_LOG_ERROR, "'%s' is the host CPU, not an offload device", name);
            return LOOM_ERR_INVALID_ARG;
        }
        for (int i = 0; i < *n; i++) {
            if (devs[i] == d) {
                loom_log(LOOM_LOG_ERROR, "device list '%s' names %s twice", list, name);
                return LOOM_ERR_INVALID_ARG;
            }
        }
        if (*n == LOOM_MAX_DEVICES) {
            loom_log(LOOM_LOG_ERROR, "device list '%s': more than %d devices", list, LOOM_MAX_DEVICES);
            return LOOM_ERR_INVALID_ARG;
        }
        devs[(*n)++] = d;
        s += len + (s[len] == ',');
    }
    return LOOM_OK;
}

enum loom_status loom_model_pick_devices(struct loom_model * m, const struct loom_model_params * p) {
    m->n_devs = 0;
    m->dev_offload = NULL;
    m->split_mode = LOOM_SPLIT_MODE_NONE;
    if (!loom_split_mode_name(p->split_mode)) {
        loom_log(LOOM_LOG_ERROR, "split mode %d out of range (none, layer, row)", (int)p->split_mode);
        return LOOM_ERR_INVALID_ARG;
    }
    loom_backend_dev_t devs[LOOM_MAX_DEVICES];
    int n = 0;
    if (p->device) {
        enum loom_status st = parse_list(p->device, devs, &n);
        if (st != LOOM_OK) return st;
    } else {
        for (size_t i = 0; i < loom_backend_dev_count() && n < LOOM_MAX_DEVICES; i++) {
            loom_backend_dev_t d = loom_backend_dev_get(i);
            if (loom_backend_dev_type(d) != LOOM_BACKEND_DEV_TYPE_CPU) devs[n++] = d;
        }
    }
    if (p->main_gpu < 0 || (n > 0 && p->main_gpu >= n)) {
        loom_log(LOOM_LOG_ERROR, "main GPU %d outside the %d device%s (0..%d)", p->main_gpu, n, n == 1 ? "" : "s", n - 1);
        return LOOM_ERR_INVALID_ARG;
    }
    bool any = false;
    for (int i = 0; i < LOOM_MAX_DEVICES; i++) {
        if (!(p->tensor_split[i] >= 0.0f) || isinf(p->tensor_split[i])) {
            loom_log(LOOM_LOG_ERROR, "tensor split %d is %g: each share must be a finite number >= 0", i, (double)p->tensor_split[i]);
            return LOOM_ERR_INVALID_ARG;
        }
        if (p->tensor_split[i] > 0.0f && i >= n && n > 0) {
            loom_log(LOOM_LOG_ERROR, "tensor split gives a share to device %d, but there are %d devices", i, n);
            return LOOM_ERR_INVALID_ARG;
        }
        any = any || p->tensor_split[i] > 0.0f;
    }
    if (p->n_gpu_layers <= 0) return LOOM_OK;
    if (n == 0) return LOOM_OK; /* the loader warns (not fit.c's probe, which asks for one layer to see the devices) */
    if (p->split_mode == LOOM_SPLIT_MODE_NONE) { /* the main device alone */
        devs[0] = devs[p->main_gpu];
        n = 1;
        any = false;
    }
    double share[LOOM_MAX_DEVICES], total = 0;
    for (int i = 0; i < n; i++) {
        size_t free_mem = 0, total_mem = 0;
        if (any) {
            share[i] = p->tensor_split[i];
        } else {
            loom_backend_dev_memory(devs[i], &free_mem, &total_mem);
            share[i] = free_mem ? (double)free_mem : 1.0; /* a device that reports no memory: an equal share */
        }
        total += share[i];
    }
    /* devices given no share hold nothing: drop them, keeping the order */
    int k = 0;
    m->output_dev = 0;
    for (int i = 0; i < n; i++) {
        if (share[i] <= 0) continue;
        m->devs[k] = devs[i];
        m->split[k] = (float)(share[i] / total);
        if (i == (p->split_mode == LOOM_SPLIT_MODE_NONE ? 0 : p->main_gpu)) m->output_dev = k;
        k++;
    }
    m->n_devs = k;
    m->dev_offload = m->devs[0];
    m->split_mode = k > 1 ? p->split_mode : LOOM_SPLIT_MODE_NONE;
    if (p->split_mode == LOOM_SPLIT_MODE_ROW && m->output_dev >= k) m->output_dev = 0; /* the main device got no share */
    return LOOM_OK;
}

void loom_split_layers(int n_layer, int n_off, int n_dev, const float * split, int * dev) {
    if (n_off > n_layer) n_off = n_layer;
    const int first = n_layer - n_off;
    for (int il = 0; il < first; il++) dev[il] = -1;
    double cum = 0;
    int start = first;
    for (int d = 0; d < n_dev; d++) {
        cum += split[d];
        int end = d == n_dev - 1 ? n_layer : first + (int)floor(cum * n_off + 0.5);
        if (end > n_layer) end = n_layer;
        for (int il = start; il < end; il++) dev[il] = d;
        if (end > start) start = end;
    }
}

void loom_split_range(int64_t n, int64_t align, int n_dev, const float * split, int64_t * first, int64_t * count) {
    const int64_t units = n / align;
    double cum = 0;
    int64_t start = 0;
    for (int d = 0; d < n_dev; d++) {
        cum += split[d];
        int64_t end = d == n_dev - 1 ? units : (int64_t)floor(cum * (double)units + 0.5);
        if (end < start) end = start;
        if (end > units) end = units;
        first[d] = start * align;
        count[d] = (end - start) * align;
        start = end;
    }
}

enum loom_split_mode loom_model_split_mode(const struct loom_model * m) { return m->split_mode; }
int loom_model_n_devices(const struct loom_model * m) { return m->n_devs; }

loom_backend_dev_t loom_model_layer_device(const struct loom_model * m, int il) {
    if (il < 0 || il >= m->hp.n_layer || m->layers[il].dev < 0) return NULL;
    return m->devs[m->layers[il].dev];
}
