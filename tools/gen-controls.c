/* gen-controls.c -- what steers `loom run`'s generation besides the sampler: logit biases, stop strings (-r), escapes in -p. */
#include "gen-controls.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool logit_bias_parse(const char * cmd, const char * arg, struct logit_bias * out) {
    char * end = NULL;
    errno = 0;
    const long id = strtol(arg, &end, 10);
    bool ok = end != arg && *arg >= '0' && *arg <= '9' && !errno && id <= INT32_MAX && (*end == '+' || *end == '-');
    double bias = 0;
    if (ok) {
        const char * num = end;
        errno = 0;
        bias = strtod(num, &end);
        ok = end != num && !*end && !isnan(bias) && (isinf(bias) || (!errno && fabs(bias) <= 1e30));
    }
    if (!ok) {
        fprintf(stderr, "loom %s: invalid value '%s' for --logit-bias (expected TOKEN+BIAS or TOKEN-BIAS, e.g. 15043+1, 2-inf)\n", cmd, arg);
        return false;
    }
    *out = (struct logit_bias){.token = (int32_t)id, .bias = (float)bias};
    return true;
}

bool logit_bias_check(const char * cmd, const struct logit_bias * b, int n, int32_t n_vocab) {
    for (int i = 0; i < n; i++) {
        if (b[i].token >= n_vocab) {
            fprintf(stderr, "loom %s: --logit-bias names token %d, outside the vocabulary (0..%d)\n", cmd, b[i].token, n_vocab - 1);
            return false;
        }
    }
    return true;
}

static int hex_value(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

size_t process_escapes(char * s, size_t len) {
    static const char from[] = "nrt\\'\"", to[] = "\n\r\t\\'\"";
    size_t w = 0;
    for (size_t r = 0; r < len; r++) {
        const char * e = s[r] == '\\' && r + 1 < len && s[r + 1] ? strchr(from, s[r + 1]) : NULL;
        if (e) {
            s[w++] = to[e - from];
            r++;
        } else if (s[r] == '\\' && r + 3 < len && s[r + 1] == 'x' && hex_value(s[r + 2]) >= 0 && hex_value(s[r + 3]) >= 0) {
            s[w++] = (char)(hex_value(s[r + 2]) * 16 + hex_value(s[r + 3]));
            r += 3;
        } else {
            s[w++] = s[r];
        }
    }
    s[w] = 0;
    return w;
}

bool stop_strings_push(struct stop_strings * st, const char * text, size_t len) {
    if (st->n == 0) return false;
    for (size_t i = 0; i < len; i++) {
        if (st->tail_len == st->longest) {
            memmove(st->tail, st->tail + 1, st->longest - 1);
            st->tail_len--;
        }
        st->tail[st->tail_len++] = text[i];
        for (int k = 0; k < st->n; k++) {
            const size_t n = strlen(st->strs[k]);
            if (n && n <= st->tail_len && !memcmp(st->tail + st->tail_len - n, st->strs[k], n)) return true;
        }
    }
    return false;
}
