/* log.c -- status strings, the logging callback, aborts and the clock. */
#include "loom.h"
#include "core/loom-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char * const status_str[LOOM_STATUS_COUNT] = {
    [LOOM_OK] = "ok",
    [LOOM_ERR_INVALID_ARG] = "invalid argument",
    [LOOM_ERR_OOM] = "out of memory",
    [LOOM_ERR_IO] = "input/output error",
    [LOOM_ERR_FORMAT] = "malformed file",
    [LOOM_ERR_UNSUPPORTED] = "unsupported",
    [LOOM_ERR_TOO_LARGE] = "too large",
    [LOOM_ERR_CANCELLED] = "cancelled",
    [LOOM_ERR_BACKEND] = "backend failure",
};

const char * loom_status_str(enum loom_status s) {
    if ((int)s < 0 || s >= LOOM_STATUS_COUNT || !status_str[s]) return "unknown status";
    return status_str[s];
}

static void log_default(enum loom_log_level level, const char * text, void * user_data) {
    (void)user_data;
    static int debug = -1;
    if (debug < 0) debug = loom_env_flag("LOOM_DEBUG", false);
    if (level == LOOM_LOG_DEBUG && !debug) return;
    static const char * const prefix[LOOM_LOG_LEVEL_COUNT] = {"debug: ", "", "warning: ", "error: "};
    fprintf(stderr, "%s%s\n", prefix[level], text);
}

static loom_log_callback g_log_cb = log_default;
static void * g_log_user;

void loom_log_set(loom_log_callback cb, void * user_data) {
    g_log_cb = cb ? cb : log_default;
    g_log_user = cb ? user_data : NULL;
}

void loom_log_get(loom_log_callback * cb, void ** user_data) {
    *cb = g_log_cb == log_default ? NULL : g_log_cb;
    *user_data = g_log_user;
}

void loom_log(enum loom_log_level level, const char * fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if ((int)level < 0 || level >= LOOM_LOG_LEVEL_COUNT) level = LOOM_LOG_ERROR;
    g_log_cb(level, buf, g_log_user);
}

void loom_abort(const char * file, int line, const char * fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "%s:%d: LOOM_ABORT: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

int64_t loom_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t loom_time_us(void) { return loom_time_ns() / 1000; }
