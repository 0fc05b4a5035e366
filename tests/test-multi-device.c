/* test-multi-device.c -- one model over several simulated devices: the layer split (-sm layer, its
 * prompt pipelined in micro-batches) gives bit for bit the logits and greedy text of one device and
 * of the CPU; the row split (-sm row, tensor parallelism with the host all-reduce) gives them within
 * F32 rounding; batch offload (a prompt's CPU-layer products on the device) adds splits, counted
 * through the scheduler, and keeps the logits; the share arithmetic and the host all-reduce against
 * independent references. */
#include "llama/model-impl.h" /* loom_split_layers, loom_split_range */
#include "loom-sim.h"
#include "test-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_GEN = 48, N_PROMPT = 70 };

struct run {
    const char * device;          /* NULL: the CPU alone */
    enum loom_split_mode mode;
    float ts[4];
    int n_ubatch;
    int main_gpu;
    int n_batch;                  /* 0: the default (512) */
    int ngl;                      /* 0: every layer (99) */
};

struct result {
    float * prompt_logits;        /* [n_vocab] after the prompt */
    int32_t gen[N_GEN];
    int n_devices;
    enum loom_split_mode mode;
    int n_vocab;
    int prompt_splits;            /* the scheduler's splits of the prompt's graph */
};

/* A fixed prompt of N_PROMPT token ids (BOS first), then N_GEN greedy tokens. */
static bool run_model(const char * path, const struct run * r, struct result * out) {
    struct loom_model_params mp = loom_model_default_params();
    mp.device = r->device;
    mp.n_gpu_layers = r->device ? (r->ngl ? r->ngl : 99) : 0;
    mp.split_mode = r->mode;
    mp.main_gpu = r->main_gpu;
    for (int i = 0; i < 4; i++) mp.tensor_split[i] = r->ts[i];
    struct loom_model * model = NULL;
    if (loom_model_load(path, mp, &model) != LOOM_OK) {
        CHECK(false, "cannot load %s on %s: %s", path, r->device ? r->device : "CPU", test_last_error);
        return false;
    }
    out->n_devices = loom_model_n_devices(model);
    out->mode = loom_model_split_mode(model);
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    cp.n_ubatch = r->n_ubatch;
    if (r->n_batch) cp.n_batch = r->n_batch;
    struct loom_llama_context * lctx = NULL;
    bool ok = loom_llama_context_new(model, cp, &lctx) == LOOM_OK;
    CHECK(ok, "context on %s: %s", r->device ? r->device : "CPU", test_last_error);
    const int32_t n_vocab = out->n_vocab = loom_model_hparams(model)->n_vocab;
    int32_t prompt[N_PROMPT];
    prompt[0] = loom_vocab_bos(loom_model_vocab(model));
    for (int i = 1; i < N_PROMPT; i++) prompt[i] = 3 + (i * 37) % (n_vocab - 3);
    if (ok) {
        ok = loom_llama_decode(lctx, prompt, N_PROMPT) == LOOM_OK;
        CHECK(ok, "prompt on %s: %s", r->device ? r->device : "CPU", test_last_error);
        out->prompt_splits = ok ? loom_backend_sched_get_n_splits(loom_llama_get_sched(lctx)) : 0;
    }
    if (ok) {
        out->prompt_logits = malloc((size_t)n_vocab * sizeof(float));
        memcpy(out->prompt_logits, loom_llama_get_logits(lctx), (size_t)n_vocab * sizeof(float));
    }
    for (int i = 0; i < N_GEN && ok; i++) {
        const float * logits = loom_llama_get_logits(lctx);
        int32_t best = 0;
        for (int32_t v = 1; v < n_vocab; v++) best = logits[v] > logits[best] ? v : best;
        out->gen[i] = best;
        ok = loom_llama_decode(lctx, &best, 1) == LOOM_OK;
        CHECK(ok, "decode %d on %s: %s", i, r->device ? r->device : "CPU", test_last_error);
    }
    loom_llama_context_free(lctx);
    loom_model_free(model);
    return ok;
}

/* Normalized mean squared error of 'a' against the reference 'ref', in double precision. */
static double nmse(const float * a, const float * ref, int n) {
    double err = 0, pow2 = 0;
    for (int i = 0; i < n; i++) {
        err += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        pow2 += (double)ref[i] * ref[i];
    }
    return pow2 > 0 ? err / pow2 : err;
}

static void compare(const char * what, const struct result * ref, const struct result * got, bool exact) {
    if (!got->prompt_logits || !ref->prompt_logits) return;
    const double e = nmse(got->prompt_logits, ref->prompt_logits, ref->n_vocab);
    if (exact) CHECK(memcmp(got->prompt_logits, ref->prompt_logits, (size_t)ref->n_vocab * sizeof(float)) == 0, "%s: prompt logits differ (NMSE %.3g)", what, e);
    else CHECK(e < 1e-8, "%s: prompt logits NMSE %.3g", what, e);
    if (!exact) printf("%s: prompt logits NMSE %.3g against the CPU\n", what, e);
    int first = -1;
    for (int k = 0; k < N_GEN && first < 0; k++) first = got->gen[k] != ref->gen[k] ? k : -1;
    CHECK(first < 0, "%s: greedy token %d is %d, the reference's %d", what, first, first >= 0 ? got->gen[first] : 0,
          first >= 0 ? ref->gen[first] : 0);
}

/* The layer assignment and the range cut: contiguous, in device order, covering everything once,
 * each part within one unit (or one block) of its share. */
static void test_shares(void) {
    const float thirds[3] = {1.0f / 3, 1.0f / 3, 1.0f / 3}, skew[3] = {0.5f, 0.25f, 0.25f};
    int dev[80];
    loom_split_layers(80, 80, 3, skew, dev);
    int count[3] = {0};
    for (int il = 0; il < 80; il++) {
        count[dev[il]]++;
        CHECK(il == 0 || dev[il] >= dev[il - 1], "layer %d on device %d after %d", il, dev[il], dev[il - 1]);
    }
    CHECK(count[0] == 40 && count[1] == 20 && count[2] == 20, "80 layers at 1/2,1/4,1/4: %d %d %d", count[0], count[1], count[2]);
    loom_split_layers(5, 3, 3, thirds, dev);
    CHECK(dev[0] == -1 && dev[1] == -1 && dev[2] == 0 && dev[3] == 1 && dev[4] == 2, "3 of 5 layers over 3: %d %d %d %d %d", dev[0],
          dev[1], dev[2], dev[3], dev[4]);
    int64_t first[3], n[3];
    loom_split_range(28672, 256, 3, thirds, first, n);
    int64_t at = 0;
    for (int d = 0; d < 3; d++) {
        CHECK(first[d] == at && n[d] % 256 == 0 && llabs(n[d] - 28672 / 3) <= 256, "range %d: [%lld, +%lld)", d, (long long)first[d],
              (long long)n[d]);
        at += n[d];
    }
    CHECK(at == 28672, "the ranges cover %lld of 28672", (long long)at);
}

/* The host all-reduce: three sim devices, each rank's partial uploaded, the sums checked against a
 * double-precision sum on every rank, in place and not. */
static void test_host_all_reduce(loom_backend_dev_t * devs) {
    loom_backend_t be[3];
    for (int r = 0; r < 3; r++) be[r] = loom_backend_dev_init(devs[r], NULL);
    loom_backend_comm_t comm = loom_backend_comm_new(be, 3);
    CHECK(comm && !strcmp(loom_backend_comm_name(comm), "host"), "a host communicator over sim devices");
    CHECK(loom_backend_comm_new(be, 1) == NULL, "one rank is refused");
    enum { N = 1000 };
    struct loom_init_params ip = {.mem_size = 8 * loom_tensor_overhead(), .no_alloc = true};
    struct loom_context * c[3];
    struct loom_tensor * src[3], * dst[3];
    loom_backend_buffer_t buf[3];
    static float part[3][N], got[N];
    uint64_t seed = 7;
    for (int r = 0; r < 3; r++) {
        c[r] = loom_init(ip);
        src[r] = loom_new_tensor_1d(c[r], LOOM_TYPE_F32, N);
        dst[r] = loom_new_tensor_1d(c[r], LOOM_TYPE_F32, N);
        buf[r] = loom_backend_alloc_ctx_tensors(c[r], be[r], NULL);
        for (int i = 0; i < N; i++) part[r][i] = (float)(test_rand_uniform(&seed) - 0.5) * 4;
        CHECK(loom_backend_tensor_set(src[r], part[r], 0, sizeof part[r]) == LOOM_OK, "upload rank %d", r);
    }
    for (int pass = 0; pass < 2 && comm; pass++) { /* out of place, then in place */
        struct loom_tensor * const * out = pass ? src : dst;
        CHECK(loom_backend_comm_all_reduce(comm, src, out) == LOOM_OK, "all-reduce pass %d: %s", pass, test_last_error);
        for (int r = 0; r < 3; r++) {
            CHECK(loom_backend_tensor_get(out[r], got, 0, sizeof got) == LOOM_OK, "download rank %d", r);
            int bad = 0;
            for (int i = 0; i < N; i++) {
                const double want = (double)part[0][i] + part[1][i] + part[2][i];
                bad += fabs(got[i] - want) > 1e-5 * (1 + fabs(want));
            }
            CHECK(bad == 0, "pass %d rank %d: %d sums off", pass, r, bad);
        }
    }
    for (int r = 0; r < 3; r++) {
        loom_backend_buffer_free(buf[r]);
        loom_free(c[r]);
    }
    loom_backend_comm_free(comm);
    for (int r = 0; r < 3; r++) loom_backend_free(be[r]);
}

int main(void) {
    test_shares();
    const char * path = test_model_path("stories260K-llamacpp.gguf");
    FILE * f = fopen(path, "rb");
    loom_log_set(test_capture_log, NULL);
    /* sim0..2 as the command line's LOOM_SIM_DEVICES=3 makes them; sima0..2 async with events
     * (their copies and events complete at once, but the scheduler's event paths run) */
    loom_backend_dev_t sims[6];
    struct loom_sim_params sp = loom_sim_default_params();
    const char * names[6] = {"sim0", "sim1", "sim2", "sima0", "sima1", "sima2"};
    for (int i = 0; i < 6; i++) {
        sp.async = sp.events = i >= 3;
        sims[i] = loom_sim_device_new(names[i], &sp);
        CHECK(sims[i] && loom_backend_register_device(sims[i]) == LOOM_OK, "register %s", names[i]);
    }
    test_host_all_reduce(sims);
    if (!f) {
        loom_log_set(NULL, NULL);
        return test_skip("stories260K-llamacpp.gguf not found in $LOOM_MODELS");
    }
    fclose(f);

    struct result ref = {0}, one = {0};
    const struct run r_cpu = {NULL, LOOM_SPLIT_MODE_LAYER, {0}, 0, 0, 0, 0};
    const struct run r_one = {"sim0", LOOM_SPLIT_MODE_LAYER, {0}, 0, 0, 0, 0};
    if (run_model(path, &r_cpu, &ref) && run_model(path, &r_one, &one)) {
        compare("one sim device", &ref, &one, true);
        /* batch offload (LOOM_SCHED_OFFLOAD_BATCH, default 32 columns): with 2 of 5 layers on sim0,
         * the 70-token prompt's products of the CPU layers run on sim0 too (their weights copied
         * over), in more splits than without it; the same logits either way */
        const struct run r_part = {"sim0", LOOM_SPLIT_MODE_LAYER, {0}, 512, 0, 0, 2};
        struct result off = {0}, on = {0};
        setenv("LOOM_SCHED_OFFLOAD_BATCH", "0", 1);
        const bool ran_off = run_model(path, &r_part, &off);
        unsetenv("LOOM_SCHED_OFFLOAD_BATCH");
        if (ran_off && run_model(path, &r_part, &on)) {
            compare("-ngl 2 without batch offload", &ref, &off, true);
            compare("-ngl 2 with batch offload", &ref, &on, true);
            printf("batch offload: %d splits with, %d without\n", on.prompt_splits, off.prompt_splits);
            CHECK(on.prompt_splits > off.prompt_splits && off.prompt_splits >= 2, "batch offload: %d splits with, %d without",
                  on.prompt_splits, off.prompt_splits);
        }
        free(off.prompt_logits);
        free(on.prompt_logits);
        /* a device with async copies gets each one-token step's inputs (positions, cells, mask)
         * through its async slot, queued ahead of the step's compute; the same logits */
        const struct run r_async = {"sima0", LOOM_SPLIT_MODE_LAYER, {0}, 0, 0, 0, 0};
        struct result as = {0};
        loom_sim_reset_stats(sims[3]);
        if (run_model(path, &r_async, &as)) {
            compare("one async sim device", &ref, &as, true);
            struct loom_sim_stats st;
            loom_sim_get_stats(sims[3], &st);
            printf("async sim device: %llu async copies for a prompt and %d one-token steps\n", (unsigned long long)st.n_async, N_GEN);
            CHECK(st.n_async >= 4 * (uint64_t)N_GEN, "the inputs of %d steps queued through the async slot: %llu async copies", N_GEN,
                  (unsigned long long)st.n_async);
        }
        free(as.prompt_logits);
        /* with micro-batches of 'ub' tokens, the pipelined prompt equals one device decoding it in
         * batches of 'ub' bit for bit (each micro-batch computes what that batch would), and the
         * whole-batch run within F32 rounding */
        const struct run runs[] = {
            {"sim0,sim1,sim2", LOOM_SPLIT_MODE_LAYER, {0}, 0, 0, 0, 0},          /* micro-batches auto: 32 */
            {"sim0,sim1,sim2", LOOM_SPLIT_MODE_LAYER, {0}, 7, 0, 0, 0},          /* micro-batches of 7 (the last one short) */
            {"sim0,sim1,sim2", LOOM_SPLIT_MODE_LAYER, {0}, 512, 0, 0, 0},        /* one batch: no pipelining */
            {"sima0,sima1,sima2", LOOM_SPLIT_MODE_LAYER, {1, 3, 1, 0}, 16, 0, 0, 0},
            {"sim0,sim1", LOOM_SPLIT_MODE_LAYER, {4, 1, 0, 0}, 0, 0, 0, 0},
            {"sim0,sim1,sim2", LOOM_SPLIT_MODE_LAYER, {0}, 8, 0, 0, 3},       /* a CPU stage first, then 3 devices */
            {"sim0,sim1,sim2", LOOM_SPLIT_MODE_NONE, {0}, 0, 2, 0, 0},           /* the main device alone */
        };
        const int ub_of[] = {32, 7, 0, 16, 32, 8, 0};
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            struct result got = {0}, chunked = {0};
            char what[128];
            snprintf(what, sizeof what, "-dev %s -sm %s -ts %g,%g,%g -ub %d", runs[i].device, loom_split_mode_name(runs[i].mode),
                     (double)runs[i].ts[0], (double)runs[i].ts[1], (double)runs[i].ts[2], runs[i].n_ubatch);
            const struct run r_chunked = {"sim0", LOOM_SPLIT_MODE_LAYER, {0}, 0, 0, ub_of[i], 0};
            if (run_model(path, &runs[i], &got) && (!ub_of[i] || run_model(path, &r_chunked, &chunked))) {
                compare(what, ub_of[i] ? &chunked : &ref, &got, true);
                if (ub_of[i]) compare(what, &ref, &got, false);
                const int want = runs[i].mode == LOOM_SPLIT_MODE_NONE ? 1 : (int)(strlen(runs[i].device) + 1) / 5;
                CHECK(got.n_devices == want, "%s: %d devices, expected %d", what, got.n_devices, want);
            }
            free(got.prompt_logits);
            free(chunked.prompt_logits);
        }
        /* the row split: partial sums added in another order, so equal within F32 rounding */
        const struct run rows[] = {
            {"sim0,sim1", LOOM_SPLIT_MODE_ROW, {0}, 0, 0, 0, 0},
            {"sim0,sim1,sim2", LOOM_SPLIT_MODE_ROW, {0}, 0, 0, 0, 0},
            {"sima0,sima1,sima2", LOOM_SPLIT_MODE_ROW, {1, 2, 1, 0}, 0, 2, 0, 0}, /* uneven heads, the output on the third */
            {"sim0,sim1,sim2", LOOM_SPLIT_MODE_ROW, {0}, 0, 0, 0, 3},              /* two layers on the CPU first */
        };
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            struct result got = {0};
            char what[128];
            snprintf(what, sizeof what, "-dev %s -sm row -ts %g,%g,%g -mg %d", rows[i].device, (double)rows[i].ts[0], (double)rows[i].ts[1],
                     (double)rows[i].ts[2], rows[i].main_gpu);
            if (run_model(path, &rows[i], &got)) {
                compare(what, &ref, &got, false);
                CHECK(got.mode == LOOM_SPLIT_MODE_ROW, "%s: split mode %s", what, loom_split_mode_name(got.mode));
            }
            free(got.prompt_logits);
        }
    }
    /* quantized weights: a row split cuts them only at block boundaries */
    const char * q8 = test_model_path("quant/stories260K-Q8_0.gguf");
    f = fopen(q8, "rb");
    if (f) {
        fclose(f);
        struct result qref = {0}, qrow = {0};
        const struct run q_cpu = {NULL, LOOM_SPLIT_MODE_LAYER, {0}, 0, 0, 0, 0};
        const struct run q_row2 = {"sim0,sim1", LOOM_SPLIT_MODE_ROW, {0}, 0, 0, 0, 0};
        if (run_model(q8, &q_cpu, &qref) && run_model(q8, &q_row2, &qrow)) compare("Q8_0 -sm row over 2", &qref, &qrow, false);
        /* 3 devices would cut attn_output (64 columns of 8-wide heads) inside a 32-block */
        struct loom_model_params mp = loom_model_default_params();
        mp.device = "sim0,sim1,sim2";
        mp.n_gpu_layers = 99;
        mp.split_mode = LOOM_SPLIT_MODE_ROW;
        struct loom_model * model = NULL;
        CHECK(loom_model_load(q8, mp, &model) == LOOM_ERR_UNSUPPORTED && !model && strstr(test_last_error, "inside a block of 32"),
              "Q8_0 -sm row over 3: %s", test_last_error);
        free(qref.prompt_logits);
        free(qrow.prompt_logits);
    }
    free(ref.prompt_logits);
    free(one.prompt_logits);
    for (int i = 5; i >= 0; i--) {
        loom_backend_unregister_device(sims[i]);
        loom_sim_device_free(sims[i]);
    }
    loom_log_set(NULL, NULL);
    return test_finish("test-multi-device");
}
