/* cuda-profile.cuh -- the backend parameter profile=1|2: per-kernel-kind GPU times and host times of
 * graph_compute (see cuda-profile.cu). Internal to src/cuda/. */
#ifndef LOOM_CUDA_PROFILE_CUH
#define LOOM_CUDA_PROFILE_CUH

#include "cuda-common.cuh"

/* A profile of mode 1 (kernel times and host times) or 2 (host times only); NULL on OOM. */
struct lc_profile * lc_profile_new(int mode);
/* True when kernels are timed: graph_compute must then launch directly, one group at a time. */
bool lc_profile_times_kernels(const struct lc_profile * p);
/* Brackets one graph_compute; 'batch' files it under computes with cuBLAS products. */
void lc_profile_begin(struct lc_backend * be, bool batch);
void lc_profile_end(struct lc_backend * be, int n_nodes, int n_groups);
/* After each launch group: its label, FLOPs and bytes moved (for the rates in the report). */
void lc_profile_group(struct lc_backend * be, const char * label, double flop, double bytes);
/* 'ms' spent waiting in synchronize. */
void lc_profile_sync(struct lc_backend * be, double ms);
/* Logs the report and frees be->prof (NULL afterwards). */
void lc_profile_free(struct lc_backend * be);

#endif
