/* test-sim-env.c -- loom_sim_register_env_devices: none by default, LOOM_SIM_DEVICES=N registers
 * sim0..sim{N-1} ahead of the CPU, LOOM_SIM_MAX_BUFFER_MB / LOOM_SIM_MEMORY_MB limit them, and bad
 * values are ignored with a warning. Each case runs in a child forked before the registry exists. */
#include "loom-backend.h"
#include "loom-sim.h"
#include "test-util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void quiet_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    (void)level;
    if (getenv("LOOM_DEBUG")) fprintf(stderr, "[log] %s\n", text);
}

static size_t count_sims(void) {
    size_t n = 0;
    for (size_t i = 0; i < loom_backend_dev_count(); i++) n += loom_sim_device_is_sim(loom_backend_dev_get(i));
    return n;
}

/* Runs 'fn' in a child with the given environment; returns its number of failed checks. */
static int in_child(void (*fn)(void), const char * devices, const char * max_mb, const char * mem_mb) {
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("LOOM_SIM_DEVICES");
        unsetenv("LOOM_SIM_MAX_BUFFER_MB");
        unsetenv("LOOM_SIM_MEMORY_MB");
        if (devices) setenv("LOOM_SIM_DEVICES", devices, 1);
        if (max_mb) setenv("LOOM_SIM_MAX_BUFFER_MB", max_mb, 1);
        if (mem_mb) setenv("LOOM_SIM_MEMORY_MB", mem_mb, 1);
        loom_log_set(quiet_log, NULL);
        (void)loom_sim_register_env_devices();
        fn();
        _exit(test_failures > 100 ? 100 : test_failures);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000;
}

static void none_by_default(void) { CHECK(count_sims() == 0, "no sim devices without LOOM_SIM_DEVICES"); }

static void two_limited(void) {
    CHECK(count_sims() == 2, "two sim devices");
    loom_backend_dev_t s0 = loom_backend_dev_by_name("sim0"), s1 = loom_backend_dev_by_name("sim1");
    CHECK(s0 && s1 && s0 != s1, "named sim0 and sim1");
    if (!s0 || !s1) return;
    size_t n = loom_backend_dev_count();
    CHECK(loom_backend_dev_get(n - 1) == loom_backend_dev_by_name("CPU"), "the CPU is last");
    CHECK(loom_backend_dev_get(n - 3) == s0 && loom_backend_dev_get(n - 2) == s1, "sim0, sim1, then the CPU");
    CHECK(loom_backend_dev_type(s0) == LOOM_BACKEND_DEV_TYPE_GPU, "a discrete device");
    loom_backend_buffer_type_t buft = loom_backend_dev_buffer_type(s0);
    CHECK(loom_backend_buft_get_max_size(buft) == (1u << 20), "LOOM_SIM_MAX_BUFFER_MB=1");
    size_t free_mem, total;
    loom_backend_dev_memory(s1, &free_mem, &total);
    CHECK(total == (3u << 20) && free_mem == total, "LOOM_SIM_MEMORY_MB=3");
    loom_backend_t be = loom_backend_init_by_name("sim0", NULL);
    CHECK(be != NULL, "init sim0 by name");
    loom_backend_buffer_t b[4];
    for (int i = 0; i < 4; i++) b[i] = loom_backend_alloc_buffer(be, 1u << 20);
    CHECK(b[0] && b[1] && b[2] && !b[3], "three 1 MiB buffers fit in 3 MiB, a fourth does not");
    CHECK(!loom_backend_alloc_buffer(be, (1u << 20) + 1), "over max_size");
    for (int i = 0; i < 4; i++) loom_backend_buffer_free(b[i]);
    loom_backend_free(be);
}

static void bad_values(void) {
    CHECK(count_sims() == 0, "LOOM_SIM_DEVICES=two is ignored");
}

static void bad_limits(void) {
    CHECK(count_sims() == 1, "one device");
    loom_backend_dev_t s0 = loom_backend_dev_by_name("sim0");
    CHECK(s0 && loom_backend_buft_get_max_size(loom_backend_dev_buffer_type(s0)) == SIZE_MAX, "a bad max buffer size is ignored");
}

int main(void) {
    CHECK(in_child(none_by_default, NULL, NULL, NULL) == 0, "default");
    CHECK(in_child(two_limited, "2", "1", "3") == 0, "LOOM_SIM_DEVICES=2");
    CHECK(in_child(bad_values, "two", NULL, NULL) == 0, "bad LOOM_SIM_DEVICES");
    CHECK(in_child(bad_limits, "1", "-5", NULL) == 0, "bad LOOM_SIM_MAX_BUFFER_MB");
    return test_finish("test-sim-env");
}
