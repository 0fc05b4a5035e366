/* loom-sim.h -- the simulated discrete device: computes with the CPU kernels, behaves like a GPU.
 *
 * A sim device owns memory the rest of Loom must treat as device memory: its buffer type is not
 * host (is_host false), and the tensor addresses it hands out are not host pointers but addresses
 * in an address space of its own (non-canonical on x86-64, so a dereference faults at once), which
 * only the sim translates to the host memory behind them. Data moves only through set/get/memset/
 * copy; graph_compute translates every address in the graph, runs loom_cpu_graph_compute and puts
 * the addresses back (a device made with host_memory has host memory instead, at host addresses,
 * and stands for an accelerator sharing the host's memory). It can be limited (alignment, max buffer size, total memory), made to fail
 * (the Nth buffer creation or init_tensor), and made to offer or refuse optional features (wrapping
 * host memory, async copies, events, host access, individual ops), so that every path of the
 * backend layer and of the scheduler can be exercised without a GPU.
 *
 * Devices are made with loom_sim_device_new and used through loom-backend.h; register one with
 * loom_backend_register_device to reach it by name. The library's registry never makes sim devices
 * itself: the command line and the tests call loom_sim_register_env_devices.
 */
#ifndef LOOM_SIM_H
#define LOOM_SIM_H

#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct loom_sim_params {
    size_t alignment;          /* bytes (a power of two) of every address the buffer type hands out; default 256 */
    size_t max_buffer_size;    /* bytes of the largest single buffer; default SIZE_MAX (unlimited) */
    size_t memory_size;        /* bytes of device memory (buffers beyond it fail as out of memory);
                                  0 = unlimited, memory queries then report the host's (default 0) */
    size_t alloc_extra;        /* bytes added to every tensor's alloc size, like a GPU padding rows;
                                  default 0 */
    bool host_access;          /* the device can read host buffers and context memory (supports_buft
                                  accepts host buffer types); default false, like a GPU */
    bool host_memory;          /* the buffers are host memory at host addresses (the buffer type is
                                  host, every device that reads host memory reads them), like an
                                  accelerator sharing the host's memory: the device type is ACCEL and
                                  it has host access; default false (device memory, GPU type) */
    bool buffer_from_host_ptr; /* can wrap host memory (caps.buffer_from_host_ptr); the wrapped memory
                                  still gets sim addresses; default false */
    bool async;                /* fills the backend's async set/get/copy slots (they complete at once);
                                  default false */
    bool events;               /* supports events (record/wait/synchronize complete at once); default false */
    int n_threads;             /* threads for the CPU kernels; 0 = LOOM_N_THREADS or the processors online */
    uint64_t fail_alloc_at;    /* the Nth buffer creation (alloc or wrap, counted from 1) fails as out of
                                  memory; 0 = never (default). Re-arm with loom_sim_set_fail_alloc */
    uint64_t fail_init_tensor_at; /* the Nth init_tensor (tensor or view placement) fails with
                                  LOOM_ERR_BACKEND; 0 = never (default) */
    bool unsupported_ops[LOOM_OP_COUNT]; /* ops the device claims not to support: supports_op says
                                  false, graph_compute refuses them; all false by default */
    bool refuse_quant;         /* refuses every op with a quantized source (as the CUDA backend does
                                  until it has quantized kernels) in supports_op and graph_compute;
                                  default false: the sim computes them with the CPU kernels */
};

/* The defaults described above. */
LOOM_API struct loom_sim_params loom_sim_default_params(void);

/* Creates a sim device named 'name' (at most 63 bytes; e.g. "sim0"). 'params' may be NULL for the
 * defaults. Returns NULL (logged) for an empty name, an alignment that is not a power of two, or no
 * memory. The device is not registered; see loom_backend_register_device. */
LOOM_API loom_backend_dev_t loom_sim_device_new(const char * name, const struct loom_sim_params * params);
/* Unregisters (when registered) and frees the device. Its buffers, backends and events must have been
 * freed first (a programming error, aborts, otherwise). NULL is a no-op. */
LOOM_API void loom_sim_device_free(loom_backend_dev_t dev);
/* True when 'dev' is a sim device. */
LOOM_API bool loom_sim_device_is_sim(loom_backend_dev_t dev);
/* Makes and registers (loom_backend_register_device) the devices the environment asks for:
 * LOOM_SIM_DEVICES=N (1..64) default devices named sim0..sim{N-1}, limited by LOOM_SIM_MAX_BUFFER_MB
 * and LOOM_SIM_MEMORY_MB when set (a bad value is ignored with a warning). Call it once, before the
 * devices are looked up; they live as long as the process. Returns the number registered (0 when
 * LOOM_SIM_DEVICES is unset). */
LOOM_API size_t loom_sim_register_env_devices(void);

struct loom_sim_stats {
    size_t bytes_allocated;   /* bytes of device memory held by live buffers now */
    size_t bytes_peak;        /* the most bytes_allocated has been */
    size_t n_buffers;         /* live buffers (allocated and wrapped) */
    uint64_t n_allocs;        /* buffer creations that succeeded (allocated and wrapped) */
    uint64_t n_alloc_calls;   /* buffer creations attempted (the count fail_alloc_at refers to) */
    uint64_t n_init_calls;    /* init_tensor calls (the count fail_init_tensor_at refers to) */
    uint64_t bytes_set;       /* bytes written from the host (set_tensor, sync or async) */
    uint64_t bytes_get;       /* bytes read to the host (get_tensor, sync or async) */
    uint64_t bytes_copied;    /* bytes copied device to device on this device (cpy_tensor) */
    uint64_t n_graph_computes;/* graph_compute calls that reached the kernels */
    uint64_t n_async;         /* set/get/copy calls served by the backend's async slots */
    uint64_t n_event_records; /* events recorded on this device's backends */
    uint64_t last_launch_key; /* the launch key of the last graph computed here (0: none; its producer, the
                               * scheduler, sets it: equal keys, the same work) */
    uint64_t n_keyed_repeats; /* graph computes whose nonzero launch key equalled the one before */
};

/* Reads the device's counters. 'dev' must be a sim device. */
LOOM_API void loom_sim_get_stats(loom_backend_dev_t dev, struct loom_sim_stats * stats);
/* Zeroes the counters (every field but bytes_allocated and n_buffers) and sets the peak to the
 * current allocation; live buffers are kept. */
LOOM_API void loom_sim_reset_stats(loom_backend_dev_t dev);
/* Makes the Nth buffer creation from now (counted from 1) fail; 0 disarms. */
LOOM_API void loom_sim_set_fail_alloc(loom_backend_dev_t dev, uint64_t n);
/* Makes the Nth init_tensor from now (counted from 1) fail; 0 disarms. */
LOOM_API void loom_sim_set_fail_init_tensor(loom_backend_dev_t dev, uint64_t n);
/* Sets the largest single buffer to 'bytes' (0: SIZE_MAX, unlimited) for the allocations that
 * follow; buffers already made keep their size. */
LOOM_API void loom_sim_set_max_buffer_size(loom_backend_dev_t dev, size_t bytes);

/* True when 'addr' lies in the sim address space (an address some sim device could hand out). */
LOOM_API bool loom_sim_is_device_addr(const void * addr);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_SIM_H */
