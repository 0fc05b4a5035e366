/* cpus.c -- how many CPUs this process may run on, and the default thread count. */
#define _GNU_SOURCE
#include "loom.h"
#include "core/loom-internal.h"

#include <sched.h>
#include <unistd.h>

int loom_n_cpus(void) {
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int loom_default_n_threads(void) {
    unsigned long long n;
    return loom_env_uint("LOOM_N_THREADS", 1, 1024, &n) ? (int)n : loom_n_cpus();
}
