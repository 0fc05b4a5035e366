/* test-ops.c -- runs `loom test-ops` on the CPU with each kernel path: the best SIMD one, AVX2,
 * AVX-512 with its own one-column kernels (LOOM_CPU_ISA=avx512), and the portable scalar one, and on a simulated discrete device (sim0), whose tensors live in
 * an address space of its own (LOOM_BIN, set by CTest, names the loom executable). */
#include "test-util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* The cases are hundreds of tiny graphs; on a machine shared with other work, OpenMP's default
 * spin-waiting at each barrier (for a partner thread that is not running) makes the run many
 * times slower, so the workers here sleep while they wait. Results do not depend on it. */
static int run(const char * bin, const char * env, const char * device, const char * what) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s OMP_WAIT_POLICY=passive '%s' test-ops -b %s -t 2", env, bin, device);
    printf("== %s: %s\n", what, cmd);
    fflush(stdout);
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

int main(void) {
    const char * bin = getenv("LOOM_BIN");
    if (!bin || !*bin) return test_skip("LOOM_BIN is not set (run through CTest)");
    if (strchr(bin, '\'')) return test_skip("LOOM_BIN contains a quote");
    CHECK(run(bin, "env -u LOOM_CPU_ISA", "CPU", "best SIMD kernels") == 0, "SIMD kernels");
    CHECK(run(bin, "env LOOM_CPU_ISA=avx2", "CPU", "AVX2 kernels (where the CPU has them)") == 0, "AVX2 kernels");
    CHECK(run(bin, "env LOOM_CPU_ISA=avx512", "CPU", "512-bit kernels, one-column products too (which AMD processors otherwise skip)") == 0,
          "512-bit one-column kernels");
    CHECK(run(bin, "env LOOM_CPU_ISA=scalar", "CPU", "scalar kernels") == 0, "scalar kernels");
    CHECK(run(bin, "env LOOM_SIM_DEVICES=1", "sim0", "the simulated discrete device") == 0, "sim0");
    return test_finish("test-ops");
}
