/* cli-util.c -- strict argument parsing and small helpers shared by the subcommands. */
#include "cli-util.h"

#include "loom.h"
#include "core/loom-internal.h"
#include "loom-backend.h"
#include "loom-vocab.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_parse_int(const char * cmd, const char * opt, const char * arg, long long lo, long long hi, long long * out) {
    char * end = NULL;
    errno = 0;
    long long v = arg ? strtoll(arg, &end, 10) : 0;
    if (!arg || !*arg || isspace((unsigned char)*arg) || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "loom %s: invalid value '%s' for %s (expected an integer in %lld..%lld)\n", cmd, arg ? arg : "",
                opt, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_u64(const char * cmd, const char * opt, const char * arg, uint64_t hi, uint64_t * out) {
    char * end = NULL;
    errno = 0;
    unsigned long long v = arg && *arg != '-' ? strtoull(arg, &end, 10) : 0;
    if (!arg || !*arg || *arg == '-' || isspace((unsigned char)*arg) || *end || errno || v > hi) {
        fprintf(stderr, "loom %s: invalid value '%s' for %s (expected an integer in 0..%llu)\n", cmd, arg ? arg : "", opt,
                (unsigned long long)hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_float(const char * cmd, const char * opt, const char * arg, double lo, double hi, double * out) {
    char * end = NULL;
    errno = 0;
    double v = arg ? strtod(arg, &end) : 0;
    if (!arg || !*arg || isspace((unsigned char)*arg) || *end || errno || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "loom %s: invalid value '%s' for %s (expected a number in %g..%g)\n", cmd, arg ? arg : "", opt, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_ngl(const char * cmd, const char * arg, long long * out) {
    if (!strcmp(arg, "auto")) {
        *out = CLI_NGL_AUTO;
        return true;
    }
    char * end = NULL;
    errno = 0;
    const long long v = strtoll(arg, &end, 10);
    if (!*arg || isspace((unsigned char)*arg) || *end || errno || v < 0 || v > 100000) {
        fprintf(stderr, "loom %s: invalid value '%s' for -ngl (expected auto or an integer in 0..100000)\n", cmd, arg);
        return false;
    }
    *out = v;
    return true;
}

int cli_parse_list(const char * cmd, const char * opt, const char * arg, int max, cli_list_item item, void * ctx) {
    int n = 0;
    for (const char * p = arg; p; n++) {
        const char * comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char s[64];
        if (n >= max) {
            fprintf(stderr, "loom %s: %s takes at most %d values, got more in '%s'\n", cmd, opt, max, arg);
            return -1;
        }
        if (len == 0 || len >= sizeof s) {
            fprintf(stderr, "loom %s: invalid list '%s' for %s\n", cmd, arg, opt);
            return -1;
        }
        memcpy(s, p, len);
        s[len] = 0;
        if (!item(ctx, n, s)) return -1;
        p = comma ? comma + 1 : NULL;
    }
    return n;
}

struct int_list {
    const char * cmd, * opt;
    long long lo, hi, * out;
    bool ngl; /* -ngl's values: counts or auto */
};

static bool int_item(void * ctx, int i, const char * s) {
    const struct int_list * l = ctx;
    return l->ngl ? cli_parse_ngl(l->cmd, s, &l->out[i]) : cli_parse_int(l->cmd, l->opt, s, l->lo, l->hi, &l->out[i]);
}

int cli_parse_int_list(const char * cmd, const char * opt, const char * arg, long long lo, long long hi, long long * out, int max) {
    struct int_list l = {cmd, opt, lo, hi, out, false};
    return cli_parse_list(cmd, opt, arg, max, int_item, &l);
}

int cli_parse_ngl_list(const char * cmd, const char * arg, long long * out, int max) {
    struct int_list l = {cmd, "-ngl", 0, 0, out, true};
    return cli_parse_list(cmd, "-ngl", arg, max, int_item, &l);
}

char * cli_read_file(const char * cmd, const char * path, size_t * len) {
    void * data = NULL;
    size_t n = 0;
    if (loom_read_file(path, (size_t)1 << 30, &data, &n) != LOOM_OK) {
        fprintf(stderr, "loom %s: %s\n", cmd, cli_last_error("cannot read the file"));
        return NULL;
    }
    if (len) *len = n;
    return data;
}

/* Standard input to its end, at most 'max' bytes. */
static char * read_stdin(const char * cmd, size_t max, size_t * len) {
    size_t n = 0, cap = 1 << 16;
    char * buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            char * grown = cap < max ? realloc(buf, (cap *= 2) + 1) : NULL;
            if (!grown) break;
            buf = grown;
        }
        const size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) {
            if (ferror(stdin)) break;
            buf[n] = 0;
            *len = n;
            return buf;
        }
    }
    fprintf(stderr, "loom %s: cannot read standard input: %s\n", cmd, !buf || n == cap ? "too large or out of memory" : strerror(errno));
    free(buf);
    return NULL;
}

char * cli_read_input(const char * cmd, const char * path, size_t * len) {
    return !strcmp(path, "-") ? read_stdin(cmd, (size_t)1 << 30, len) : cli_read_file(cmd, path, len);
}

char * cli_read_prompt_file(const char * cmd, const char * path, size_t * len) {
    size_t n = 0;
    char * text = cli_read_input(cmd, path, &n);
    if (!text) return NULL;
    if (n && text[n - 1] == '\n') text[--n] = 0;
    *len = n;
    return text;
}

static char g_last_error[1024];
static enum loom_log_level g_min_level = LOOM_LOG_WARN;

const char * cli_last_error(const char * fallback) { return g_last_error[0] ? g_last_error : fallback; }

void cli_name_last_error(const char * path, const char * fallback) {
    if (!g_last_error[0]) snprintf(g_last_error, sizeof g_last_error, "%s", fallback);
    if (strstr(g_last_error, path)) return;
    char named[sizeof g_last_error];
    if (snprintf(named, sizeof named, "%s: %s", path, g_last_error) < 0) return; /* a long one is cut at the buffer's end */
    memcpy(g_last_error, named, sizeof named);
}

void cli_hint_last_error(enum loom_status st, const char * hint) {
    const size_t n = strlen(g_last_error);
    if (st == LOOM_ERR_OOM && n) snprintf(g_last_error + n, sizeof g_last_error - n, " (%s)", hint);
}

/* True when 'text' was already printed as a warning (the last 64 distinct ones are remembered). */
static bool seen_before(const char * text) {
    static uint64_t seen[64];
    static unsigned n_seen;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char * p = (const unsigned char *)text; *p; p++) h = (h ^ *p) * 1099511628211ull;
    for (unsigned i = 0; i < n_seen && i < 64; i++) {
        if (seen[i] == h) return true;
    }
    seen[n_seen++ % 64] = h;
    return false;
}

/* Errors are kept, not printed: the command reports the failure itself, in one line. */
/* Info lines held by cli_log_hold (NUL-terminated, each ending in a newline), under g_held_mu. */
static struct {
    bool on;
    char * text;
    size_t len, cap;
} g_held;
static pthread_mutex_t g_held_mu = PTHREAD_MUTEX_INITIALIZER;

/* Appends an info line to the held ones; false (the caller prints it) when out of memory. */
static bool hold_line(const char * text) {
    const size_t n = strlen(text);
    if (g_held.len + n + 2 > g_held.cap) {
        size_t cap = g_held.cap ? g_held.cap : 1024;
        while (cap < g_held.len + n + 2) cap *= 2;
        char * t = realloc(g_held.text, cap);
        if (!t) return false;
        g_held.text = t, g_held.cap = cap;
    }
    memcpy(g_held.text + g_held.len, text, n);
    g_held.len += n;
    g_held.text[g_held.len++] = '\n';
    g_held.text[g_held.len] = 0;
    return true;
}

void cli_log_hold(void) {
    pthread_mutex_lock(&g_held_mu);
    g_held.on = g_min_level == LOOM_LOG_INFO; /* with -v (debug) everything goes out as it comes */
    pthread_mutex_unlock(&g_held_mu);
}

void cli_log_release(bool print) {
    pthread_mutex_lock(&g_held_mu);
    if (print && g_held.len) fputs(g_held.text, stderr);
    free(g_held.text);
    g_held.text = NULL, g_held.len = g_held.cap = 0, g_held.on = false;
    pthread_mutex_unlock(&g_held_mu);
}

static void cli_log(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    if (level == LOOM_LOG_ERROR) {
        snprintf(g_last_error, sizeof g_last_error, "%s", text);
        return;
    }
    if (level < g_min_level) return;
    if (level == LOOM_LOG_INFO) {
        pthread_mutex_lock(&g_held_mu);
        const bool held = g_held.on && hold_line(text);
        pthread_mutex_unlock(&g_held_mu);
        if (held) return;
    }
    if (level == LOOM_LOG_WARN && seen_before(text)) return; /* e.g. a model's metadata read to check, then to load */
    fprintf(stderr, "%s%s\n", level == LOOM_LOG_WARN ? "warning: " : "", text);
}

void cli_log_setup(enum loom_log_level min_level) {
    g_min_level = loom_env_flag("LOOM_DEBUG", false) ? LOOM_LOG_DEBUG : min_level;
    loom_log_set(cli_log, NULL);
}

static const char * g_opt_text = "";

const char * cli_option_text(void) { return g_opt_text; }

static const struct option * g_longopts; /* those of the last cli_getopt call */

void cli_option_error(const char * cmd, int c) {
    if (c == ':') {
        fprintf(stderr, "loom %s: option '%s' needs a value\n", cmd, g_opt_text);
        return;
    }
    const char * name = g_opt_text;
    while (*name == '-') name++;
    const size_t len = strcspn(name, "=");
    bool novalue = false;
    for (int i = 0; name[len] == '=' && g_longopts && g_longopts[i].name && !novalue; i++) {
        novalue = g_longopts[i].has_arg == no_argument && strlen(g_longopts[i].name) == len && !strncmp(g_longopts[i].name, name, len);
    }
    if (novalue) fprintf(stderr, "loom %s: option '--%.*s' takes no value (see loom %s -h)\n", cmd, (int)len, name, cmd);
    else fprintf(stderr, "loom %s: unknown option '%s' (see loom %s -h)\n", cmd, g_opt_text, cmd);
}

int cli_getopt(int argc, char ** argv, const char * shortopts, const struct option * longopts) {
    g_longopts = longopts;
    /* The field's multi-letter short options (-ngl, -fa, -dev, ...) are long options spelled with one
     * dash: such an element is an option only when its name is one of 'longopts' exactly, and never
     * a cluster of one-letter options ("-fa" is not "-f a"), so a command adds one by adding its
     * name to its table. */
    const char * next = optind < argc ? argv[optind] : NULL;
    if (next && next[0] == '-' && next[1] && next[1] != '-' && next[2]) {
        const size_t len = strcspn(next + 1, "=");
        bool known = false;
        for (int i = 0; longopts[i].name && !known; i++) known = strlen(longopts[i].name) == len && !strncmp(longopts[i].name, next + 1, len);
        if (!known) {
            g_opt_text = next;
            optind++;
            optopt = 0;
            return '?';
        }
    }
    char spec[128];
    /* '+': stop at the first non-option, so the parsed element is always argv[optind - 1 or 2] */
    snprintf(spec, sizeof spec, "+%s", shortopts);
    int idx = -1;
    int c = getopt_long_only(argc, argv, spec, longopts, &idx);
    if (c == -1) return c;
    const char * elem = optarg && optind >= 2 && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
    g_opt_text = elem;
    const bool short_opt = elem[0] == '-' && elem[1] && elem[1] != '-' && !elem[2];
    while (*elem == '-') elem++;
    const size_t len = strcspn(elem, "=");
    if (c == ':' && !short_opt) { /* a value missing: only for an option spelled out in full */
        bool exact = false;
        for (int i = 0; longopts[i].name && !exact; i++) exact = strlen(longopts[i].name) == len && !strncmp(longopts[i].name, elem, len);
        if (!exact) c = '?';
    }
    if (c == '?' || c == ':' || idx < 0) return c;
    if (strlen(longopts[idx].name) != len || strncmp(longopts[idx].name, elem, len) != 0) {
        optopt = 0;
        return '?'; /* an abbreviation: refused, so that options mean exactly what they say */
    }
    /* an optional value may also be the next element ("-fa on"), unless that is an option; a
     * negative number ("-fa -1") is a value */
    if (longopts[idx].has_arg == optional_argument && !optarg && optind < argc) {
        const char * v = argv[optind];
        if (v[0] != '-' || (v[1] >= '0' && v[1] <= '9')) optarg = argv[optind++];
    }
    return c;
}

bool cli_no_more_args(const char * cmd, int argc, char ** argv) {
    if (optind >= argc) return true;
    fprintf(stderr, "loom %s: unexpected argument '%s' (see loom %s -h)\n", cmd, argv[optind], cmd);
    return false;
}

static int g_stdout_errno; /* why the first failed flush of standard output failed (0: none did) */

void cli_flush(void) {
    errno = 0;
    if (fflush(stdout) != 0 && !g_stdout_errno) g_stdout_errno = errno;
}

bool cli_stdout_ok(const char * cmd) {
    cli_flush();
    if (!ferror(stdout)) return true;
    fprintf(stderr, "loom %s: cannot write the output: %s\n", cmd, strerror(g_stdout_errno ? g_stdout_errno : EIO));
    return false;
}

const char * cli_device_list(void) {
    static char buf[512];
    buf[0] = 0;
    for (size_t i = 0; i < loom_backend_dev_count(); i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "", loom_backend_dev_name(loom_backend_dev_get(i)));
    }
    return buf;
}

size_t cli_utf8_len(const unsigned char * s, size_t n) {
    const int r = loom_utf8_check(s, n); /* the library's validator (RFC 3629) */
    return r > 0 ? (size_t)r : 0;
}

void cli_print_piece(FILE * f, const char * p, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        if (c >= 0x80) {
            const size_t len = cli_utf8_len((const unsigned char *)p + i, (size_t)(n - i));
            const bool c1 = len == 2 && c == 0xc2 && (unsigned char)p[i + 1] < 0xa0; /* U+0080..U+009F: C1 controls */
            if (len == 0 || c1) {
                fprintf(f, "\\x%02x", c); /* a C1 control's second byte is escaped in its turn */
            } else {
                fwrite(p + i, 1, len, f);
                i += (int32_t)len - 1;
            }
            continue;
        }
        if (c == '\\') fputs("\\\\", f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
}

long long cli_cap_threads(const char * cmd, long long n) {
    const char * what = "-t";
    if (n <= 0) { /* no -t: the default, LOOM_N_THREADS where it is set (and valid), else every CPU */
        n = loom_default_n_threads();
        what = "LOOM_N_THREADS";
    }
    const long long avail = loom_n_cpus();
    if (n <= avail) return n;
    loom_log(LOOM_LOG_WARN, "%s: %s %lld is more than the CPUs this process may use (%lld): using %lld", cmd, what, n, avail, avail);
    return avail;
}

void cli_warn_ctx_train_as(const char * cmd, int32_t n_ctx, int32_t n_ctx_train) {
    if (n_ctx_train <= 0 || n_ctx <= n_ctx_train) return;
    fprintf(stderr, "%s%s%swarning: the context of %d tokens is larger than the model's training context of %d: text past %d "
                    "positions may lose coherence\n", cmd ? "loom " : "", cmd ? cmd : "", cmd ? ": " : "", n_ctx, n_ctx_train, n_ctx_train);
}

void cli_warn_ctx_train(int32_t n_ctx, int32_t n_ctx_train) { cli_warn_ctx_train_as(NULL, n_ctx, n_ctx_train); }
