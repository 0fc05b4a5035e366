/* gguf-open.c -- opening (file or memory image) and freeing a GGUF reader handle. */
#include "gguf-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char * gguf_kv_name_of(const void * g, int64_t id, size_t * len) {
    const struct gguf_str * s = &((const struct loom_gguf *)g)->kv[id].key;
    *len = (size_t)s->len;
    return s->data;
}

const char * gguf_tensor_name_of(const void * g, int64_t id, size_t * len) {
    const struct gguf_str * s = &((const struct loom_gguf *)g)->tensors[id].name;
    *len = (size_t)s->len;
    return s->data;
}

void loom_gguf_free(struct loom_gguf * g) {
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].arr);
    free(g->kv);
    free(g->tensors);
    gguf_index_free(&g->key_index);
    gguf_index_free(&g->tensor_index);
    gguf_arena_free(&g->arena);
    free(g);
}

/* Parses everything from 'src' into a new handle. */
static enum loom_status parse(struct gguf_source * src, struct loom_gguf ** out, char * err, size_t err_size) {
    struct loom_gguf * g = calloc(1, sizeof *g);
    if (!g) return gguf_fail(err, err_size, LOOM_ERR_OOM, "out of memory");
    g->file_size = src->size;
    g->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    struct gguf_parser p = {src, g, err, err_size};
    enum loom_status st = gguf_parse_header(&p);
    if (st != LOOM_OK) {
        loom_gguf_free(g);
        return st;
    }
    *out = g;
    return LOOM_OK;
}

enum loom_status loom_gguf_open_memory(const void * data, size_t size, struct loom_gguf ** out, char * err,
                                       size_t err_size) {
    if (!out || (!data && size)) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "loom_gguf_open_memory: NULL argument");
    *out = NULL;
    struct gguf_source src;
    gguf_source_init_memory(&src, data, size);
    return parse(&src, out, err, err_size);
}

enum loom_status loom_gguf_open(const char * path, struct loom_gguf ** out, char * err, size_t err_size) {
    if (!path || !out) return gguf_fail(err, err_size, LOOM_ERR_INVALID_ARG, "loom_gguf_open: NULL argument");
    *out = NULL;
    char q[GGUF_QUOTE_SIZE * 4];
    gguf_quote(path, strlen(path), GGUF_QUOTE_SIZE, q, sizeof q);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block: it is refused below */
    if (fd < 0) return gguf_fail(err, err_size, LOOM_ERR_IO, "cannot open '%s': %s", q, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return gguf_fail(err, err_size, LOOM_ERR_IO, "cannot stat '%s': %s", q, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return gguf_fail(err, err_size, LOOM_ERR_IO, "'%s' is not a regular file", q);
    }
    struct gguf_source src;
    if (!gguf_source_init_fd(&src, fd, (uint64_t)sb.st_size)) {
        close(fd);
        return gguf_fail(err, err_size, LOOM_ERR_OOM, "out of memory");
    }
    enum loom_status st = parse(&src, out, err, err_size);
    gguf_source_done(&src);
    close(fd);
    if (st == LOOM_OK) {
        (*out)->has_file_id = true;
        (*out)->dev = sb.st_dev;
        (*out)->ino = sb.st_ino;
    }
    return st;
}

uint32_t loom_gguf_version(const struct loom_gguf * g) { return g->version; }
uint64_t loom_gguf_file_size(const struct loom_gguf * g) { return g->file_size; }
uint32_t loom_gguf_alignment(const struct loom_gguf * g) { return g->alignment; }
uint64_t loom_gguf_data_offset(const struct loom_gguf * g) { return g->data_offset; }
