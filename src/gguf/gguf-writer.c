/* gguf-writer.c -- the GGUF writer: metadata and tensor infos collected, the layout and the header
 * serialized, tensor data streamed into a temporary file renamed into place, and the removal of
 * temporary files when a signal ends the process. */
#include "gguf-writer-impl.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ================================================================
 * The GGUF writer's metadata and tensor-info collection. */

struct loom_gguf_writer * loom_gguf_writer_new(void) {
    struct loom_gguf_writer * w = calloc(1, sizeof *w);
    if (!w) {
        loom_log(LOOM_LOG_ERROR, "loom_gguf_writer_new: out of memory");
        return NULL;
    }
    w->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    w->state = WRITER_COLLECT;
    w->sig_slot = -1;
    return w;
}

void lgg_wkv_clear(struct wkv * kv) {
    if (kv->type == LOOM_GGUF_TYPE_ARRAY && kv->arr_type == LOOM_GGUF_TYPE_STRING) {
        struct wstr * s = kv->arr;
        for (uint64_t j = 0; j < kv->n; j++) free(s[j].data);
    }
    free(kv->arr);
    free(kv->str.data);
    kv->arr = NULL;
    kv->str.data = NULL;
    kv->n = 0;
}

static bool copy_bytes(struct wstr * out, const char * s, size_t len) {
    if (len == SIZE_MAX) return false;
    out->data = malloc(len + 1);
    if (!out->data) return false;
    if (len) memcpy(out->data, s, len);
    out->data[len] = '\0';
    out->len = len;
    return true;
}

static enum loom_status check_key(const struct loom_gguf_writer * w, const char * key) {
    if (!w || !key) return LOOM_ERR_INVALID_ARG;
    size_t len = strlen(key);
    if (len == 0 || len > LOOM_GGUF_MAX_KEY) {
        loom_log(LOOM_LOG_ERROR, "gguf writer: key of %zu bytes (must be 1..%d)", len, LOOM_GGUF_MAX_KEY);
        return LOOM_ERR_INVALID_ARG;
    }
    if (w->state != WRITER_COLLECT) {
        loom_log(LOOM_LOG_ERROR, "gguf writer: key '%s' set after the file was begun", key);
        return LOOM_ERR_INVALID_ARG;
    }
    return LOOM_OK;
}

static int64_t find_kv(const struct loom_gguf_writer * w, const char * key) {
    for (size_t i = 0; i < w->n_kv; i++) {
        if (!strcmp(w->kv[i].key.data, key)) return (int64_t)i;
    }
    return -1;
}

/* Stores 'val' (whose allocations the writer takes over) under 'key', replacing an old value. */
static enum loom_status set_kv(struct loom_gguf_writer * w, const char * key, struct wkv * val) {
    enum loom_status st = check_key(w, key);
    if (st == LOOM_OK && !strcmp(key, LOOM_GGUF_KEY_ALIGNMENT)) {
        uint32_t a = (uint32_t)val->scalar;
        if (val->type != LOOM_GGUF_TYPE_UINT32 || a == 0 || (a & (a - 1)) || a > LOOM_GGUF_MAX_ALIGNMENT) {
            loom_log(LOOM_LOG_ERROR, "gguf writer: '%s' must be a u32 power of two <= %u", key, LOOM_GGUF_MAX_ALIGNMENT);
            st = LOOM_ERR_INVALID_ARG;
        } else {
            w->alignment = a;
        }
    }
    if (st != LOOM_OK) {
        lgg_wkv_clear(val);
        return st;
    }
    int64_t i = find_kv(w, key);
    if (i >= 0) {
        struct wstr k = w->kv[i].key;
        lgg_wkv_clear(&w->kv[i]);
        w->kv[i] = *val;
        w->kv[i].key = k;
        return LOOM_OK;
    }
    if (!lgg_grow((void **)&w->kv, &w->cap_kv, w->n_kv + 1, sizeof *w->kv) || !copy_bytes(&val->key, key, strlen(key))) {
        lgg_wkv_clear(val);
        return LOOM_ERR_OOM;
    }
    w->kv[w->n_kv++] = *val;
    return LOOM_OK;
}

static enum loom_status put_scalar(struct loom_gguf_writer * w, const char * key, enum loom_gguf_type type,
                                   const void * v) {
    struct wkv val = {.type = type, .arr_type = LOOM_GGUF_TYPE_COUNT};
    memcpy(&val.scalar, v, loom_gguf_type_size(type));
    return set_kv(w, key, &val);
}

enum loom_status loom_gguf_writer_set_u8(struct loom_gguf_writer * w, const char * key, uint8_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_UINT8, &v); }
enum loom_status loom_gguf_writer_set_i8(struct loom_gguf_writer * w, const char * key, int8_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_INT8, &v); }
enum loom_status loom_gguf_writer_set_u16(struct loom_gguf_writer * w, const char * key, uint16_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_UINT16, &v); }
enum loom_status loom_gguf_writer_set_i16(struct loom_gguf_writer * w, const char * key, int16_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_INT16, &v); }
enum loom_status loom_gguf_writer_set_u32(struct loom_gguf_writer * w, const char * key, uint32_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_UINT32, &v); }
enum loom_status loom_gguf_writer_set_i32(struct loom_gguf_writer * w, const char * key, int32_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_INT32, &v); }
enum loom_status loom_gguf_writer_set_u64(struct loom_gguf_writer * w, const char * key, uint64_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_UINT64, &v); }
enum loom_status loom_gguf_writer_set_i64(struct loom_gguf_writer * w, const char * key, int64_t v) { return put_scalar(w, key, LOOM_GGUF_TYPE_INT64, &v); }
enum loom_status loom_gguf_writer_set_f32(struct loom_gguf_writer * w, const char * key, float v) { return put_scalar(w, key, LOOM_GGUF_TYPE_FLOAT32, &v); }
enum loom_status loom_gguf_writer_set_f64(struct loom_gguf_writer * w, const char * key, double v) { return put_scalar(w, key, LOOM_GGUF_TYPE_FLOAT64, &v); }

enum loom_status loom_gguf_writer_set_bool(struct loom_gguf_writer * w, const char * key, bool v) {
    uint8_t b = v ? 1 : 0;
    return put_scalar(w, key, LOOM_GGUF_TYPE_BOOL, &b);
}

enum loom_status loom_gguf_writer_set_str_n(struct loom_gguf_writer * w, const char * key, const char * s, size_t len) {
    if (!s && len) return LOOM_ERR_INVALID_ARG;
    struct wkv val = {.type = LOOM_GGUF_TYPE_STRING, .arr_type = LOOM_GGUF_TYPE_COUNT};
    if (!copy_bytes(&val.str, s ? s : "", len)) return LOOM_ERR_OOM;
    return set_kv(w, key, &val);
}

enum loom_status loom_gguf_writer_set_str(struct loom_gguf_writer * w, const char * key, const char * s) {
    if (!s) return LOOM_ERR_INVALID_ARG;
    return loom_gguf_writer_set_str_n(w, key, s, strlen(s));
}

enum loom_status loom_gguf_writer_set_arr_data(struct loom_gguf_writer * w, const char * key, enum loom_gguf_type type,
                                               const void * data, size_t n) {
    size_t esize = loom_gguf_type_size(type);
    if (esize == 0 || (!data && n) || n > SIZE_MAX / esize) return LOOM_ERR_INVALID_ARG;
    if (type == LOOM_GGUF_TYPE_BOOL) {
        for (size_t j = 0; j < n; j++) {
            if (((const uint8_t *)data)[j] > 1) return LOOM_ERR_INVALID_ARG;
        }
    }
    struct wkv val = {.type = LOOM_GGUF_TYPE_ARRAY, .arr_type = type, .n = n};
    if (n) {
        val.arr = malloc(n * esize);
        if (!val.arr) return LOOM_ERR_OOM;
        memcpy(val.arr, data, n * esize);
    }
    return set_kv(w, key, &val);
}

enum loom_status loom_gguf_writer_set_arr_str(struct loom_gguf_writer * w, const char * key, const char * const * strs,
                                              const size_t * lens, size_t n) {
    if ((!strs && n) || n > SIZE_MAX / sizeof(struct wstr)) return LOOM_ERR_INVALID_ARG;
    for (size_t j = 0; j < n; j++) {
        if (!strs[j] && (!lens || lens[j])) return LOOM_ERR_INVALID_ARG;
    }
    struct wkv val = {.type = LOOM_GGUF_TYPE_ARRAY, .arr_type = LOOM_GGUF_TYPE_STRING};
    if (n) {
        val.arr = calloc(n, sizeof(struct wstr));
        if (!val.arr) return LOOM_ERR_OOM;
    }
    struct wstr * out = val.arr;
    for (size_t j = 0; j < n; j++) {
        const char * s = strs[j] ? strs[j] : "";
        if (!copy_bytes(&out[j], s, lens ? lens[j] : strlen(s))) {
            val.n = j;
            lgg_wkv_clear(&val);
            return LOOM_ERR_OOM;
        }
    }
    val.n = n;
    return set_kv(w, key, &val);
}

enum loom_status loom_gguf_writer_copy_kv(struct loom_gguf_writer * w, const struct loom_gguf * g, int64_t i) {
    if (!w || !g || i < 0 || i >= loom_gguf_n_kv(g)) return LOOM_ERR_INVALID_ARG;
    if (g->has_file_id) {
        enum loom_status st = lgg_writer_protect_id(w, g->dev, g->ino);
        if (st != LOOM_OK) return st;
    }
    const struct gguf_kv * kv = &g->kv[i];
    const char * key = kv->key.data;
    switch (kv->type) {
    case LOOM_GGUF_TYPE_STRING:
        return loom_gguf_writer_set_str_n(w, key, kv->str.data, (size_t)kv->str.len);
    case LOOM_GGUF_TYPE_ARRAY:
        if (kv->arr_type != LOOM_GGUF_TYPE_STRING) {
            return loom_gguf_writer_set_arr_data(w, key, kv->arr_type, kv->arr, (size_t)kv->n);
        } else {
            const struct gguf_str * s = kv->arr;
            size_t n = (size_t)kv->n;
            const char ** ptrs = malloc((n ? n : 1) * sizeof *ptrs);
            size_t * lens = malloc((n ? n : 1) * sizeof *lens);
            enum loom_status st = LOOM_ERR_OOM;
            if (ptrs && lens) {
                for (size_t j = 0; j < n; j++) {
                    ptrs[j] = s[j].data;
                    lens[j] = (size_t)s[j].len;
                }
                st = loom_gguf_writer_set_arr_str(w, key, ptrs, lens, n);
            }
            free(ptrs);
            free(lens);
            return st;
        }
    default:
        return put_scalar(w, key, kv->type, &kv->scalar);
    }
}

void loom_gguf_writer_remove_key(struct loom_gguf_writer * w, const char * key) {
    if (!w || !key || w->state != WRITER_COLLECT) return;
    int64_t i = find_kv(w, key);
    if (i < 0) return;
    lgg_wkv_clear(&w->kv[i]);
    free(w->kv[i].key.data);
    memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - (size_t)i - 1) * sizeof *w->kv);
    w->n_kv--;
    if (!strcmp(key, LOOM_GGUF_KEY_ALIGNMENT)) w->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
}

enum loom_status loom_gguf_writer_set_alignment(struct loom_gguf_writer * w, uint32_t alignment) {
    if (!w || alignment == 0 || (alignment & (alignment - 1)) || alignment > LOOM_GGUF_MAX_ALIGNMENT) {
        return LOOM_ERR_INVALID_ARG;
    }
    if (alignment == LOOM_GGUF_DEFAULT_ALIGNMENT) {
        if (w->state != WRITER_COLLECT) return LOOM_ERR_INVALID_ARG;
        loom_gguf_writer_remove_key(w, LOOM_GGUF_KEY_ALIGNMENT);
        return LOOM_OK;
    }
    return loom_gguf_writer_set_u32(w, LOOM_GGUF_KEY_ALIGNMENT, alignment);
}

int64_t loom_gguf_writer_n_kv(const struct loom_gguf_writer * w) { return (int64_t)w->n_kv; }
int64_t loom_gguf_writer_n_tensors(const struct loom_gguf_writer * w) { return (int64_t)w->n_tensors; }

enum loom_status lgg_writer_protect_id(struct loom_gguf_writer * w, dev_t dev, ino_t ino) {
    for (size_t i = 0; i < w->n_protect; i++) {
        if (w->protect[i].dev == dev && w->protect[i].ino == ino) return LOOM_OK;
    }
    if (!lgg_grow((void **)&w->protect, &w->cap_protect, w->n_protect + 1, sizeof *w->protect)) return LOOM_ERR_OOM;
    w->protect[w->n_protect++] = (struct file_id){dev, ino};
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_protect(struct loom_gguf_writer * w, const char * path) {
    if (!w || !path) return LOOM_ERR_INVALID_ARG;
    struct stat sb;
    if (stat(path, &sb) != 0) return LOOM_OK; /* nothing there to replace */
    return lgg_writer_protect_id(w, sb.st_dev, sb.st_ino);
}

/* ================================================================
 * Tensor infos collected by the GGUF writer. */

enum loom_status loom_gguf_writer_add_tensor(struct loom_gguf_writer * w, const char * name, enum loom_type type,
                                             int n_dims, const int64_t * ne, const void * data) {
    if (!w || !name || !ne || w->state != WRITER_COLLECT) return LOOM_ERR_INVALID_ARG;
    size_t len = strlen(name);
    if (len == 0 || len > LOOM_GGUF_MAX_TENSOR_NAME) {
        loom_log(LOOM_LOG_ERROR, "gguf writer: tensor name of %zu bytes (must be 1..%d)", len, LOOM_GGUF_MAX_TENSOR_NAME);
        return LOOM_ERR_INVALID_ARG;
    }
    if (n_dims < 1 || n_dims > LOOM_MAX_DIMS) { /* before reading 'ne' */
        loom_log(LOOM_LOG_ERROR, "gguf writer: tensor '%s': n_dims %d is not in 1..%d", name, n_dims, LOOM_MAX_DIMS);
        return LOOM_ERR_INVALID_ARG;
    }
    struct wtensor t = {.type = type, .n_dims = n_dims, .data = data, .name_len = len};
    memcpy(t.name, name, len + 1);
    for (int d = 0; d < LOOM_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    int64_t nel;
    if (!lgg_tensor_geometry(type, n_dims, t.ne, &nel, &t.size)) {
        loom_log(LOOM_LOG_ERROR, "gguf writer: tensor '%s': bad type %d or shape", name, (int)type);
        return LOOM_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (!strcmp(w->tensors[i].name, name)) {
            loom_log(LOOM_LOG_ERROR, "gguf writer: duplicate tensor name '%s'", name);
            return LOOM_ERR_INVALID_ARG;
        }
    }
    if (!lgg_grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors + 1, sizeof *w->tensors)) return LOOM_ERR_OOM;
    w->tensors[w->n_tensors++] = t;
    return LOOM_OK;
}

uint64_t loom_gguf_writer_tensor_size(const struct loom_gguf_writer * w, int64_t i) {
    LOOM_ASSERT(w && i >= 0 && (size_t)i < w->n_tensors);
    return w->tensors[i].size;
}

/* ================================================================
 * Removes the writers' temporary files when SIGINT, SIGTERM or SIGHUP ends the process, so an
 * interrupted conversion does not leave gigabytes behind.  While at least one temporary file is
 * open, a handler is installed for each of those signals whose disposition is the default
 * (termination). The handler unlinks every registered temporary path, restores the default action
 * and re-raises the signal, so the process still dies of it. A signal that is ignored (e.g. SIGHUP
 * under nohup) or already handled by the application is left alone: the application decides, and
 * an orderly 'loom_gguf_writer_free' removes the file. The handler touches only static memory and
 * calls only async-signal-safe functions (unlink, sigaction, raise). */

#define TMP_SLOTS 8 /* writers streaming at the same time; more get no cleanup on a signal */

static const int signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_SIGNALS ((int)(sizeof signals / sizeof signals[0]))

static char tmp_paths[TMP_SLOTS][PATH_MAX];
static volatile sig_atomic_t tmp_used[TMP_SLOTS];
static struct sigaction saved[N_SIGNALS];
static bool installed[N_SIGNALS];
static int n_armed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void on_signal(int sig) {
    for (int i = 0; i < TMP_SLOTS; i++) {
        if (tmp_used[i]) unlink(tmp_paths[i]);
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* delivered when the handler returns (the signal is blocked while it runs) */
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_SIGNALS; i++) sigaddset(&sa.sa_mask, signals[i]);
    for (int i = 0; i < N_SIGNALS; i++) {
        struct sigaction old;
        installed[i] = false;
        if (sigaction(signals[i], NULL, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue; /* ignored or the application's */
        if (sigaction(signals[i], &sa, &saved[i]) == 0) installed[i] = true;
    }
}

static void uninstall(void) {
    for (int i = 0; i < N_SIGNALS; i++) {
        if (!installed[i]) continue;
        struct sigaction cur;
        /* put the old action back only if nobody replaced ours meanwhile */
        if (sigaction(signals[i], NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_signal) {
            sigaction(signals[i], &saved[i], NULL);
        }
        installed[i] = false;
    }
}

int lgg_writer_signal_arm(const char * tmp_path) {
    size_t n = strlen(tmp_path);
    if (n >= PATH_MAX) return -1;
    pthread_mutex_lock(&lock);
    int slot = -1;
    for (int i = 0; i < TMP_SLOTS && slot < 0; i++) {
        if (!tmp_used[i]) slot = i;
    }
    if (slot >= 0) {
        memcpy(tmp_paths[slot], tmp_path, n + 1);
        tmp_used[slot] = 1; /* after the path: the handler never sees half a name */
        if (n_armed++ == 0) install();
    }
    pthread_mutex_unlock(&lock);
    return slot;
}

void lgg_writer_signal_disarm(int slot) {
    if (slot < 0 || slot >= TMP_SLOTS) return;
    pthread_mutex_lock(&lock);
    if (tmp_used[slot]) {
        tmp_used[slot] = 0;
        if (--n_armed == 0) uninstall();
    }
    pthread_mutex_unlock(&lock);
}

/* ================================================================
 * The GGUF writer's output: layout, header serialization, streamed tensor data, and the temporary
 * file that is renamed into place only when complete. */

/* Removes the temporary file and records the failure; returns 'st'. */
static enum loom_status fail(struct loom_gguf_writer * w, enum loom_status st) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    if (w->tmp_path) unlink(w->tmp_path);
    lgg_writer_signal_disarm(w->sig_slot);
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
    lgg_fail(err, err_size, LOOM_ERR_IO, "%s '%s': %s", what, lgg_quote(name, strlen(name), GGUF_QUOTE_SIZE, q, sizeof q),
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
    lgg_quote(path, strlen(path), GGUF_QUOTE_SIZE, q, sizeof q);
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return LOOM_OK;
        return lgg_fail(err, err_size, LOOM_ERR_IO, "cannot check output '%s': %s", q, strerror(errno));
    }
    for (size_t i = 0; i < w->n_protect; i++) {
        if (w->protect[i].dev == sb.st_dev && w->protect[i].ino == sb.st_ino) {
            return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' is an input file: refusing to replace it", q);
        }
    }
    if (S_ISLNK(sb.st_mode)) {
        return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' is a symbolic link: refusing to replace it", q);
    }
    if (S_ISDIR(sb.st_mode)) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' is a directory", q);
    if (!S_ISREG(sb.st_mode)) {
        return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' exists and is not a regular file", q);
    }
    /* the mode bits too: root may write anything, but a file marked read-only is meant to stay */
    if (!(sb.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) || access(path, W_OK) != 0) {
        return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "output '%s' is read-only: refusing to replace it", q);
    }
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_begin(struct loom_gguf_writer * w, const char * path, char * err, size_t err_size) {
    if (!w || !path || !*path) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: no output path");
    if (w->state == WRITER_FAILED) return lgg_fail(err, err_size, w->failed, "gguf writer: an earlier step failed");
    if (w->state != WRITER_COLLECT) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: already begun");
    enum loom_status st = check_output(w, path, err, err_size);
    if (st != LOOM_OK) return st;
    if (!layout(w)) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: tensor data size overflows");
    size_t n = strlen(path);
    w->path = malloc(n + 1);
    w->tmp_path = malloc(n + 16);
    if (!w->path || !w->tmp_path) {
        lgg_fail(err, err_size, LOOM_ERR_OOM, "gguf writer: out of memory");
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
        lgg_fail(err, err_size, LOOM_ERR_IO, "cannot create a temporary file next to '%s': %s",
                  lgg_quote(path, n, GGUF_QUOTE_SIZE, q, sizeof q), strerror(e));
        return fail(w, LOOM_ERR_IO);
    }
    w->sig_slot = lgg_writer_signal_arm(w->tmp_path);
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
    if (!w || (!data && size)) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: NULL argument");
    if (w->state == WRITER_FAILED) return lgg_fail(err, err_size, w->failed, "gguf writer: an earlier step failed");
    if (w->state != WRITER_STREAM) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: not begun");
    const uint8_t * p = data;
    while (size > 0) {
        if (w->cur >= w->n_tensors) {
            lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: %zu bytes of data past the last tensor", size);
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
    if (!w) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: NULL argument");
    if (w->state == WRITER_FAILED) return lgg_fail(err, err_size, w->failed, "gguf writer: an earlier step failed");
    if (w->state != WRITER_STREAM) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: not begun");
    if (!pump(w)) return io_fail(w, err, err_size, "cannot write");
    if (w->cur < w->n_tensors) {
        const struct wtensor * t = &w->tensors[w->cur];
        lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has %llu of %llu bytes of data", t->name,
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
    lgg_writer_signal_disarm(w->sig_slot);
    w->sig_slot = -1;
    free(w->tmp_path);
    free(w->path);
    w->tmp_path = w->path = NULL;
    w->state = WRITER_COLLECT; /* the writer may write the same content again */
    return LOOM_OK;
}

enum loom_status loom_gguf_writer_write_file(struct loom_gguf_writer * w, const char * path, char * err, size_t err_size) {
    if (!w) return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: NULL argument");
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (!w->tensors[i].data) {
            return lgg_fail(err, err_size, LOOM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has no data", w->tensors[i].name);
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
        lgg_wkv_clear(&w->kv[i]);
        free(w->kv[i].key.data);
    }
    free(w->kv);
    free(w->tensors);
    free(w->protect);
    free(w->tmp_path);
    free(w->path);
    free(w);
}
