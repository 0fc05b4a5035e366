/* cuda-logit-gap.c -- where greedy text on an offload device parts from the CPU's, and by how much.
 * The model is loaded twice, all on the CPU and with -ngl N on the devices; both decode the prompt,
 * then the CPU's greedy token is fed to both at every step (so the two see the same history and
 * each step's logits can be compared). Printed: per step where the two argmaxes differ, the two
 * tokens and each side's margin between them (a near-tie is a margin near zero), and at the end
 * the largest |logit difference| over all steps and the first differing step.
 * Usage: bench-cuda-logit-gap MODEL [-ngl N (99)] [-n STEPS (64)] [-p PROMPT ("Once upon a time")]
 * Exit: 0 when it ran (whether or not the texts part), 1 on a load or decode error. */
#include "loom-llama.h"
#include "loom-vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum loom_log_level level, const char * text, void * ud) {
    (void)ud;
    size_t n = strlen(text);
    if (level >= LOOM_LOG_ERROR) fprintf(stderr, "%s%s", text, n && text[n - 1] == '\n' ? "" : "\n");
}

struct side {
    struct loom_model * model;
    struct loom_llama_context * ctx;
};

static int side_open(const char * path, int ngl, struct side * s) {
    struct loom_model_params mp = loom_model_default_params();
    mp.n_gpu_layers = ngl;
    enum loom_status st = loom_model_load(path, mp, &s->model);
    if (st != LOOM_OK) {
        fprintf(stderr, "loading %s with -ngl %d: %s\n", path, ngl, loom_status_str(st));
        return 1;
    }
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = 512;
    st = loom_llama_context_new(s->model, cp, &s->ctx);
    if (st != LOOM_OK) {
        fprintf(stderr, "context with -ngl %d: %s\n", ngl, loom_status_str(st));
        return 1;
    }
    return 0;
}

static int32_t argmax(const float * x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int main(int argc, char ** argv) {
    const char * path = NULL, * prompt = "Once upon a time";
    int ngl = 99, steps = 64;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-ngl") && i + 1 < argc) ngl = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-p") && i + 1 < argc) prompt = argv[++i];
        else if (!path && argv[i][0] != '-') path = argv[i];
        else {
            fprintf(stderr, "usage: %s MODEL [-ngl N] [-n STEPS] [-p PROMPT]\n", argv[0]);
            return 1;
        }
    }
    if (!path || steps < 1 || steps > 400) {
        fprintf(stderr, "usage: %s MODEL [-ngl N] [-n STEPS (1-400)] [-p PROMPT]\n", argv[0]);
        return 1;
    }
    loom_log_set(quiet, NULL);
    struct side cpu = {0}, dev = {0};
    if (side_open(path, 0, &cpu) || side_open(path, ngl, &dev)) return 1;
    const struct loom_vocab * vocab = loom_model_vocab(cpu.model);
    const int32_t n_vocab = loom_model_hparams(cpu.model)->n_vocab;
    int32_t toks[256];
    int32_t n = loom_tokenize(vocab, prompt, strlen(prompt), loom_vocab_get_add_bos(vocab), false, toks, 256);
    if (n <= 0) {
        fprintf(stderr, "the prompt does not tokenize into 1-256 tokens\n");
        return 1;
    }
    if (loom_llama_decode(cpu.ctx, toks, n) != LOOM_OK || loom_llama_decode(dev.ctx, toks, n) != LOOM_OK) {
        fprintf(stderr, "decoding the prompt failed\n");
        return 1;
    }
    double max_diff = 0.0;
    int first = -1, n_diff = 0;
    for (int step = 0; step < steps; step++) {
        const float * a = loom_llama_get_logits(cpu.ctx), * b = loom_llama_get_logits(dev.ctx);
        for (int32_t i = 0; i < n_vocab; i++) max_diff = fmax(max_diff, fabs((double)a[i] - b[i]));
        const int32_t ta = argmax(a, n_vocab), tb = argmax(b, n_vocab);
        if (ta != tb) {
            if (first < 0) first = step;
            n_diff++;
            printf("step %d: CPU token %d, device token %d; CPU margin %.6f, device margin %.6f\n", step, ta, tb,
                   (double)a[ta] - a[tb], (double)b[tb] - b[ta]);
        }
        if (loom_llama_decode(cpu.ctx, &ta, 1) != LOOM_OK || loom_llama_decode(dev.ctx, &ta, 1) != LOOM_OK) {
            fprintf(stderr, "decoding step %d failed\n", step);
            return 1;
        }
    }
    printf("%s -ngl %d: %d steps, %d with a different argmax (first: %d), max |logit difference| %.6f\n", path, ngl,
           steps, n_diff, first, max_diff);
    loom_llama_context_free(cpu.ctx);
    loom_llama_context_free(dev.ctx);
    loom_model_free(cpu.model);
    loom_model_free(dev.model);
    return 0;
}
