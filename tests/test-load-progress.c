/* test-load-progress.c -- the load progress callback: fractions rising to 1, and a false return
 * cancelling the load cleanly (LOOM_ERR_CANCELLED, no model, nothing leaked). */
#include "loom-llama.h"
#include "test-util.h"

#include <unistd.h>

struct progress_log {
    int calls;
    int cancel_at;    /* return false on this call (1-based); 0: never */
    float last;
    bool monotone, in_range;
};

static bool on_progress(float p, void * user) {
    struct progress_log * l = user;
    l->calls++;
    l->monotone = l->monotone && p >= l->last;
    l->in_range = l->in_range && p >= 0.0f && p <= 1.0f;
    l->last = p;
    return l->calls != l->cancel_at;
}

int main(void) {
    loom_log_set(test_capture_log, NULL);
    const char * path = test_model_path("quant/stories260K-F32.gguf");
    if (access(path, R_OK) != 0) return test_skip("no quant/stories260K-F32.gguf in the shared models");
    for (int mmap = 0; mmap < 2; mmap++) {
        const char * how = mmap ? "mapped" : "read";
        struct progress_log l = {.monotone = true, .in_range = true};
        struct loom_model_params mp = loom_model_default_params();
        mp.use_mmap = mmap == 1;
        mp.progress = on_progress;
        mp.progress_user_data = &l;
        struct loom_model * model = NULL;
        CHECK(loom_model_load(path, mp, &model) == LOOM_OK && model, "%s: load: %s", how, test_last_error);
        CHECK(l.calls >= 1 && l.monotone && l.in_range && l.last == 1.0f, "%s: %d calls, last %g, monotone %d, in [0, 1] %d", how,
              l.calls, (double)l.last, l.monotone, l.in_range);
        loom_model_free(model);
        const int calls = l.calls;
        /* cancelled at the first call, and (when there are several) at the last */
        for (int at = 1; at <= calls; at += calls > 1 ? calls - 1 : 1) {
            struct progress_log c = {.monotone = true, .in_range = true, .cancel_at = at};
            mp.progress_user_data = &c;
            model = (struct loom_model *)&c; /* must come back NULL */
            const enum loom_status st = loom_model_load(path, mp, &model);
            CHECK(st == LOOM_ERR_CANCELLED && model == NULL && c.calls == at, "%s: cancelled at call %d of %d: %s, %d calls", how, at,
                  calls, loom_status_str(st), c.calls);
            loom_model_free(model);
        }
        printf("%s: %d progress calls\n", how, calls);
    }
    return test_finish("test-load-progress");
}
