/* serve-gen.c -- `loom serve`'s generation: loads the model and the KV cache (before the server
 * listens), then a worker runs the queued jobs in -np slots, each
 * slot a sequence of the one KV cache, every slot's next tokens decoded together in one batch per step. */
#include "serve-gen.h"

#include "cli-devices.h"
#include "cli-util.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* One slot: a sequence (id = its index) of the KV cache, the tokens it holds, and the job it runs. */
struct slot {
    struct serve_job * job;     /* NULL when free */
    struct loom_sampler * smp;
    struct loom_detok * detok;
    int32_t * cached;           /* [n_ctx_slot] the tokens the slot's sequence holds, in order */
    float * logits;             /* [n_vocab] scratch: the logits with the job's logit_bias added */
    int32_t n_cached;
    int32_t n_done;             /* prompt tokens in the cache (the job's prompt is done when n_prompt) */
    int32_t pending;            /* the sampled token to decode next, or -1 */
    int32_t batch_i;            /* its token with logits in this step's batch, or -1 */
    int64_t t_start, t_first;   /* when the job took the slot, when its prompt was done (us) */
    uint64_t last_used;         /* for picking the least recently used free slot */
};

static struct {
    struct serve_gen_params p;
    pthread_t thread;
    bool started;
    atomic_int ready;     /* 0 until the worker runs, 1 then */
    atomic_bool stopping;
    pthread_mutex_t mu;   /* guards the queue and the stats */
    pthread_cond_t cv;
    struct serve_job * head, * tail;
    struct serve_stats stats;
    struct loom_model_file * file; /* opened by serve_gen_open, freed once the worker has loaded the weights */
    struct loom_model * model;
    struct loom_llama_context * lctx;
    int32_t n_ctx;        /* of one slot */
    int32_t n_batch;      /* tokens per decode call */
    struct slot * slots;  /* [n_parallel] */
    bool * slot_busy;     /* [n_parallel] a job is in the slot (under mu, for /slots) */
    int n_slots;
    uint64_t use_clock;
    /* the step's batch */
    int32_t * b_tok, * b_pos, * b_seq;
    int8_t * b_logits;
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
    j->slot = -1;
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

/* Ends the slot's job: stats, its outcome to the client, the slot free (its cache kept for a
 * follow-up's cache_prompt). */
static void slot_end(struct slot * sl, enum serve_finish f) {
    struct serve_job * j = sl->job;
    const char * piece;
    size_t plen;
    bool oom = false;
    if (f != SERVE_WORD && f != SERVE_FAILED && sl->n_done == j->n_prompt && loom_detok_flush(sl->detok, &piece, &plen) == LOOM_OK &&
        plen && job_append(j, piece, plen, &oom)) {
        f = oom ? SERVE_FAILED : SERVE_WORD;
    }
    const int64_t now = loom_time_us();
    if (!sl->t_first) sl->t_first = now;
    j->t_prompt_ms = (sl->t_first - sl->t_start) / 1000.0;
    j->t_gen_ms = (now - sl->t_first) / 1000.0;
    j->n_evaluated = sl->n_done - j->n_cached;
    loom_sampler_free(sl->smp);
    sl->smp = NULL;
    sl->job = NULL;
    sl->pending = -1;
    sl->last_used = ++G.use_clock;
    pthread_mutex_lock(&G.mu);
    G.slot_busy[sl - G.slots] = false;
    G.stats.processing--;
    G.stats.n_prompt_tokens += (uint64_t)j->n_evaluated;
    G.stats.n_gen_tokens += (uint64_t)j->n_gen;
    G.stats.t_prompt_s += j->t_prompt_ms / 1000.0;
    G.stats.t_gen_s += j->t_gen_ms / 1000.0;
    G.stats.kv_used = loom_llama_kv_used_cells(G.lctx);
    pthread_mutex_unlock(&G.mu);
    job_end(j, f);
    serve_job_unref(j);
}

/* Puts job 'j' in the free slot 'sl': the prompt's prefix the slot's cache holds is kept with
 * cache_prompt (less one token: its logits are needed), the rest of the sequence dropped. */
static bool slot_start(struct slot * sl, struct serve_job * j) {
    const int seq = (int)(sl - G.slots);
    int32_t keep = 0;
    if (j->cache_prompt) {
        while (keep < sl->n_cached && keep < j->n_prompt - 1 && sl->cached[keep] == j->prompt[keep]) keep++;
    }
    loom_llama_kv_seq_rm(G.lctx, seq, keep, -1);
    sl->n_cached = keep;
    sl->n_done = keep;
    sl->pending = -1;
    sl->t_start = loom_time_us();
    sl->t_first = 0;
    sl->job = j;
    j->slot = seq;
    j->n_cached = keep;
    if (loom_sampler_new(&j->sp, &sl->smp) != LOOM_OK) return false;
    loom_detok_reset(sl->detok);
    const char * piece;
    size_t plen;
    for (int32_t i = 0; i < j->n_prompt; i++) { /* the detokenizer needs the start (a leading space is dropped only there) */
        loom_sampler_accept(sl->smp, j->prompt[i]);
        loom_detok_push(sl->detok, j->prompt[i], &piece, &plen);
    }
    return true;
}

/* The free slot for 'j': with cache_prompt the one whose cache shares the longest prefix with the
 * prompt, else (or when none shares any) the least recently used; NULL when all are busy. */
static struct slot * pick_slot(const struct serve_job * j) {
    struct slot * best = NULL;
    int32_t best_len = 0;
    for (int i = 0; i < G.n_slots; i++) {
        struct slot * sl = &G.slots[i];
        if (sl->job) continue;
        int32_t k = 0;
        if (j->cache_prompt) {
            while (k < sl->n_cached && k < j->n_prompt && sl->cached[k] == j->prompt[k]) k++;
        }
        if (!best || k > best_len || (k == best_len && sl->last_used < best->last_used)) best = sl, best_len = k;
    }
    return best;
}

/* After a step: the slot's logits give its next token (or its end). Greedy output is `loom run`'s. */
static void slot_sample(struct slot * sl) {
    struct serve_job * j = sl->job;
    const struct loom_vocab * vocab = loom_model_vocab(G.model);
    const int n_vocab = loom_model_hparams(G.model)->n_vocab;
    if (!sl->t_first) sl->t_first = loom_time_us();
    if (j->n_predict >= 0 && j->n_gen >= j->n_predict) return slot_end(sl, SERVE_LENGTH);
    int32_t tok;
    const float * logits = loom_llama_get_logits_ith(G.lctx, sl->batch_i);
    if (logits && j->n_biases) {
        memcpy(sl->logits, logits, (size_t)n_vocab * sizeof *logits);
        for (int i = 0; i < j->n_biases; i++) sl->logits[j->biases[i].token] += j->biases[i].bias;
        logits = sl->logits;
    }
    if (!logits || loom_sampler_sample(sl->smp, logits, n_vocab, &tok) != LOOM_OK) return slot_end(sl, SERVE_FAILED);
    if ((loom_vocab_is_eog(vocab, tok) || tok == j->eot_id) && !j->ignore_eos) return slot_end(sl, SERVE_EOS);
    loom_sampler_accept(sl->smp, tok);
    pthread_mutex_lock(&j->mu);
    j->n_gen++;
    pthread_mutex_unlock(&j->mu);
    const char * piece;
    size_t plen;
    bool oom = false;
    if (loom_detok_push(sl->detok, tok, &piece, &plen) == LOOM_OK && plen && job_append(j, piece, plen, &oom)) {
        return slot_end(sl, oom ? SERVE_FAILED : SERVE_WORD);
    }
    if (j->n_predict >= 0 && j->n_gen >= j->n_predict) return slot_end(sl, SERVE_LENGTH);
    if (sl->n_cached >= G.n_ctx) return slot_end(sl, SERVE_LENGTH); /* the slot's context is full: "length" */
    sl->pending = tok;
}

/* Moves waiting jobs into free slots. */
static void assign_jobs(void) {
    for (;;) {
        pthread_mutex_lock(&G.mu);
        struct serve_job * j = G.head;
        struct slot * sl = j ? pick_slot(j) : NULL;
        if (!sl) {
            pthread_mutex_unlock(&G.mu);
            return;
        }
        G.head = j->next;
        if (!G.head) G.tail = NULL;
        G.stats.deferred--;
        G.stats.processing++;
        G.slot_busy[sl - G.slots] = true;
        pthread_mutex_unlock(&G.mu);
        if (!slot_start(sl, j)) slot_end(sl, SERVE_FAILED);
    }
}

/* One step: each generating slot's pending token first, then prompt tokens up to n_batch in all;
 * one decode; then every slot whose logits came back samples. Returns false when no slot is busy. */
static bool step(void) {
    int32_t n = 0;
    bool busy = false;
    for (int i = 0; i < G.n_slots; i++) {
        struct slot * sl = &G.slots[i];
        sl->batch_i = -1;
        if (!sl->job) continue;
        if (job_cancelled(sl->job)) {
            slot_end(sl, SERVE_CANCELLED);
            continue;
        }
        busy = true;
        if (sl->pending < 0) continue;
        G.b_tok[n] = sl->pending, G.b_pos[n] = sl->n_cached, G.b_seq[n] = i, G.b_logits[n] = 1;
        sl->cached[sl->n_cached++] = sl->pending;
        sl->pending = -1;
        sl->batch_i = n++;
    }
    for (int i = 0; i < G.n_slots && n < G.n_batch; i++) {
        struct slot * sl = &G.slots[i];
        if (!sl->job || sl->n_done == sl->job->n_prompt) continue;
        const struct serve_job * j = sl->job;
        while (sl->n_done < j->n_prompt && n < G.n_batch) {
            G.b_tok[n] = j->prompt[sl->n_done], G.b_pos[n] = sl->n_done, G.b_seq[n] = i, G.b_logits[n] = 0;
            sl->cached[sl->n_cached++] = j->prompt[sl->n_done++];
            n++;
        }
        if (sl->n_done == j->n_prompt) G.b_logits[n - 1] = 1, sl->batch_i = n - 1;
    }
    if (!busy) return false;
    if (n == 0) return true;
    const struct loom_llama_batch b = {.n_tokens = n, .token = G.b_tok, .pos = G.b_pos, .seq_id = G.b_seq, .logits = G.b_logits};
    const enum loom_status st = loom_llama_decode_batch(G.lctx, &b);
    pthread_mutex_lock(&G.mu);
    G.stats.n_decode_calls++;
    G.stats.n_decode_tokens += (uint64_t)n;
    G.stats.kv_used = loom_llama_kv_used_cells(G.lctx);
    pthread_mutex_unlock(&G.mu);
    for (int i = 0; i < G.n_slots; i++) {
        struct slot * sl = &G.slots[i];
        if (!sl->job) continue;
        bool in_batch = sl->batch_i >= 0;
        for (int32_t k = 0; k < n && !in_batch; k++) in_batch = G.b_seq[k] == i;
        if (st != LOOM_OK && in_batch) { /* what the slot holds is no longer known: start it afresh */
            loom_llama_kv_seq_rm(G.lctx, i, -1, -1);
            sl->n_cached = 0;
            slot_end(sl, SERVE_FAILED);
        } else if (sl->batch_i >= 0) {
            slot_sample(sl);
        }
    }
    return true;
}

static bool on_progress(float progress, void * user) {
    (void)progress, (void)user;
    return !atomic_load(&G.stopping);
}

static bool load(void) {
    struct loom_model_params mp = loom_model_default_params();
    mp.n_gpu_layers = G.p.n_gpu_layers;
    mp.progress = on_progress;
    mp.check_tensors = G.p.check_tensors;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = G.n_ctx * G.n_slots;
    cp.n_threads = G.p.n_threads;
    cp.flash_attn = G.p.flash_attn;
    bool ok = G.p.n_gpu_layers != CLI_NGL_AUTO || cli_fit_layers(G.file, &mp, cp, G.p.fit_margin);
    if (ok && loom_model_load_file(G.file, mp, &G.model) != LOOM_OK) {
        cli_name_last_error(G.p.model_path, "cannot load the model");
        ok = false;
    }
    loom_model_file_free(G.file);
    G.file = NULL;
    if (!ok) return false;
    const enum loom_status cst = loom_llama_context_new(G.model, cp, &G.lctx);
    cli_hint_last_error(cst, "use a smaller -c");
    if (cst != LOOM_OK) return false;
    G.n_batch = cp.n_batch < cp.n_ctx ? cp.n_batch : cp.n_ctx;
    if (G.n_batch < G.n_slots) G.n_batch = G.n_slots;
    G.slots = calloc((size_t)G.n_slots, sizeof *G.slots);
    G.slot_busy = calloc((size_t)G.n_slots, sizeof *G.slot_busy);
    G.b_tok = malloc((size_t)G.n_batch * 3 * sizeof *G.b_tok);
    G.b_logits = malloc((size_t)G.n_batch);
    if (!G.slots || !G.slot_busy || !G.b_tok || !G.b_logits) return false;
    G.b_pos = G.b_tok + G.n_batch;
    G.b_seq = G.b_pos + G.n_batch;
    for (int i = 0; i < G.n_slots; i++) {
        G.slots[i].pending = -1;
        G.slots[i].cached = malloc((size_t)G.n_ctx * sizeof *G.slots[i].cached);
        G.slots[i].logits = malloc((size_t)loom_model_hparams(G.model)->n_vocab * sizeof *G.slots[i].logits);
        if (!G.slots[i].cached || !G.slots[i].logits || loom_detok_new(loom_model_vocab(G.model), 0, &G.slots[i].detok) != LOOM_OK) return false;
    }
    G.stats.n_slots = G.n_slots;
    G.stats.kv_size = cp.n_ctx;
    return true;
}

bool serve_gen_open(const struct serve_gen_params * p) {
    G.p = *p;
    if (loom_model_file_open(p->model_path, &G.file) != LOOM_OK) {
        cli_name_last_error(p->model_path, "cannot read the model");
        fprintf(stderr, "loom serve: %s\n", cli_last_error("cannot read the model"));
        return false;
    }
    const int32_t n_train = loom_model_file_hparams(G.file)->n_ctx_train;
    const int32_t n_total = p->n_ctx > 0 ? p->n_ctx : (n_train > 4096 ? 4096 : n_train);
    G.n_slots = p->n_parallel > 0 ? p->n_parallel : 1;
    G.n_ctx = n_total / G.n_slots; /* the field's split: each slot gets its share */
    if (G.n_ctx < 2) {
        fprintf(stderr, "loom serve: -c %d over -np %d slots leaves %d token%s per slot (2 at least)\n", n_total, G.n_slots, G.n_ctx,
                cli_plural(G.n_ctx));
        loom_model_file_free(G.file);
        G.file = NULL;
        return false;
    }
    cli_warn_ctx_train_as("serve", G.n_ctx, n_train);
    if (!load()) {
        fprintf(stderr, "loom serve: %s\n", cli_last_error("cannot load the model"));
        return false;
    }
    fprintf(stderr, "loom serve: model loaded (%s, %d slot%s of %d token%s)\n", loom_model_desc(G.model), G.n_slots,
            cli_plural(G.n_slots), G.n_ctx, cli_plural(G.n_ctx));
    return true;
}

static void * worker(void * arg) {
    (void)arg;
    atomic_store(&G.ready, 1);
    for (;;) {
        assign_jobs();
        if (step()) continue;
        pthread_mutex_lock(&G.mu); /* every slot idle: wait for a job */
        while (!G.head && !atomic_load(&G.stopping)) pthread_cond_wait(&G.cv, &G.mu);
        const bool stop = atomic_load(&G.stopping);
        pthread_mutex_unlock(&G.mu);
        if (stop) break;
    }
    /* the jobs still waiting end cancelled (step() ended the running ones) */
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

bool serve_gen_start(void) {
    G.started = pthread_create(&G.thread, NULL, worker, NULL) == 0;
    return G.started;
}

int serve_gen_ready(void) { return atomic_load(&G.ready); }
const struct loom_model * serve_gen_model(void) { return G.model; }
int32_t serve_gen_n_ctx(void) { return G.n_ctx; }

bool serve_gen_submit(struct serve_job * j) {
    pthread_mutex_lock(&G.mu);
    const bool busy = G.stats.processing + G.stats.deferred >= G.n_slots;
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

/* True when the peer of socket 'fd' has closed it or reset it (a read would find the end of the
 * stream); data it sent that nobody read yet counts as alive. */
static bool client_gone(int fd) {
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool serve_gen_wait_client(struct serve_job * j, int fd) {
    pthread_mutex_lock(&j->mu);
    while (j->finish == SERVE_RUNNING) {
        if (fd < 0) {
            pthread_cond_wait(&j->cv, &j->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SERVE_CLIENT_POLL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->finish == SERVE_RUNNING && client_gone(fd)) {
            j->cancel = true; /* the worker ends it at its next step, or when a slot takes it */
            pthread_mutex_unlock(&j->mu);
            return false;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

int serve_gen_slots_busy(bool * busy, int max) {
    pthread_mutex_lock(&G.mu);
    for (int i = 0; i < G.n_slots && i < max; i++) busy[i] = G.slot_busy && G.slot_busy[i];
    pthread_mutex_unlock(&G.mu);
    return G.n_slots;
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

bool serve_gen_stopping(void) { return atomic_load(&G.stopping); }

void serve_gen_free(void) {
    for (int i = 0; G.slots && i < G.n_slots; i++) {
        loom_detok_free(G.slots[i].detok);
        loom_sampler_free(G.slots[i].smp);
        free(G.slots[i].cached);
        free(G.slots[i].logits);
    }
    free(G.slots);
    free(G.slot_busy);
    G.slot_busy = NULL;
    free(G.b_tok);
    free(G.b_logits);
    loom_llama_context_free(G.lctx);
    loom_model_free(G.model);
    loom_model_file_free(G.file);
    G.file = NULL;
    G.slots = NULL, G.b_tok = NULL, G.b_logits = NULL;
    G.lctx = NULL, G.model = NULL;
}
