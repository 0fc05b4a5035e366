/* sim-env.c -- placeholder: the simulated device lands with the backend-layer work. */
#include "backend/backend-impl.h"

size_t loom_sim_register_env_devices(loom_backend_dev_t * devs, size_t max);

size_t loom_sim_register_env_devices(loom_backend_dev_t * devs, size_t max) {
    (void)devs;
    (void)max;
    return 0;
}
