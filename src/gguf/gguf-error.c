/* gguf-error.c -- one-line error messages and safe quoting of names taken from files. */
#include "gguf-impl.h"

#include <stdarg.h>
#include <stdio.h>

enum loom_status gguf_fail(char * err, size_t err_size, enum loom_status st, const char * fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (err && err_size) {
        snprintf(err, err_size, "%s", buf);
    } else {
        loom_log(LOOM_LOG_ERROR, "%s", buf);
    }
    return st;
}

const char * gguf_quote(const char * s, size_t len, size_t max_shown, char * out, size_t out_size) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (out_size < 8) {
        if (out_size) out[0] = '\0';
        return out;
    }
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)s[i];
        if (i >= max_shown || o + 8 >= out_size) {
            out[o++] = '.';
            out[o++] = '.';
            out[o++] = '.';
            break;
        }
        if (c < 0x20 || c >= 0x7f || c == '\'' || c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return out;
}
