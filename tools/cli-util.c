/* cli-util.c -- strict argument parsing and small helpers shared by the subcommands. */
#include "cli-util.h"

#include "loom.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_parse_int(const char * cmd, const char * opt, const char * arg, long long lo, long long hi, long long * out) {
    char * end = NULL;
    errno = 0;
    long long v = arg ? strtoll(arg, &end, 10) : 0;
    if (!arg || !*arg || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "loom %s: invalid value '%s' for %s (expected an integer in %lld..%lld)\n", cmd, arg ? arg : "",
                opt, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_u64(const char * cmd, const char * opt, const char * arg, uint64_t * out) {
    char * end = NULL;
    errno = 0;
    unsigned long long v = arg && *arg != '-' ? strtoull(arg, &end, 10) : 0;
    if (!arg || !*arg || *arg == '-' || *end || errno) {
        fprintf(stderr, "loom %s: invalid value '%s' for %s (expected an integer in 0..18446744073709551615)\n", cmd,
                arg ? arg : "", opt);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_float(const char * cmd, const char * opt, const char * arg, double lo, double hi, double * out) {
    char * end = NULL;
    errno = 0;
    double v = arg ? strtod(arg, &end) : 0;
    if (!arg || !*arg || *end || errno || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "loom %s: invalid value '%s' for %s (expected a number in %g..%g)\n", cmd, arg ? arg : "", opt, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

int cli_parse_int_list(const char * cmd, const char * opt, const char * arg, long long lo, long long hi, long long * out, int max) {
    int n = 0;
    const char * p = arg;
    while (p) {
        const char * comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[64];
        if (len >= sizeof item || n >= max) {
            fprintf(stderr, "loom %s: invalid list '%s' for %s\n", cmd, arg, opt);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (!cli_parse_int(cmd, opt, item, lo, hi, &out[n])) return -1;
        n++;
        p = comma ? comma + 1 : NULL;
    }
    return n;
}

char * cli_read_file(const char * cmd, const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "loom %s: cannot open '%s': %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char * buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
        if (n + 1 == cap) {
            char * nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    bool err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "loom %s: cannot read '%s'\n", cmd, path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

static char g_last_error[1024];
static enum loom_log_level g_min_level = LOOM_LOG_WARN;

const char * cli_last_error(const char * fallback) { return g_last_error[0] ? g_last_error : fallback; }

/* Errors are kept, not printed: the command reports the failure itself, in one line. */
static void cli_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level == LOOM_LOG_ERROR) {
        snprintf(g_last_error, sizeof g_last_error, "%s", text);
        return;
    }
    if (level < g_min_level) return;
    fprintf(stderr, "%s%s\n", level == LOOM_LOG_WARN ? "warning: " : "", text);
}

void cli_log_setup(enum loom_log_level min_level) {
    g_min_level = min_level;
    loom_log_set(cli_log, NULL);
}
