/* sim-env.c -- the registry's hook: LOOM_SIM_DEVICES=N creates sim0..sim{N-1}; none by default. */
#include "sim-impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Reads a positive integer from environment variable 'var' into '*out'; false (warned) when the
 * variable is set but is not one, false silently when it is unset. */
static bool env_positive(const char * var, unsigned long long limit, unsigned long long * out) {
    const char * s = getenv(var);
    if (!s || !s[0]) return false;
    char * end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v == 0 || v > limit || s[0] == '-') {
        loom_log(LOOM_LOG_WARN, "%s=%s ignored: expected a whole number from 1 to %llu", var, s, limit);
        return false;
    }
    *out = v;
    return true;
}

size_t loom_sim_register_env_devices(loom_backend_dev_t * devs, size_t max) {
    unsigned long long n = 0, mb;
    if (!env_positive("LOOM_SIM_DEVICES", 64, &n)) return 0;
    struct loom_sim_params p = loom_sim_default_params();
    const unsigned long long mb_limit = SIZE_MAX >> 20;
    if (env_positive("LOOM_SIM_MAX_BUFFER_MB", mb_limit, &mb)) p.max_buffer_size = (size_t)mb << 20;
    if (env_positive("LOOM_SIM_MEMORY_MB", mb_limit, &mb)) p.memory_size = (size_t)mb << 20;
    if (n > max) {
        loom_log(LOOM_LOG_WARN, "LOOM_SIM_DEVICES=%llu: only %zu more devices fit in the registry", n, max);
        n = max;
    }
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "sim%zu", i);
        loom_backend_dev_t d = loom_sim_device_new(name, &p);
        if (!d) break;
        devs[added++] = d; /* lives as long as the process, like the registry itself */
    }
    return added;
}
