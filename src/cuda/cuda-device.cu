/* cuda-device.cu -- the CUDA devices (one per GPU), their backends (one stream each), events,
 * op support and graph execution. */
#include "cuda-common.cuh"
#include "cuda-argmax.cuh"
#include "cuda-attn.cuh"
#include "cuda-binary.cuh"
#include "cuda-cpy.cuh"
#include "cuda-getrows.cuh"
#include "cuda-module.h"
#include "cuda-mulmat.cuh"
#include "cuda-norm.cuh"
#include "cuda-profile.cuh"
#include "cuda-quant-dot.cuh"
#include "cuda-rope.cuh"
#include "cuda-softmax.cuh"
#include "cuda-unary.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct lc_device g_devs[LC_MAX_DEVICES];
static int g_n_devs;

static struct lc_device * dev_of(loom_backend_dev_t dev) { return (struct lc_device *)dev->context; }

/* ================================================================ backend (a stream) */

static const char * be_name(loom_backend_t backend) { return ((struct lc_backend *)backend->context)->dev->name; }

static void be_free(loom_backend_t backend) {
    struct lc_backend * be = (struct lc_backend *)backend->context;
    cudaSetDevice(be->dev->id);
    if (be->stream) LC_CHECK(cudaStreamSynchronize(be->stream));
    lc_profile_free(be);
    lc_graphs_free(be);
    if (be->cublas) cublasDestroy(be->cublas);
    if (be->cublas_ws) cudaFree(be->cublas_ws);
    if (be->scratch) cudaFree(be->scratch);
    if (be->act8) cudaFree(be->act8);
    if (be->err_dev) cudaFree(be->err_dev);
    if (be->tail_count) cudaFree(be->tail_count);
    if (be->pre_u) cudaFree(be->pre_u);
    if (be->pre_parts) cudaFree(be->pre_parts);
    for (int i = 0; i < 2; i++) {
        if (be->q8_hand[i]) cudaFree(be->q8_hand[i]);
    }
    if (be->err_host) cudaFreeHost(be->err_host);
    if (be->stream) cudaStreamDestroy(be->stream);
    free(be);
}

static bool is_cuda_backend(loom_backend_t backend);

/* The UVA address of a tensor's first byte (host address for pinned/mapped buffers, which
 * cudaMemcpyAsync accepts as is), or NULL when it is not in a CUDA buffer. */
static char * copy_address(const struct loom_tensor * t) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(t, &offs);
    if (!base->buffer || !lc_buffer_of(base->buffer)) return NULL;
    return (char *)base->data + offs;
}

static enum loom_status be_set_async(loom_backend_t backend, struct loom_tensor * t, const void * data, size_t offset, size_t size) {
    struct lc_backend * be = (struct lc_backend *)backend->context;
    char * p = copy_address(t);
    if (!p) return t->buffer->iface.set_tensor(t->buffer, t, data, offset, size);
    LC_TRY(cudaSetDevice(be->dev->id));
    return LC_CHECK(cudaMemcpyAsync(p + offset, data, size, cudaMemcpyDefault, be->stream));
}

static enum loom_status be_get_async(loom_backend_t backend, const struct loom_tensor * t, void * data, size_t offset, size_t size) {
    struct lc_backend * be = (struct lc_backend *)backend->context;
    char * p = copy_address(t);
    if (!p) return t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
    LC_TRY(cudaSetDevice(be->dev->id));
    return LC_CHECK(cudaMemcpyAsync(data, p + offset, size, cudaMemcpyDefault, be->stream));
}

/* Lets device 'dst' read the memory of device 'src' directly (cudaDeviceEnablePeerAccess) when
 * cudaDeviceCanAccessPeer says the pair can, once per pair; peer copies between other pairs are
 * staged by the driver. Called with 'dst' current; leaves it current. */
static void lc_enable_peer(int dst, int src) {
    static signed char state[LC_MAX_DEVICES][LC_MAX_DEVICES]; /* 0 not asked, 1 enabled, -1 not possible */
    if (dst < 0 || src < 0 || dst >= LC_MAX_DEVICES || src >= LC_MAX_DEVICES || state[dst][src]) return;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, dst, src) == cudaSuccess && can) {
        const cudaError_t e = cudaDeviceEnablePeerAccess(src, 0);
        can = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
    }
    (void)cudaGetLastError();
    state[dst][src] = can ? 1 : -1;
    loom_log(LOOM_LOG_DEBUG, "CUDA: device %d %s read device %d's memory directly", dst, can ? "can" : "cannot", src);
}

/* Queued on the destination stream after the source stream's queued work (an event between
 * them); both tensors must live in CUDA buffers and both backends be CUDA backends. */
static bool be_cpy_async(loom_backend_t backend_src, loom_backend_t backend_dst, const struct loom_tensor * src, struct loom_tensor * dst) {
    if (!is_cuda_backend(backend_src) || !is_cuda_backend(backend_dst)) return false;
    struct lc_backend * bs = (struct lc_backend *)backend_src->context;
    struct lc_backend * bd = (struct lc_backend *)backend_dst->context;
    char * s = copy_address(src);
    char * d = copy_address(dst);
    if (!s || !d) return false;
    if (bs != bd) {
        cudaEvent_t ev;
        if (LC_CHECK(cudaSetDevice(bs->dev->id)) != LOOM_OK) return false;
        if (LC_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != LOOM_OK) return false;
        bool ok = LC_CHECK(cudaEventRecord(ev, bs->stream)) == LOOM_OK && LC_CHECK(cudaSetDevice(bd->dev->id)) == LOOM_OK &&
                  LC_CHECK(cudaStreamWaitEvent(bd->stream, ev, 0)) == LOOM_OK;
        cudaEventDestroy(ev); /* released once the wait has been satisfied */
        if (!ok) return false;
    }
    if (LC_CHECK(cudaSetDevice(bd->dev->id)) != LOOM_OK) return false;
    size_t so = 0, dof = 0;
    struct lc_buffer * sbuf = lc_buffer_of(loom_tensor_storage(src, &so)->buffer);
    struct lc_buffer * dbuf = lc_buffer_of(loom_tensor_storage(dst, &dof)->buffer);
    if (sbuf->kind == LC_BUFFER_DEVICE && dbuf->kind == LC_BUFFER_DEVICE && sbuf->dev != dbuf->dev) {
        /* GPU to GPU: over NVLink / PCIe peer-to-peer where the pair allows it, else the driver stages it */
        lc_enable_peer(dbuf->dev->id, sbuf->dev->id);
        return LC_CHECK(cudaMemcpyPeerAsync(d, dbuf->dev->id, s, sbuf->dev->id, loom_nbytes(src), bd->stream)) == LOOM_OK;
    }
    return LC_CHECK(cudaMemcpyAsync(d, s, loom_nbytes(src), cudaMemcpyDefault, bd->stream)) == LOOM_OK;
}

static enum loom_status be_synchronize(loom_backend_t backend) {
    struct lc_backend * be = (struct lc_backend *)backend->context;
    LC_TRY(cudaSetDevice(be->dev->id));
    const int64_t t0 = be->prof ? loom_time_us() : 0;
    LC_TRY(cudaStreamSynchronize(be->stream));
    if (be->prof) lc_profile_sync(be, (double)(loom_time_us() - t0) / 1000.0);
    if (be->err_pending) {
        be->err_pending = false;
        if (*be->err_host) {
            loom_log(LOOM_LOG_ERROR, *be->err_host == LC_ERR_SET_ROWS ? "%s: set_rows: a row id was outside the destination; nothing was written for it"
                                                                      : "%s: get_rows: a row id was outside the table; its row was set to zeros",
                     be->dev->name);
            *be->err_host = 0;
        }
    }
    return LOOM_OK;
}

static enum loom_status be_graph_compute(loom_backend_t backend, struct loom_cgraph * graph) {
    return lc_graph_compute((struct lc_backend *)backend->context, graph);
}

static enum loom_status be_event_record(loom_backend_t backend, loom_backend_event_t event) {
    struct lc_backend * be = (struct lc_backend *)backend->context;
    LC_TRY(cudaSetDevice(be->dev->id));
    return LC_CHECK(cudaEventRecord((cudaEvent_t)event->context, be->stream));
}

static enum loom_status be_event_wait(loom_backend_t backend, loom_backend_event_t event) {
    struct lc_backend * be = (struct lc_backend *)backend->context;
    LC_TRY(cudaSetDevice(be->dev->id));
    return LC_CHECK(cudaStreamWaitEvent(be->stream, (cudaEvent_t)event->context, 0));
}

static const struct loom_backend_i be_iface = {
    .get_name = be_name,
    .free = be_free,
    .set_tensor_async = be_set_async,
    .get_tensor_async = be_get_async,
    .cpy_tensor_async = be_cpy_async,
    .synchronize = be_synchronize,
    .graph_compute = be_graph_compute,
    .event_record = be_event_record,
    .event_wait = be_event_wait,
};

static bool is_cuda_backend(loom_backend_t backend) { return backend && backend->iface.get_name == be_name; }

/* One "key=value" of the init parameters into 'o'; false (logged) when the key is unknown or the
 * value is not one it takes. 'len': the item's length (items are separated by commas). */
static bool parse_option(const char * dev, const char * item, size_t len, struct lc_options * o) {
    char buf[64];
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, item, len);
    buf[len] = 0;
    char * eq = strchr(buf, '=');
    char * end = NULL;
    const long v = eq && eq[1] ? strtol(eq + 1, &end, 10) : -1;
    const bool num = end && *end == 0 && v >= 0;
    if (eq) *eq = 0;
    if (num && v <= 1 && !strcmp(buf, "graphs")) o->graphs = v;
    else if (num && v <= 1 && !strcmp(buf, "fuse")) o->fuse = v;
    else if (num && v <= 2 && !strcmp(buf, "profile")) o->profile = (int)v;
    else if (num && v <= 65535 && !strcmp(buf, "mv_blocks")) o->mv_blocks = (int)v;
    else {
        loom_log(LOOM_LOG_ERROR, "%s: backend parameter '%.*s' unknown or out of range (graphs=0|1, fuse=0|1, profile=0|1|2, mv_blocks=N)",
                 dev, (int)len, item);
        return false;
    }
    return true;
}

/* The options of a backend from 'params' (loom-cuda.h), or from LOOM_CUDA_PARAMS when 'params' is
 * NULL; false (logged) on a bad item. */
static bool parse_options(const char * dev, const char * params, struct lc_options * o) {
    o->graphs = o->fuse = true;
    o->profile = o->mv_blocks = 0;
    if (!params) params = loom_env_str("LOOM_CUDA_PARAMS");
    for (const char * s = params; s && *s;) {
        const size_t len = strcspn(s, ",");
        if (len > 0 && !parse_option(dev, s, len, o)) return false;
        s += len + (s[len] == ',');
    }
    return true;
}

static loom_backend_t dev_init_backend(loom_backend_dev_t dev, const char * params) {
    struct lc_device * d = dev_of(dev);
    struct lc_options opts;
    if (!parse_options(d->name, params, &opts)) return NULL;
    struct lc_backend * be = (struct lc_backend *)calloc(1, sizeof *be);
    if (!be) return NULL;
    be->dev = d;
    be->opts = opts;
    bool ok = LC_CHECK(cudaSetDevice(d->id)) == LOOM_OK &&
              LC_CHECK(cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking)) == LOOM_OK &&
              LC_CHECK_CUBLAS(cublasCreate(&be->cublas)) == LOOM_OK &&
              LC_CHECK_CUBLAS(cublasSetStream(be->cublas, be->stream)) == LOOM_OK &&
              LC_CHECK(cudaMalloc((void **)&be->err_dev, sizeof(int))) == LOOM_OK &&
              LC_CHECK(cudaMemset(be->err_dev, 0, sizeof(int))) == LOOM_OK &&
              LC_CHECK(cudaMalloc((void **)&be->tail_count, LC_TAIL_COUNTERS * sizeof(unsigned))) == LOOM_OK &&
              LC_CHECK(cudaMemset(be->tail_count, 0, LC_TAIL_COUNTERS * sizeof(unsigned))) == LOOM_OK &&
              LC_CHECK(cudaMalloc((void **)&be->pre_u, LC_PRE_MAX_K * sizeof(float))) == LOOM_OK &&
              LC_CHECK(cudaMalloc((void **)&be->pre_parts, LC_PRE_MAX_PARTS * sizeof(float))) == LOOM_OK &&
              LC_CHECK(cudaMalloc((void **)&be->q8_hand[0], LC_Q8_RUNS * (size_t)LC_A8_RUN)) == LOOM_OK &&
              LC_CHECK(cudaMalloc((void **)&be->q8_hand[1], LC_Q8_RUNS * (size_t)LC_A8_RUN)) == LOOM_OK &&
              LC_CHECK(cudaHostAlloc((void **)&be->err_host, sizeof(int), cudaHostAllocDefault)) == LOOM_OK &&
              LC_CHECK(cudaDeviceSynchronize()) == LOOM_OK;
    if (!ok) {
        loom_log(LOOM_LOG_ERROR, "%s: cannot create a backend", d->name);
        be->backend.context = be;
        be_free(&be->backend);
        return NULL;
    }
    *be->err_host = 0;
    be->graphs = be->opts.graphs;
    /* cuBLAS's workspace set up front: nothing it needs is allocated while a product is queued */
    if (cudaMalloc((void **)&be->cublas_ws, LC_CUBLAS_WORKSPACE) != cudaSuccess ||
        cublasSetWorkspace(be->cublas, be->cublas_ws, LC_CUBLAS_WORKSPACE) != CUBLAS_STATUS_SUCCESS) {
        (void)cudaGetLastError();
        if (be->cublas_ws) cudaFree(be->cublas_ws);
        be->cublas_ws = NULL;
    }
    if (be->opts.profile) be->prof = lc_profile_new(be->opts.profile);
    be->backend.iface = be_iface;
    be->backend.device = dev;
    be->backend.context = be;
    return &be->backend;
}

/* The backend is embedded in its context, so 'free' releases both (see be_free). */

/* ================================================================ device */

static const char * dev_name(loom_backend_dev_t dev) { return dev_of(dev)->name; }
static const char * dev_description(loom_backend_dev_t dev) { return dev_of(dev)->description; }

static void dev_memory(loom_backend_dev_t dev, size_t * free_b, size_t * total_b) {
    *free_b = *total_b = 0;
    if (cudaSetDevice(dev_of(dev)->id) != cudaSuccess || cudaMemGetInfo(free_b, total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        *free_b = *total_b = 0;
    }
}

static enum loom_backend_dev_type dev_type(loom_backend_dev_t dev) { (void)dev; return LOOM_BACKEND_DEV_TYPE_GPU; }

static void dev_caps(loom_backend_dev_t dev, struct loom_backend_dev_caps * caps) {
    (void)dev;
    caps->async = true;
    caps->host_buffer = true;
    caps->buffer_from_host_ptr = true;
    caps->events = true;
}

static loom_backend_buffer_type_t dev_buft(loom_backend_dev_t dev) { return &dev_of(dev)->buft; }
static loom_backend_buffer_type_t dev_host_buft(loom_backend_dev_t dev) { return &dev_of(dev)->host_buft; }

/* Device memory of this GPU, and pinned host memory of any CUDA device (portable and mapped). */
static bool dev_supports_buft(loom_backend_dev_t dev, loom_backend_buffer_type_t buft) {
    return buft == &dev_of(dev)->buft || lc_buft_is_host(buft);
}

/* False when 't' already lives somewhere this device cannot read. */
static bool readable(loom_backend_dev_t dev, const struct loom_tensor * t) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(t, &offs);
    loom_backend_buffer_t buf = t->buffer ? t->buffer : base->buffer;
    if (!buf) return true; /* not placed yet */
    struct lc_buffer * b = lc_buffer_of(buf);
    return b && (b->kind != LC_BUFFER_DEVICE || b->dev == dev_of(dev));
}

/* False when 't' already lives where this device cannot write (read-only mapped memory). */
static bool writable(loom_backend_dev_t dev, const struct loom_tensor * t) {
    size_t offs;
    const struct loom_tensor * base = loom_tensor_storage(t, &offs);
    loom_backend_buffer_t buf = t->buffer ? t->buffer : base->buffer;
    if (!buf) return true;
    struct lc_buffer * b = lc_buffer_of(buf);
    return readable(dev, t) && b && !b->read_only;
}

static bool dev_supports_op(loom_backend_dev_t dev, const struct loom_tensor * op) {
    if (op->op == LOOM_OP_NONE || loom_op_is_view(op->op)) return true;
    for (int i = 0; i < LOOM_MAX_SRC; i++) {
        if (op->src[i] && !readable(dev, op->src[i])) return false;
    }
    if (!writable(dev, op)) return false;
    for (int i = 0; i < LOOM_MAX_DIMS; i++) {
        if (op->ne[i] < 0 || op->ne[i] > INT32_MAX) return false; /* launch shapes are 32-bit per dimension */
    }
    switch (op->op) {
    case LOOM_OP_DUP:
    case LOOM_OP_CPY:
    case LOOM_OP_CONT: return lc_cpy_supported(op);
    case LOOM_OP_ADD:
    case LOOM_OP_MUL: return lc_binary_supported(op);
    case LOOM_OP_SCALE:
    case LOOM_OP_SILU:
    case LOOM_OP_GELU: return lc_unary_supported(op);
    case LOOM_OP_RMS_NORM: return lc_rms_norm_supported(op);
    case LOOM_OP_MUL_MAT: return lc_mul_mat_supported(op);
    case LOOM_OP_GET_ROWS: return lc_get_rows_supported(op);
    case LOOM_OP_SET_ROWS: return lc_set_rows_supported(op);
    case LOOM_OP_ROPE: return lc_rope_supported(op);
    case LOOM_OP_SOFT_MAX: return lc_soft_max_supported(op);
    case LOOM_OP_ARGMAX: return lc_argmax_supported(op);
    case LOOM_OP_FLASH_ATTN_EXT: return lc_flash_attn_supported(op);
    default: return false;
    }
}

bool lc_supports_op(loom_backend_dev_t dev, const struct loom_tensor * op) { return dev_supports_op(dev, op); }

/* ---------------------------------------------------------------- events */

static loom_backend_event_t dev_event_new(loom_backend_dev_t dev) {
    cudaEvent_t ev;
    if (LC_CHECK(cudaSetDevice(dev_of(dev)->id)) != LOOM_OK) return NULL;
    if (LC_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != LOOM_OK) return NULL;
    loom_backend_event_t e = (loom_backend_event_t)calloc(1, sizeof *e);
    if (!e) {
        cudaEventDestroy(ev);
        return NULL;
    }
    e->device = dev;
    e->context = ev;
    return e;
}

static void dev_event_free(loom_backend_dev_t dev, loom_backend_event_t event) {
    (void)dev;
    cudaEventDestroy((cudaEvent_t)event->context);
    free(event);
}

static enum loom_status dev_event_synchronize(loom_backend_dev_t dev, loom_backend_event_t event) {
    (void)dev;
    return LC_CHECK(cudaEventSynchronize((cudaEvent_t)event->context));
}

static const struct loom_backend_device_i dev_iface = {
    .get_name = dev_name,
    .get_description = dev_description,
    .get_memory = dev_memory,
    .get_type = dev_type,
    .get_caps = dev_caps,
    .init_backend = dev_init_backend,
    .get_buffer_type = dev_buft,
    .get_host_buffer_type = dev_host_buft,
    .buffer_from_host_ptr = lc_buffer_from_host_ptr,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
    .event_new = dev_event_new,
    .event_free = dev_event_free,
    .event_synchronize = dev_event_synchronize,
};

/* ================================================================ registration */

/* LOOM_CUDA_MAX_BUFFER_MB: a positive number of MiB, else unlimited. */
static size_t env_max_size(void) {
    unsigned long long mb = 0;
    return loom_env_uint("LOOM_CUDA_MAX_BUFFER_MB", 1, SIZE_MAX / 1048576, &mb) ? (size_t)mb * 1048576 : SIZE_MAX;
}

static size_t register_devices(loom_backend_dev_t * devs, size_t max) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no GPU: register nothing, say nothing */
        return 0;
    }
    const size_t max_size = env_max_size();
    size_t added = 0;
    for (int i = 0; i < n && g_n_devs < LC_MAX_DEVICES && added < max; i++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        struct lc_device * d = &g_devs[g_n_devs];
        memset(d, 0, sizeof *d);
        d->id = i;
        snprintf(d->name, sizeof d->name, "CUDA%d", g_n_devs);
        snprintf(d->description, sizeof d->description, "%s", prop.name);
        snprintf(d->host_buft_name, sizeof d->host_buft_name, "CUDA%d_Host", g_n_devs);
        d->max_size = max_size;
        d->sm_count = prop.multiProcessorCount;
        int v = 0;
        d->host_ptr_is_dev_ptr = cudaDeviceGetAttribute(&v, cudaDevAttrCanUseHostPointerForRegisteredMem, i) == cudaSuccess && v;
        v = 0;
        d->register_read_only = cudaDeviceGetAttribute(&v, cudaDevAttrHostRegisterReadOnlySupported, i) == cudaSuccess && v;
        (void)cudaGetLastError();
        d->dev.iface = dev_iface;
        d->dev.context = d;
        lc_buffer_types_init(d);
        devs[added++] = &d->dev;
        g_n_devs++;
    }
    return added;
}

/* ================================================================ the module's entry (cuda-module.h) */

static bool dev_is_cuda(loom_backend_dev_t dev) { return dev && dev->iface.get_name == dev_name; }

static enum loom_status set_max_buffer_size(loom_backend_dev_t dev, size_t bytes) {
    if (!dev_is_cuda(dev)) {
        loom_log(LOOM_LOG_ERROR, "loom_cuda_set_max_buffer_size: '%s' is not a CUDA device", dev ? loom_backend_dev_name(dev) : "(null)");
        return LOOM_ERR_INVALID_ARG;
    }
    dev_of(dev)->max_size = bytes ? bytes : SIZE_MAX;
    return LOOM_OK;
}

extern "C" __attribute__((visibility("default"))) const struct lc_module_api * lc_module_api(int version) {
    static const struct lc_module_api api = {LC_MODULE_API, register_devices, dev_is_cuda, is_cuda_backend, set_max_buffer_size, lc_get_stats, lc_comm_init};
    return version == LC_MODULE_API ? &api : NULL;
}
