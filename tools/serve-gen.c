/* serve-gen.c -- `loom serve`'s worker: loads the model, then runs queued jobs one at a time in one slot. */
#include "serve-gen.h"

#include "cli-util.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    struct serve_gen_params p;
    pthread_t thread;
    bool started;
    atomic_int ready;     /* 0 loading, 1 ready, -1 failed */
    atomic_bool stopping;
    pthread_mutex_t mu;   /* guards the queue, 'current' and the stats */
    pthread_cond_t cv;
    struct serve_job * head, * tail;
    struct serve_job * current;
    struct serve_stats stats;
    struct loom_model * model;
    struct loom_llama_context * lctx;
    struct loom_detok * detok;
    int32_t n_ctx;
    int32_t * cached;     /* [n_ctx] the tokens the KV cache holds, in order */
    int32_t n_cached;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

struct serve_job * serve_job_new(const int32_t * prompt, int32_t n_prompt) {
    struct serve_job * j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->prompt = malloc(((size_t)n_prompt + 1) * sizeof *prompt);
    j->text = malloc(64);
    if (!j->prompt || !j->text) {
        free(j->prompt), free(j->text), free(j);
        return NULL;
    }
    memcpy(j->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    j->n_prompt = n_prompt;
    j->n_predict = -1;
    j->eot_id = -1;
    j->sp = loom_sampler_default_params();
    j->text[0] = 0;
    j->cap = 64;
    j->refs = 1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    return j;
}

bool serve_job_add_stop(struct serve_job * j, const char * s) {
    if (!*s) return true;
    if (j->n_stops == SERVE_STOP_MAX) return false;
    const size_t n = strlen(s);
    char * d = malloc(n + 1);
    if (!d) return false;
    memcpy(d, s, n + 1);
    j->stops[j->n_stops++] = d;
    if (n > j->longest_stop) j->longest_stop = n;
    return true;
}

void serve_job_unref(struct serve_job * j) {
    pthread_mutex_lock(&j->mu);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    for (int i = 0; i < j->n_stops; i++) free(j->stops[i]);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->prompt);
    free(j->text);
    free(j);
}

static void job_end(struct serve_job * j, enum serve_finish f) {
    pthread_mutex_lock(&j->mu);
    j->finish = f;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* Appends generated text; with stop strings, cuts the text at the first one found (true then). */
static bool job_append(struct serve_job * j, const char * s, size_t n, bool * oom) {
    bool stopped = false;
    pthread_mutex_lock(&j->mu);
    if (j->len + n + 1 > j->cap) {
        size_t c = j->cap * 2;
        while (c < j->len + n + 1) c *= 2;
        char * t = realloc(j->text, c);
        if (!t) {
            *oom = true;
            pthread_mutex_unlock(&j->mu);
            return true;
        }
        j->text = t, j->cap = c;
    }
    const size_t from = j->len > j->longest_stop ? j->len - j->longest_stop : 0; /* a stop may start in older text */
    memcpy(j->text + j->len, s, n);
    j->len += n;
    j->text[j->len] = 0;
    for (int i = 0; i < j->n_stops; i++) {
        char * at = strstr(j->text + from, j->stops[i]);
        if (at) {
            j->len = (size_t)(at - j->text);
            j->text[j->len] = 0;
            stopped = true;
        }
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return stopped;
}

static bool job_cancelled(struct serve_job * j) {
    pthread_mutex_lock(&j->mu);
    const bool c = j->cancel;
    pthread_mutex_unlock(&j->mu);
    return c || atomic_load(&G.stopping);
}

/* Runs one job in the slot: the prompt, then tokens until an end (greedy output is `loom run`'s). */
static enum serve_finish run_job(struct serve_job * j) {
    const struct loom_vocab * vocab = loom_model_vocab(G.model);
    const int n_vocab = loom_model_hparams(G.model)->n_vocab;
    struct loom_sampler * smp = NULL;
    if (loom_sampler_new(&j->sp, &smp) != LOOM_OK) return SERVE_FAILED;
    int32_t keep = 0; /* the prompt's prefix already in the cache, less one token (its logits are needed) */
    if (j->cache_prompt) {
        while (keep < G.n_cached && keep < j->n_prompt - 1 && G.cached[keep] == j->prompt[keep]) keep++;
    }
    if (keep > 0) loom_llama_kv_truncate(G.lctx, keep);
    else loom_llama_kv_clear(G.lctx);
    G.n_cached = keep;
    j->n_cached = keep;
    loom_detok_reset(G.detok);
    const char * piece;
    size_t plen;
    for (int32_t i = 0; i < j->n_prompt; i++) { /* the detokenizer needs the start (a leading space is dropped only there) */
        loom_sampler_accept(smp, j->prompt[i]);
        loom_detok_push(G.detok, j->prompt[i], &piece, &plen);
    }
    enum serve_finish f = SERVE_LENGTH;
    bool oom = false;
    int64_t t0 = loom_time_us();
    if (loom_llama_decode(G.lctx, j->prompt + keep, j->n_prompt - keep) != LOOM_OK) {
        loom_sampler_free(smp);
        G.n_cached = 0;
        return SERVE_FAILED;
    }
    memcpy(G.cached + keep, j->prompt + keep, (size_t)(j->n_prompt - keep) * sizeof *G.cached);
    G.n_cached = j->n_prompt;
    j->t_prompt_ms = (loom_time_us() - t0) / 1000.0;
    t0 = loom_time_us();
    for (;;) {
        if (j->n_predict >= 0 && j->n_gen >= j->n_predict) break;
        if (job_cancelled(j)) {
            f = SERVE_CANCELLED;
            break;
        }
        int32_t tok;
        if (loom_sampler_sample(smp, loom_llama_get_logits(G.lctx), n_vocab, &tok) != LOOM_OK) {
            f = SERVE_FAILED;
            break;
        }
        if ((loom_vocab_is_eog(vocab, tok) || tok == j->eot_id) && !j->ignore_eos) {
            f = SERVE_EOS;
            break;
        }
        loom_sampler_accept(smp, tok);
        pthread_mutex_lock(&j->mu);
        j->n_gen++;
        pthread_mutex_unlock(&j->mu);
        if (loom_detok_push(G.detok, tok, &piece, &plen) == LOOM_OK && plen && job_append(j, piece, plen, &oom)) {
            f = oom ? SERVE_FAILED : SERVE_WORD;
            break;
        }
        if (j->n_predict >= 0 && j->n_gen >= j->n_predict) break;
        if (loom_llama_n_past(G.lctx) >= G.n_ctx) break; /* the context is full: "length" */
        if (loom_llama_decode(G.lctx, &tok, 1) != LOOM_OK) {
            f = SERVE_FAILED;
            break;
        }
        G.cached[G.n_cached++] = tok;
    }
    if (f != SERVE_WORD && f != SERVE_FAILED && loom_detok_flush(G.detok, &piece, &plen) == LOOM_OK && plen && job_append(j, piece, plen, &oom)) {
        f = oom ? SERVE_FAILED : SERVE_WORD;
    }
    j->t_gen_ms = (loom_time_us() - t0) / 1000.0;
    loom_sampler_free(smp);
    return f;
}

static bool on_progress(float progress, void * user) {
    (void)progress, (void)user;
    return !atomic_load(&G.stopping);
}

static bool load(void) {
    struct loom_model_params mp = loom_model_default_params();
    mp.n_gpu_layers = G.p.n_gpu_layers;
    mp.progress = on_progress;
    if (loom_model_load(G.p.model_path, mp, &G.model) != LOOM_OK) return false;
    const int32_t n_train = loom_model_hparams(G.model)->n_ctx_train;
    G.n_ctx = G.p.n_ctx > 0 ? G.p.n_ctx : (n_train > 4096 ? 4096 : n_train);
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = G.n_ctx;
    cp.n_threads = G.p.n_threads;
    if (loom_llama_context_new(G.model, cp, &G.lctx) != LOOM_OK) return false;
    G.cached = malloc((size_t)G.n_ctx * sizeof *G.cached);
    if (!G.cached) return false;
    return loom_detok_new(loom_model_vocab(G.model), 0, &G.detok) == LOOM_OK;
}

static void * worker(void * arg) {
    (void)arg;
    if (!load()) {
        if (!atomic_load(&G.stopping)) {
            fprintf(stderr, "loom serve: %s\n", cli_last_error("cannot load the model"));
            atomic_store(&G.ready, -1);
            kill(getpid(), SIGTERM); /* the main thread waits for it, and exits with 1 */
        }
        return NULL;
    }
    atomic_store(&G.ready, 1);
    fprintf(stderr, "loom serve: model loaded (%s, context %d)\n", loom_model_desc(G.model), G.n_ctx);
    for (;;) {
        pthread_mutex_lock(&G.mu);
        while (!G.head && !atomic_load(&G.stopping)) pthread_cond_wait(&G.cv, &G.mu);
        if (atomic_load(&G.stopping)) {
            pthread_mutex_unlock(&G.mu);
            break;
        }
        struct serve_job * j = G.head;
        G.head = j->next;
        if (!G.head) G.tail = NULL;
        G.stats.deferred--;
        G.stats.processing++;
        G.current = j;
        pthread_mutex_unlock(&G.mu);

        const enum serve_finish f = run_job(j);
        pthread_mutex_lock(&G.mu);
        G.stats.processing--;
        G.current = NULL;
        G.stats.n_prompt_tokens += (uint64_t)(j->n_prompt - j->n_cached);
        G.stats.n_gen_tokens += (uint64_t)j->n_gen;
        G.stats.t_prompt_s += j->t_prompt_ms / 1000.0;
        G.stats.t_gen_s += j->t_gen_ms / 1000.0;
        pthread_mutex_unlock(&G.mu);
        job_end(j, f);
        serve_job_unref(j);
    }
    /* the jobs still waiting end cancelled */
    pthread_mutex_lock(&G.mu);
    struct serve_job * j = G.head;
    G.head = G.tail = NULL;
    G.stats.deferred = 0;
    pthread_mutex_unlock(&G.mu);
    while (j) {
        struct serve_job * n = j->next;
        job_end(j, SERVE_CANCELLED);
        serve_job_unref(j);
        j = n;
    }
    return NULL;
}

bool serve_gen_start(const struct serve_gen_params * p) {
    G.p = *p;
    G.started = pthread_create(&G.thread, NULL, worker, NULL) == 0;
    return G.started;
}

int serve_gen_ready(void) { return atomic_load(&G.ready); }
const struct loom_model * serve_gen_model(void) { return G.model; }
int32_t serve_gen_n_ctx(void) { return G.n_ctx; }

bool serve_gen_submit(struct serve_job * j) {
    pthread_mutex_lock(&G.mu);
    const bool busy = G.current || G.head;
    if (atomic_load(&G.stopping) || (busy && G.stats.deferred >= G.p.queue_max)) {
        pthread_mutex_unlock(&G.mu);
        return false;
    }
    j->refs++; /* the worker's; nobody else holds the job yet */
    j->next = NULL;
    if (G.tail) G.tail->next = j;
    else G.head = j;
    G.tail = j;
    G.stats.deferred++;
    pthread_cond_signal(&G.cv);
    pthread_mutex_unlock(&G.mu);
    return true;
}

void serve_gen_wait(struct serve_job * j) {
    pthread_mutex_lock(&j->mu);
    while (j->finish == SERVE_RUNNING) pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
}

void serve_gen_stats(struct serve_stats * out) {
    pthread_mutex_lock(&G.mu);
    *out = G.stats;
    pthread_mutex_unlock(&G.mu);
}

void serve_gen_stop(void) {
    pthread_mutex_lock(&G.mu);
    atomic_store(&G.stopping, true);
    pthread_cond_broadcast(&G.cv);
    pthread_mutex_unlock(&G.mu);
    if (G.started) pthread_join(G.thread, NULL);
    G.started = false;
}

void serve_gen_free(void) {
    loom_detok_free(G.detok);
    loom_llama_context_free(G.lctx);
    loom_model_free(G.model);
    free(G.cached);
    G.cached = NULL;
    G.detok = NULL, G.lctx = NULL, G.model = NULL;
}
