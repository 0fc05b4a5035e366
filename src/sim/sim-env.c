/* sim-env.c -- LOOM_SIM_DEVICES=N: sim0..sim{N-1} made and registered for the command line and tests
 * (LOOM_SIM_MAX_BUFFER_MB, LOOM_SIM_MEMORY_MB and LOOM_SIM_REFUSE_QUANT=1 set their parameters). */
#include "sim-impl.h"

#include <stdio.h>
#include <stdlib.h>

size_t loom_sim_register_env_devices(void) {
    unsigned long long n = 0, mb;
    if (!loom_env_uint("LOOM_SIM_DEVICES", 1, 64, &n)) return 0;
    struct loom_sim_params p = loom_sim_default_params();
    const unsigned long long mb_limit = SIZE_MAX >> 20;
    if (loom_env_uint("LOOM_SIM_MAX_BUFFER_MB", 1, mb_limit, &mb)) p.max_buffer_size = (size_t)mb << 20;
    if (loom_env_uint("LOOM_SIM_MEMORY_MB", 1, mb_limit, &mb)) p.memory_size = (size_t)mb << 20;
    unsigned long long flag;
    if (loom_env_uint("LOOM_SIM_REFUSE_QUANT", 0, 1, &flag)) p.refuse_quant = flag == 1;
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "sim%zu", i);
        loom_backend_dev_t d = loom_sim_device_new(name, &p);
        if (!d) break;
        if (loom_backend_register_device(d) != LOOM_OK) {
            loom_log(LOOM_LOG_WARN, "LOOM_SIM_DEVICES=%llu: only %zu devices registered", n, added);
            loom_sim_device_free(d);
            break;
        }
        added++; /* lives as long as the process, like the registry itself */
    }
    return added;
}
