/* serve-gen.h -- `loom serve`'s generation side: -np slots sharing one KV cache, a queue of jobs, one worker thread that owns the model and decodes every slot's tokens in one batch per step. */
#ifndef LOOM_TOOLS_SERVE_GEN_H
#define LOOM_TOOLS_SERVE_GEN_H

#include "gen-controls.h"
#include "loom-llama.h"
#include "loom-sampler.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_STOP_MAX 4 /* stop strings per request (OpenAI's limit) */

/* Why a job ended (the field's finish_reason: "stop" for eos/word, "length" for the others, as
 * llama-server gives it: a job cut short by the server stopping ends "length" too). */
enum serve_finish { SERVE_RUNNING, SERVE_EOS, SERVE_WORD, SERVE_LENGTH, SERVE_CANCELLED, SERVE_FAILED };

/* One request's generation. The submitter fills the inputs; the worker writes the outputs under
 * 'mu' and broadcasts 'cv' whenever text is added and when the job ends. */
struct serve_job {
    /* inputs */
    int32_t * prompt;                 /* [n_prompt] token ids (owned) */
    int32_t n_prompt;
    int32_t n_predict;                /* tokens at most; < 0: until the end or the context is full */
    struct loom_sampler_params sp;
    bool ignore_eos;
    bool cache_prompt;                /* reuse the slot's cached tokens that the prompt starts with */
    int32_t eot_id;                   /* one more end-of-generation id (the chat template's end of turn), or -1 */
    struct logit_bias biases[LOGIT_BIAS_MAX]; /* [n_biases] added to the logits before sampling (ids checked) */
    int n_biases;
    char * stops[SERVE_STOP_MAX];     /* owned, NUL-terminated, non-empty */
    int n_stops;
    size_t longest_stop;
    /* outputs (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char * text;                      /* generated text so far (NUL-terminated) */
    size_t len, cap;
    int32_t n_gen;
    int32_t n_cached;                 /* prompt tokens taken from the slot's cache (not evaluated) */
    int32_t n_evaluated;              /* prompt tokens evaluated (fewer than the rest when the job was stopped in its prompt) */
    int slot;                         /* the slot that ran it (-1 until one takes it) */
    enum serve_finish finish;         /* SERVE_RUNNING until the worker is done with the job */
    double t_prompt_ms, t_gen_ms;
    bool cancel;                      /* set by the client side (a disconnect): the worker stops */
    int refs;                         /* the submitter's and the worker's */
    struct serve_job * next;          /* queue link */
};

struct serve_gen_params {
    const char * model_path;
    int32_t n_ctx;                    /* all slots together; <= 0: the training context, at most 4096 */
    int32_t n_parallel;               /* slots (>= 1); each holds n_ctx / n_parallel tokens */
    int32_t n_gpu_layers, n_threads;  /* n_gpu_layers CLI_NGL_AUTO: as many as fit, 'fit_margin' MiB left free */
    long long fit_margin;
    int queue_max;                    /* jobs that may wait while every slot is busy */
    enum loom_llama_flash_attn flash_attn; /* -fa */
    bool check_tensors;               /* --check-tensors: float weights scanned for NaN and inf at load */
};

/* Totals for /metrics. */
struct serve_stats {
    uint64_t n_prompt_tokens, n_gen_tokens;
    double t_prompt_s, t_gen_s;
    int processing, deferred;         /* jobs in a slot, jobs waiting for one */
    int n_slots;
    int32_t kv_used, kv_size;         /* KV cache cells in use (every slot's cached tokens), of n_ctx */
    uint64_t n_decode_calls;          /* batches decoded */
    uint64_t n_decode_tokens;         /* tokens in them */
};

/* Allocates a job holding a copy of 'prompt' (NULL on OOM); refs = 1. */
struct serve_job * serve_job_new(const int32_t * prompt, int32_t n_prompt);
/* Adds a stop string (false when there are SERVE_STOP_MAX already or out of memory; empty strings ignored). */
bool serve_job_add_stop(struct serve_job * j, const char * s);
/* Drops one reference; the last one frees the job. */
void serve_job_unref(struct serve_job * j);

/* Before the server listens: reads the model file, checks the slots' split of the context (with a
 * warning when a slot's context exceeds the training context), loads the weights (fitting them to
 * the device for -ngl auto) and creates the context with its KV cache. False (one line reported)
 * for a file that cannot be read or loaded, a split that leaves a slot less than 2 tokens, or a KV
 * cache that does not fit. */
bool serve_gen_open(const struct serve_gen_params * p);
/* Starts the worker thread; serve_gen_ready() turns 1 when it runs. Returns false when the thread
 * cannot be started. */
bool serve_gen_start(void);
/* 1 once the worker runs, 0 before. */
int serve_gen_ready(void);
/* The loaded model (valid once ready) and the context size of one slot. */
const struct loom_model * serve_gen_model(void);
int32_t serve_gen_n_ctx(void);
/* Queues 'j' (taking a reference for the worker); it runs as soon as a slot is free. Returns false
 * when every slot is busy and queue_max jobs wait already, or the server is stopping (the job is
 * untouched then). */
bool serve_gen_submit(struct serve_job * j);
/* Waits until the job ends; true then. With a socket 'fd' (>= 0) of the client that waits for the
 * answer, the socket is checked every SERVE_CLIENT_POLL_MS: when the client has closed it, the job
 * is cancelled (its slot freed at the worker's next step) and false is returned at once. fd < 0:
 * no check. */
#define SERVE_CLIENT_POLL_MS 100
bool serve_gen_wait_client(struct serve_job * j, int fd);
void serve_gen_stats(struct serve_stats * out);
/* Whether each slot holds a job now, into busy[0 .. min(max, slots)); returns the number of slots. */
int serve_gen_slots_busy(bool * busy, int max);
/* Cancels the running and queued jobs (each ends SERVE_CANCELLED, with the text generated so far)
 * and stops the worker (a load in progress is abandoned). */
void serve_gen_stop(void);
/* True once serve_gen_stop has begun: a job submitted now is refused. */
bool serve_gen_stopping(void);
/* Frees the model and the context (after serve_gen_stop, once no request uses them). */
void serve_gen_free(void);

#endif
