/* file.c -- reading a whole (small) file: prompts, tokenizer files. */
#include "loom.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum loom_status loom_read_file(const char * path, size_t max_bytes, void ** data, size_t * size) {
    *data = NULL;
    *size = 0;
    FILE * f = fopen(path, "rb");
    if (!f) {
        loom_log(LOOM_LOG_ERROR, "cannot open '%s': %s", path, strerror(errno));
        return LOOM_ERR_IO;
    }
    /* read in chunks rather than trusting a size from fseek: works for pipes, and caps memory */
    size_t cap = 1 << 16, n = 0;
    char * buf = malloc(cap + 1);
    enum loom_status st = buf ? LOOM_OK : LOOM_ERR_OOM;
    while (st == LOOM_OK) {
        if (n == cap) {
            if (cap >= max_bytes) {
                loom_log(LOOM_LOG_ERROR, "'%s' is larger than %zu bytes", path, max_bytes);
                st = LOOM_ERR_TOO_LARGE;
                break;
            }
            char * nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                st = LOOM_ERR_OOM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                loom_log(LOOM_LOG_ERROR, "cannot read '%s': %s", path, strerror(errno));
                st = LOOM_ERR_IO;
            }
            break;
        }
    }
    fclose(f);
    if (st == LOOM_ERR_OOM) loom_log(LOOM_LOG_ERROR, "out of memory reading '%s'", path);
    if (st != LOOM_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *data = buf;
    *size = n;
    return LOOM_OK;
}
