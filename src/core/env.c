/* env.c -- the environment variables the library reads, parsed one way (docs/DESIGN.md lists them). */
#include "loom.h"
#include "core/loom-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool loom_env_uint(const char * var, unsigned long long lo, unsigned long long hi, unsigned long long * out) {
    const char * s = getenv(var);
    if (!s || !s[0]) return false;
    char * end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi || s[0] == '-' || s[0] == '+' || s[0] == ' ') {
        loom_log(LOOM_LOG_WARN, "%s=%s ignored: expected a whole number from %llu to %llu", var, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

const char * loom_env_str(const char * var) {
    const char * s = getenv(var);
    return s && s[0] ? s : NULL;
}

bool loom_env_flag(const char * var, bool dflt) {
    const char * s = getenv(var);
    if (!s || !s[0]) return dflt;
    return strcmp(s, "0") != 0;
}
