/* gguf-write.c -- the GGUF writer's output: layout, header serialization, streamed tensor data,
 * and the temporary file that is renamed into place only when complete. */
#include "gguf-writer-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removes the temporary file and records the failure; returns 'st'. */
static enum loom_status fail(struct loom_gguf_writer * w, enum loom_status st) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    if (w->tmp_path) unlink(w->tmp_path);
    gguf_writer_signal_disarm(w->sig_slot);
    w->sig_slot = -1;
    free(w->tmp_path);
    free(w->path);
    w->tmp_path = w->path = NULL;
    w->state = WRITER_FAILED;
    w->failed = st;
    return st;
}

static enum loom_status io_fail(struct loom_gguf_writer * w, char * err, size_t err_size, const char * what) {
    char q[GGUF_QUOTE_SIZE * 4];
    const char * name = w->tmp_path ? w->tmp_path : "";
    gguf_fail(err, err_size, LOOM_ERR_IO, "%s '%s': %s", what, gguf_quote(name, strlen(name), GGUF_QUOTE_SIZE, q, sizeof q),
              strerror(errno ? errno : EIO));
    return fail(w, LOOM_ERR_IO);
}

static bool put(struct loom_gguf_writer * w, const void * p, size_t n) {
    errno = 0;
    return n == 0 || fwrite(p, 1, n, w->f) == n;
}

static bool put_u32(struct loom_gguf_writer * w, uint32_t v) { return put(w, &v, 4); }
static bool put_u64(struct loom_gguf_writer * w, uint64_t v) { return put(w, &v, 8); }
static bool put_str(struct loom_gguf_writer * w, const char * s, size_t len) { return put_u64(w, len) && put(w, s, len); }

static bool put_zeros(struct loom_gguf_writer * w, uint64_t n) {
    static const uint8_t zeros[4096];
    while (n > 0) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        if (!put(w, zeros, k)) return false;
        n -= k;
    }
    return true;
}

static bool put_kv(struct loom_gguf_writer * w, const struct wkv * kv) {
    if (!put_str(w, kv->key.data, kv->key.len) || !put_u32(w, (uint32_t)kv->type)) return false;
    switch (kv->type) {
    case LOOM_GGUF_TYPE_STRING:
        return put_str(w, kv->str.data, kv->str.len);
    case LOOM_GGUF_TYPE_ARRAY:
        if (!put_u32(w, (uint32_t)kv->arr_type) || !put_u64(w, kv->n)) return false;
        if (kv->arr_type == LOOM_GGUF_TYPE_STRING) {
            const struct wstr * s = kv->arr;
            for (uint64_t j = 0; j < kv->n; j++) {
                if (!put_str(w, s[j].data, s[j].len)) return false;
            }
            return true;
        }
        return put(w, kv->arr, (size_t)kv->n * loom_gguf_type_size(kv->arr_type));
    default:
        return put(w, &kv->scalar, loom_gguf_type_size(kv->type));
    }
}

static bool put_header(struct loom_gguf_writer * w) {
    if (!put(w, LOOM_GGUF_MAGIC, 4) || !put_u32(w, 3) || !put_u64(w, w->n_tensors) || !put_u64(w, w->n_kv)) return false;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (!put_kv(w, &w->kv[i])) return false;
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor * t = &w->tensors[i];
        if (!put_str(w, t->name, t->name_len) || !put_u32(w, (uint32_t)t->n_dims)) return false;
        for (int d = 0; d < t->n_dims; d++) {
            if (!put_u64(w, (uint64_t)t->ne[d])) return false;
        }
        if (!put_u32(w, (uint32_t)t->type) || !put_u64(w, t->offset)) return false;
    }
    long pos = ftell(w->f);
    if (pos < 0) return false;
    return put_zeros(w, loom_pad((size_t)pos, w->alignment) - (size_t)pos);
}

/* Assigns every tensor its aligned offset in the data section; false on overflow. */
static bool layout(struct loom_gguf_writer * w) {
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        uint64_t end;
        if (!gguf_add_ok(off, w->tensors[i].size, &end) || end > UINT64_MAX - w->alignment) return false;
        off = (end + w->alignment - 1) / w->alignment * w->alignment;
    }
    return true;
}

static uint64_t kv_bytes(const struct wkv * kv) {
    uint64_t n = 8 + kv->key.len + 4;
    switch (kv->type) {
    case LOOM_GGUF_TYPE_STRING:
        return n + 8 + kv->str.len;
    case LOOM_GGUF_TYPE_ARRAY:
        n += 4 + 8;
        if (kv->arr_type == LOOM_GGUF_TYPE_STRING) {
            const struct wstr * s = kv->arr;
            for (uint64_t j = 0; j < kv->n; j++) n += 8 + s[j].len;
            return n;
        }
        return n + kv->n * loom_gguf_type_size(kv->arr_type);
    default:
        return n + loom_gguf_type_size(kv->type);
    }
}

/* Bytes 'put_header' writes, padding included (everything is in memory, so no overflow). */
static uint64_t header_bytes(const struct loom_gguf_writer * w) {
    uint64_t n = 4 + 4 + 8 + 8;
    for (size_t i = 0; i < w->n_kv; i++) n += kv_bytes(&w->kv[i]);
    for (size_t i = 0; i < w->n_tensors; i++) n += 8 + w->tensors[i].name_len + 4 + 8 * (uint64_t)w->tensors[i].n_dims + 4 + 8;
    return (n + w->alignment - 1) / w->alignment * w->alignment;
}

/* Ends the current tensor (its padding) once all its bytes are in, then writes following tensors
 * whose data the caller gave with '_add_tensor'. */
static bool pump(struct loom_gguf_writer * w) {
    while (w->cur < w->n_tensors) {
        struct wtensor * t = &w->tensors[w->cur];
        if (w->cur_done == 0 && t->data) {
            if (!put(w, t->data, (size_t)t->size)) return false;
            w->cur_done = t->size;
        }
        if (w->cur_done < t->size) return true;
        if (!put_zeros(w, loom_pad((size_t)t->size, w->alignment) - (size_t)t->size)) return false;
        w->cur++;
        w->cur_done = 0;
    }
    return true;
}

/* Only a regular file we may write, or nothing, may be replaced: renaming over a device, FIFO or
 * socket would turn it into a regular file, and over a symlink would replace the link, not the
 * file it names (so symlinks are refused rather than resolved). Checked at '_begin' and again
 * just before the rename. */
static enum loom_status check_output(struct loom_gguf_writer * w, const char * path, char * err, size_t err_size) {
    char q[GGUF_QUOTE_SIZE * 4];
    gguf_quote(path, strlen(path), GGUF_QUOTE_SIZE, q, sizeof q);
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return LOOM_OK;
        return gguf_fail(err, err_size, LOOM_ERR_IO, "cannot check output '%s': %s", q, strerror(errno));
    }
    for (size_t i = 0; i < w->n_protect; i++) {
        if (w->protect[i].dev == sb.st_dev && w->protect[i].ino == sb.st_ino) {
            return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' is an input file: refusing to replace it", q);
        }
    }
    if (S_ISLNK(sb.st_mode)) {
        return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' is a symbolic link: refusing to replace it", q);
    }
    if (S_ISDIR(sb.st_mode)) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' is a directory", q);
    if (!S_ISREG(sb.st_mode)) {
        return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' exists and is not a regular file", q);
    }
    /* the mode bits too: root may write anything, but a file marked read-only is meant to stay */
    if (!(sb.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) || access(path, W_OK) != 0) {
        return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' is read-only: refusing to replace it", q);
    }
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_begin(struct loom_gguf_writer * w, const char * path, char * err, size_t err_size) {
    if (!w || !path || !*path) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: no output path");
    if (w->state == WRITER_FAILED) return gguf_fail(err, err_size, w->failed, "gguf writer: an earlier step failed");
    if (w->state != WRITER_COLLECT) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: already begun");
    enum loom_status st = check_output(w, path, err, err_size);
    if (st != LOOM_OK) return st;
    if (!layout(w)) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: tensor data size overflows");
    size_t n = strlen(path);
    w->path = malloc(n + 1);
    w->tmp_path = malloc(n + 16);
    if (!w->path || !w->tmp_path) {
        gguf_fail(err, err_size, LOOM_ERR_OOM, "gguf writer: out of memory");
        return fail(w, LOOM_ERR_OOM);
    }
    memcpy(w->path, path, n + 1);
    snprintf(w->tmp_path, n + 16, "%s.tmp.XXXXXX", path);
    w->state = WRITER_STREAM;
    int fd = mkstemp(w->tmp_path);
    if (fd < 0) {
        int e = errno;
        free(w->tmp_path);
        w->tmp_path = NULL; /* nothing was created: nothing to remove */
        char q[GGUF_QUOTE_SIZE * 4];
        gguf_fail(err, err_size, LOOM_ERR_IO, "cannot create a temporary file next to '%s': %s",
                  gguf_quote(path, n, GGUF_QUOTE_SIZE, q, sizeof q), strerror(e));
        return fail(w, LOOM_ERR_IO);
    }
    w->sig_slot = gguf_writer_signal_arm(w->tmp_path);
    fchmod(fd, 0644);
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        close(fd);
        return io_fail(w, err, err_size, "cannot open");
    }
    w->cur = 0;
    w->cur_done = 0;
    if (!put_header(w) || !pump(w)) return io_fail(w, err, err_size, "cannot write");
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_file_size(struct loom_gguf_writer * w, uint64_t * size) {
    if (!w || !size) return LOOM_ERR_INVALID_ARG;
    *size = 0;
    if (w->state != WRITER_COLLECT || !layout(w)) return LOOM_ERR_INVALID_ARG;
    uint64_t data = 0;
    if (w->n_tensors > 0) {
        const struct wtensor * t = &w->tensors[w->n_tensors - 1];
        data = t->offset + (t->size + w->alignment - 1) / w->alignment * w->alignment; /* layout() checked it */
    }
    if (!gguf_add_ok(header_bytes(w), data, size)) return LOOM_ERR_INVALID_ARG;
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_write_data(struct loom_gguf_writer * w, const void * data, size_t size, char * err,
                                             size_t err_size) {
    if (!w || (!data && size)) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: NULL argument");
    if (w->state == WRITER_FAILED) return gguf_fail(err, err_size, w->failed, "gguf writer: an earlier step failed");
    if (w->state != WRITER_STREAM) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: not begun");
    const uint8_t * p = data;
    while (size > 0) {
        if (w->cur >= w->n_tensors) {
            gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: %zu bytes of data past the last tensor", size);
            return fail(w, LOOM_ERR_INVALID_ARG);
        }
        struct wtensor * t = &w->tensors[w->cur];
        uint64_t take = t->size - w->cur_done;
        if (take > size) take = size;
        if (!put(w, p, (size_t)take)) return io_fail(w, err, err_size, "cannot write");
        w->cur_done += take;
        p += take;
        size -= (size_t)take;
        if (!pump(w)) return io_fail(w, err, err_size, "cannot write");
    }
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_finish(struct loom_gguf_writer * w, char * err, size_t err_size) {
    if (!w) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: NULL argument");
    if (w->state == WRITER_FAILED) return gguf_fail(err, err_size, w->failed, "gguf writer: an earlier step failed");
    if (w->state != WRITER_STREAM) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: not begun");
    if (!pump(w)) return io_fail(w, err, err_size, "cannot write");
    if (w->cur < w->n_tensors) {
        const struct wtensor * t = &w->tensors[w->cur];
        gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has %llu of %llu bytes of data", t->name,
                  (unsigned long long)w->cur_done, (unsigned long long)t->size);
        return fail(w, LOOM_ERR_INVALID_ARG);
    }
    errno = 0;
    if (fflush(w->f) != 0 || ferror(w->f) || fsync(fileno(w->f)) != 0) return io_fail(w, err, err_size, "cannot write");
    FILE * f = w->f;
    w->f = NULL;
    if (fclose(f) != 0) return io_fail(w, err, err_size, "cannot close");
    enum loom_status st = check_output(w, w->path, err, err_size); /* it may have changed meanwhile */
    if (st != LOOM_OK) return fail(w, st);
    if (rename(w->tmp_path, w->path) != 0) return io_fail(w, err, err_size, "cannot rename");
    gguf_writer_signal_disarm(w->sig_slot);
    w->sig_slot = -1;
    free(w->tmp_path);
    free(w->path);
    w->tmp_path = w->path = NULL;
    w->state = WRITER_COLLECT; /* the writer may write the same content again */
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_write_file(struct loom_gguf_writer * w, const char * path, char * err, size_t err_size) {
    if (!w) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: NULL argument");
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (!w->tensors[i].data) {
            return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has no data", w->tensors[i].name);
        }
    }
    enum loom_status st = loom_gguf_writer_begin(w, path, err, err_size);
    if (st != LOOM_OK) return st;
    return loom_gguf_writer_finish(w, err, err_size);
}

void loom_gguf_writer_free(struct loom_gguf_writer * w) {
    if (!w) return;
    if (w->state == WRITER_STREAM) fail(w, LOOM_ERR_CANCELLED);
    for (size_t i = 0; i < w->n_kv; i++) {
        gguf_wkv_clear(&w->kv[i]);
        free(w->kv[i].key.data);
    }
    free(w->kv);
    free(w->tensors);
    free(w->protect);
    free(w->tmp_path);
    free(w->path);
    free(w);
}
