/* cli-split.c -- -sm, -ts, -mg and the -dev list for the commands that load a model. */
#include "cli-split.h"
#include "cli-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void cli_split_init(struct cli_split * s) {
    memset(s, 0, sizeof *s);
    s->mode = LOOM_SPLIT_MODE_LAYER;
}

/* The field's -ts: shares separated by commas or slashes ("3,1", "3/1"). */
static bool parse_ts(const char * cmd, const char * arg, float * ts) {
    memset(ts, 0, LOOM_MAX_DEVICES * sizeof *ts);
    int n = 0;
    const char * s = arg;
    while (*s) {
        const size_t len = strcspn(s, ",/");
        char buf[32];
        char * end = NULL;
        if (len == 0 || len >= sizeof buf || n == LOOM_MAX_DEVICES) goto bad;
        memcpy(buf, s, len);
        buf[len] = 0;
        const double v = strtod(buf, &end);
        if (*end || !(v >= 0) || !isfinite(v) || v > 1e9) goto bad;
        ts[n++] = (float)v;
        s += len;
        if (*s) {
            s++;
            if (!*s) goto bad; /* a trailing separator */
        }
    }
    for (int i = 0; i < n; i++) {
        if (ts[i] > 0) return true;
    }
bad:
    fprintf(stderr, "loom %s: invalid value '%s' for -ts (shares >= 0, at least one > 0, comma-separated, at most %d)\n", cmd, arg,
            LOOM_MAX_DEVICES);
    return false;
}

bool cli_split_option(const char * cmd, int c, const char * arg, struct cli_split * s) {
    switch (c) {
    case CLI_OPT_SPLIT_MODE:
        for (int m = 0; m < LOOM_SPLIT_MODE_COUNT; m++) {
            if (!strcasecmp(arg, loom_split_mode_name((enum loom_split_mode)m))) {
                s->mode = (enum loom_split_mode)m;
                return true;
            }
        }
        fprintf(stderr, "loom %s: invalid value '%s' for -sm (none, layer or row)\n", cmd, arg);
        return false;
    case CLI_OPT_TENSOR_SPLIT: return parse_ts(cmd, arg, s->ts);
    case CLI_OPT_MAIN_GPU: return cli_parse_int(cmd, "-mg", arg, 0, LOOM_MAX_DEVICES - 1, &s->main_gpu);
    default: return false;
    }
}

void cli_split_apply(const struct cli_split * s, struct loom_model_params * mp) {
    mp->split_mode = s->mode;
    memcpy(mp->tensor_split, s->ts, sizeof mp->tensor_split);
    mp->main_gpu = (int)s->main_gpu;
}

bool cli_check_devices(const char * cmd, const char * list) {
    char names[LOOM_MAX_DEVICES][64];
    int n = 0;
    for (const char * s = list; ; ) {
        const size_t len = strcspn(s, ",");
        if (len == 0 || len >= sizeof names[0] || n == LOOM_MAX_DEVICES) {
            fprintf(stderr, "loom %s: invalid device list '%s' (names separated by commas, at most %d)\n", cmd, list, LOOM_MAX_DEVICES);
            return false;
        }
        memcpy(names[n], s, len);
        names[n][len] = 0;
        loom_backend_dev_t d = loom_backend_dev_by_name(names[n]);
        if (!d) {
            fprintf(stderr, "loom %s: no device named '%s' (available: %s)\n", cmd, names[n], cli_device_list());
            return false;
        }
        if (loom_backend_dev_type(d) == LOOM_BACKEND_DEV_TYPE_CPU) {
            fprintf(stderr, "loom %s: '%s' is the host CPU, not an offload device (use --device none for no offload)\n", cmd, names[n]);
            return false;
        }
        for (int i = 0; i < n; i++) {
            if (!strcmp(names[i], names[n])) {
                fprintf(stderr, "loom %s: device '%s' is listed twice\n", cmd, names[n]);
                return false;
            }
        }
        n++;
        if (!s[len]) break;
        s += len + 1;
    }
    return true;
}
