/* cuda-module.c -- the library's side of the CUDA backend: loads libloom-cuda.so (cuda-module.h)
 * when the registry is first used on a machine with an NVIDIA driver, and implements loom-cuda.h
 * through it. Without a driver, or without the module, there are no CUDA devices. */
#define _GNU_SOURCE /* dladdr */
#include "backend/backend-impl.h"
#include "backend/comm-impl.h"
#include "cuda/cuda-module.h"
#include "loom-cuda.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LOOM_CUDA_MODULE_LIBDIR
#define LOOM_CUDA_MODULE_LIBDIR "lib" /* the install's library folder, relative to the prefix */
#endif

/* The library functions the module calls. A program linked with libloom.a holds only the objects
 * it uses; this table makes it hold these too, and --export-dynamic (the static library's link
 * option) lets the module find them. tests/cuda-module-symbols.sh checks that the list is whole. */
__attribute__((used)) static const void * const g_module_needs[] = {
    (const void *)loom_are_same_shape, (const void *)loom_backend_buffer_get_usage, (const void *)loom_backend_buffer_init,
    (const void *)loom_backend_buffer_is_host, (const void *)loom_backend_buft_name,
    (const void *)loom_backend_dev_name, (const void *)loom_blck_size, (const void *)loom_can_repeat, (const void *)loom_env_str,
    (const void *)loom_env_uint, (const void *)loom_get_op_param_f32, (const void *)loom_get_op_param_i32, (const void *)loom_is_contiguous,
    (const void *)loom_log, (const void *)loom_nbytes, (const void *)loom_nelements, (const void *)loom_op_is_view, (const void *)loom_op_name, (const void *)loom_rope_is_plain,
    (const void *)loom_status_str, (const void *)loom_time_us, (const void *)loom_type_name, (const void *)loom_type_size,
};

static const struct lc_module_api * g_api; /* set once, by the registry's first use */

/* The module at 'dir'/'rel'/LC_MODULE_FILE, or NULL (the reason logged at debug level). */
static const struct lc_module_api * open_module(const char * dir, const char * rel) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s%s%s/%s", dir, rel[0] ? "/" : "", rel, LC_MODULE_FILE) >= (int)sizeof path) return NULL;
    void * h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        loom_log(LOOM_LOG_DEBUG, "CUDA module: %s", dlerror());
        return NULL;
    }
    lc_module_entry_fn entry = (lc_module_entry_fn)dlsym(h, LC_MODULE_ENTRY);
    const struct lc_module_api * api = entry ? entry(LC_MODULE_API) : NULL;
    if (!api) {
        loom_log(LOOM_LOG_WARN, "CUDA module %s is of another version of Loom; no CUDA devices", path);
        dlclose(h);
        return NULL;
    }
    loom_log(LOOM_LOG_DEBUG, "CUDA module: %s", path);
    return api; /* loaded for the life of the process, like the devices it registers */
}

/* Looks for the module beside the object that holds this code (the program, or libloom.so), in the
 * install's library folder beside that, then where the dynamic loader looks. */
static const struct lc_module_api * load_module(void) {
    void * driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver) return NULL; /* no NVIDIA driver: no GPU, and nothing to say */
    char dirs[2][PATH_MAX];
    int n = 0;
    Dl_info info;
    if (dladdr((const void *)load_module, &info) && info.dli_fname && realpath(info.dli_fname, dirs[n])) n++;
    if (realpath("/proc/self/exe", dirs[n])) n++;
    for (int i = 0; i < n; i++) {
        char * slash = strrchr(dirs[i], '/');
        if (!slash) continue;
        *slash = 0;
        const struct lc_module_api * api = open_module(dirs[i], "");
        if (!api) api = open_module(dirs[i], "../" LOOM_CUDA_MODULE_LIBDIR);
        if (api) return api;
    }
    void * h = dlopen(LC_MODULE_FILE, RTLD_NOW | RTLD_LOCAL);
    lc_module_entry_fn entry = h ? (lc_module_entry_fn)dlsym(h, LC_MODULE_ENTRY) : NULL;
    const struct lc_module_api * api = entry ? entry(LC_MODULE_API) : NULL;
    if (!api) loom_log(LOOM_LOG_WARN, "CUDA backend module %s not found beside the program or libloom; no CUDA devices", LC_MODULE_FILE);
    return api;
}

size_t loom_cuda_register_devices(loom_backend_dev_t * devs, size_t max) {
    (void)g_module_needs;
    g_api = load_module();
    return g_api ? g_api->register_devices(devs, max) : 0;
}

size_t loom_cuda_device_count(void) {
    size_t n = 0;
    for (size_t i = 0; i < loom_backend_dev_count(); i++) n += loom_backend_dev_is_cuda(loom_backend_dev_get(i));
    return n;
}

bool loom_backend_dev_is_cuda(loom_backend_dev_t dev) {
    (void)loom_backend_dev_count(); /* the registry (and the module) first */
    return dev && g_api && g_api->dev_is_cuda(dev);
}

bool loom_backend_is_cuda(loom_backend_t backend) {
    (void)loom_backend_dev_count();
    return backend && g_api && g_api->backend_is_cuda(backend);
}

enum loom_status loom_cuda_set_max_buffer_size(loom_backend_dev_t dev, size_t bytes) {
    if (!loom_backend_dev_is_cuda(dev)) {
        loom_log(LOOM_LOG_ERROR, "loom_cuda_set_max_buffer_size: '%s' is not a CUDA device", dev ? loom_backend_dev_name(dev) : "(null)");
        return LOOM_ERR_INVALID_ARG;
    }
    return g_api->set_max_buffer_size(dev, bytes);
}

enum loom_status loom_cuda_get_stats(loom_backend_t backend, struct loom_cuda_stats * stats) {
    if (!loom_backend_is_cuda(backend) || !stats) {
        loom_log(LOOM_LOG_ERROR, "loom_cuda_get_stats: %s", stats ? "not a CUDA backend" : "no place for the counts");
        return LOOM_ERR_INVALID_ARG;
    }
    g_api->get_stats(backend, stats);
    return LOOM_OK;
}

loom_backend_comm_t loom_cuda_comm_new(loom_backend_t * backends, int n) {
    if (!g_api) return NULL; /* no CUDA backend can exist without the module */
    loom_backend_comm_t c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n = n;
    memcpy(c->backends, backends, (size_t)n * sizeof *backends);
    if (g_api->comm_init(c) != LOOM_OK) {
        free(c);
        return NULL;
    }
    return c;
}
