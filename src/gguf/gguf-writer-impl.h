/* gguf-writer-impl.h -- the GGUF writer's private state, shared by its setters and its output. */
#ifndef LOOM_GGUF_WRITER_IMPL_H
#define LOOM_GGUF_WRITER_IMPL_H

#include "gguf-impl.h"

struct wstr {
    char * data;  /* NUL-terminated copy */
    size_t len;   /* bytes without the NUL */
};

struct wkv {
    struct wstr key;
    enum loom_gguf_type type;
    enum loom_gguf_type arr_type;   /* ARRAY only */
    uint64_t n;                     /* ARRAY elements */
    uint64_t scalar;                /* fixed-size scalar, little-endian in the low bytes */
    struct wstr str;                /* STRING */
    void * arr;                     /* ARRAY: n * size bytes, or n struct wstr */
};

struct wtensor {
    char name[LOOM_MAX_NAME];
    size_t name_len;
    enum loom_type type;
    int n_dims;
    int64_t ne[LOOM_MAX_DIMS];
    uint64_t size;                  /* bytes */
    uint64_t offset;                /* bytes from the data section (set by '_begin') */
    const void * data;              /* caller's bytes, or NULL when streamed */
};

struct file_id {
    dev_t dev;
    ino_t ino;
};

enum writer_state { WRITER_COLLECT, WRITER_STREAM, WRITER_FAILED };

struct loom_gguf_writer {
    struct wkv * kv;
    size_t n_kv, cap_kv;
    struct wtensor * tensors;
    size_t n_tensors, cap_tensors;
    uint32_t alignment;             /* bytes, mirrors 'general.alignment' */
    struct file_id * protect;       /* files never to replace */
    size_t n_protect, cap_protect;

    enum writer_state state;
    enum loom_status failed;        /* WRITER_FAILED: the status of the failure */
    FILE * f;                       /* the temporary file while streaming */
    char * path;                    /* final name */
    char * tmp_path;                /* temporary name in the same folder */
    size_t cur;                     /* tensor whose data comes next */
    uint64_t cur_done;              /* bytes of it written so far */
    int sig_slot;                   /* registration of 'tmp_path' for removal on a signal, or -1 */
};

void lgg_wkv_clear(struct wkv * kv);
enum loom_status lgg_writer_protect_id(struct loom_gguf_writer * w, dev_t dev, ino_t ino);

/* Registers 'tmp_path' for removal should SIGINT, SIGTERM or SIGHUP end the process (see
 * gguf-writer-signal.c); returns a slot for '_disarm', or -1 when none is free. */
int lgg_writer_signal_arm(const char * tmp_path);
/* Forgets a registration (-1 is allowed); the last one restores the previous signal actions. */
void lgg_writer_signal_disarm(int slot);

#endif /* LOOM_GGUF_WRITER_IMPL_H */
