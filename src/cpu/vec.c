/* vec.c -- chooses the CPU kernel table at run time: SIMD (AVX-512, AVX2) when the processor has
 * it (__builtin_cpu_supports), the portable scalar table when forced. */
#include "cpu/vec.h"
#include "loom-cpu.h"
#include "core/loom-internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const struct cpu_vec * g_best;   /* best table the CPU (and LOOM_CPU_ISA) allows */
static atomic_bool g_scalar;            /* forced scalar path */

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* F16C by CPUID leaf 1, ECX bit 29 (not every compiler's __builtin_cpu_supports knows "f16c"). */
static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

static const struct cpu_vec * detect(void) {
    const char * cap = loom_env_str("LOOM_CPU_ISA");
    if (cap && strcmp(cap, "avx512") && strcmp(cap, "avx2") && strcmp(cap, "scalar")) {
        /* an environment variable: a typo is worth a warning, not a failure (nor the slowest kernels) */
        loom_log(LOOM_LOG_WARN, "LOOM_CPU_ISA=%s ignored: expected avx512, avx2 or scalar", cap);
        cap = NULL;
    }
    bool allow512 = !cap || !strcmp(cap, "avx512");
    bool allow2 = allow512 || !strcmp(cap, "avx2");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (allow512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma") &&
        has_f16c() && lcpu_vec_avx512(false, false)) {
        /* named: the 512-bit kernels for every product (AMD processors otherwise take the AVX2 row kernels for one column) */
        return lcpu_vec_avx512(__builtin_cpu_supports("avx512bf16"), cap != NULL);
    }
    if (allow2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() &&
        lcpu_vec_avx2()) {
        return lcpu_vec_avx2();
    }
#else
    (void)allow2;
#endif
    return lcpu_vec_scalar();
}

static void init_once(void) { g_best = detect(); }

const struct cpu_vec * lcpu_vec_get(void) {
    pthread_once(&g_once, init_once);
    return atomic_load(&g_scalar) ? lcpu_vec_scalar() : g_best;
}

void loom_cpu_set_scalar(bool scalar) {
    pthread_once(&g_once, init_once);
    atomic_store(&g_scalar, scalar);
}

bool loom_cpu_get_scalar(void) {
    pthread_once(&g_once, init_once);
    return atomic_load(&g_scalar);
}

const char * loom_cpu_features(void) { return lcpu_vec_get()->name; }
