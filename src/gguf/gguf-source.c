/* gguf-source.c -- bounded, buffered reads from a file descriptor (pread) or a memory image. */
#include "gguf-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SOURCE_BUF (64 * 1024) /* bytes */

void gguf_source_init_memory(struct gguf_source * s, const void * data, size_t size) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->mem = data;
    s->size = size;
}

bool gguf_source_init_fd(struct gguf_source * s, int fd, uint64_t size) {
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->size = size;
    s->buf = malloc(SOURCE_BUF);
    return s->buf != NULL;
}

void gguf_source_done(struct gguf_source * s) {
    free(s->buf);
    s->buf = NULL;
}

/* Reads exactly 'n' bytes at file offset 'off' (the caller checked the range). */
static enum loom_status pread_full(struct gguf_source * s, void * dst, uint64_t n, uint64_t off) {
    uint8_t * d = dst;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t r = pread(s->fd, d, chunk, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            s->err_no = r < 0 ? errno : EIO; /* 0: the file shrank under us */
            return LOOM_ERR_IO;
        }
        d += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return LOOM_OK;
}

enum loom_status gguf_source_read(struct gguf_source * s, void * dst, uint64_t n) {
    if (n > s->size - s->pos) return LOOM_ERR_FORMAT;
    if (n == 0) return LOOM_OK;
    if (s->mem) {
        memcpy(dst, s->mem + s->pos, (size_t)n);
        s->pos += n;
        return LOOM_OK;
    }
    uint8_t * d = dst;
    while (n > 0) {
        if (s->pos >= s->buf_off && s->pos < s->buf_off + s->buf_len) {
            size_t at = (size_t)(s->pos - s->buf_off);
            size_t take = s->buf_len - at;
            if (take > n) take = (size_t)n;
            memcpy(d, s->buf + at, take);
            d += take;
            s->pos += take;
            n -= take;
            continue;
        }
        if (n >= SOURCE_BUF) { /* large: straight into the destination */
            enum loom_status st = pread_full(s, d, n, s->pos);
            if (st != LOOM_OK) return st;
            s->pos += n;
            return LOOM_OK;
        }
        uint64_t fill = s->size - s->pos;
        if (fill > SOURCE_BUF) fill = SOURCE_BUF;
        enum loom_status st = pread_full(s, s->buf, fill, s->pos);
        if (st != LOOM_OK) return st;
        s->buf_off = s->pos;
        s->buf_len = (size_t)fill;
    }
    return LOOM_OK;
}
