/* sim-env.c -- the registry's hook: LOOM_SIM_DEVICES=N creates sim0..sim{N-1}; none by default
 * (LOOM_SIM_MAX_BUFFER_MB, LOOM_SIM_MEMORY_MB and LOOM_SIM_REFUSE_QUANT=1 set their parameters). */
#include "sim-impl.h"

#include <stdio.h>
#include <stdlib.h>

size_t loom_sim_register_env_devices(loom_backend_dev_t * devs, size_t max) {
    unsigned long long n = 0, mb;
    if (!loom_env_uint("LOOM_SIM_DEVICES", 1, 64, &n)) return 0;
    struct loom_sim_params p = loom_sim_default_params();
    const unsigned long long mb_limit = SIZE_MAX >> 20;
    if (loom_env_uint("LOOM_SIM_MAX_BUFFER_MB", 1, mb_limit, &mb)) p.max_buffer_size = (size_t)mb << 20;
    if (loom_env_uint("LOOM_SIM_MEMORY_MB", 1, mb_limit, &mb)) p.memory_size = (size_t)mb << 20;
    unsigned long long flag;
    if (loom_env_uint("LOOM_SIM_REFUSE_QUANT", 0, 1, &flag)) p.refuse_quant = flag == 1;
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
