/* registry.c -- the list of devices in priority order: GPUs, devices registered at run time, then the CPU. */
#include "backend-impl.h"

#include <pthread.h>
#include <strings.h>

#define MAX_DEVICES 64

static loom_backend_dev_t g_devs[MAX_DEVICES]; /* everything but the CPU, in priority order */
static size_t g_n_devs;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void registry_init(void) {
    g_n_devs += loom_cuda_register_devices(g_devs + g_n_devs, MAX_DEVICES - g_n_devs);
}

size_t loom_backend_dev_count(void) {
    pthread_once(&g_once, registry_init);
    return g_n_devs + 1;
}

loom_backend_dev_t loom_backend_dev_get(size_t index) {
    size_t n = loom_backend_dev_count();
    if (index >= n) return NULL;
    pthread_mutex_lock(&g_lock);
    loom_backend_dev_t d = index < g_n_devs ? g_devs[index] : loom_cpu_device();
    pthread_mutex_unlock(&g_lock);
    return d;
}

loom_backend_dev_t loom_backend_dev_by_name(const char * name) {
    if (!name) return NULL;
    for (size_t i = 0; i < loom_backend_dev_count(); i++) {
        loom_backend_dev_t d = loom_backend_dev_get(i);
        if (d && !strcasecmp(loom_backend_dev_name(d), name)) return d;
    }
    return NULL;
}

loom_backend_dev_t loom_backend_dev_by_type(enum loom_backend_dev_type type) {
    for (size_t i = 0; i < loom_backend_dev_count(); i++) {
        loom_backend_dev_t d = loom_backend_dev_get(i);
        if (d && loom_backend_dev_type(d) == type) return d;
    }
    return NULL;
}

enum loom_status loom_backend_register_device(loom_backend_dev_t dev) {
    pthread_once(&g_once, registry_init);
    if (loom_backend_dev_by_name(loom_backend_dev_name(dev))) {
        loom_log(LOOM_LOG_ERROR, "a device named '%s' is already registered", loom_backend_dev_name(dev));
        return LOOM_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&g_lock);
    enum loom_status st = LOOM_OK;
    if (g_n_devs >= MAX_DEVICES) {
        st = LOOM_ERR_OOM;
    } else {
        g_devs[g_n_devs++] = dev;
    }
    pthread_mutex_unlock(&g_lock);
    return st;
}

void loom_backend_unregister_device(loom_backend_dev_t dev) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n_devs; i++) {
        if (g_devs[i] == dev) {
            for (size_t j = i + 1; j < g_n_devs; j++) g_devs[j - 1] = g_devs[j];
            g_n_devs--;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

loom_backend_t loom_backend_init_by_name(const char * name, const char * params) {
    loom_backend_dev_t d = loom_backend_dev_by_name(name);
    if (!d) {
        loom_log(LOOM_LOG_ERROR, "no device named '%s' (see the registry: CPU, CUDA0, sim0 with LOOM_SIM_DEVICES=1, ...)", name ? name : "(null)");
        return NULL;
    }
    return loom_backend_dev_init(d, params);
}
