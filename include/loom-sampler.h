/* loom-sampler.h -- the sampler: penalties, temperature, top-k / top-p / min-p, a seeded draw. */
#ifndef LOOM_SAMPLER_H
#define LOOM_SAMPLER_H

#include "loom.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Picks the next token from a row of logits: repetition penalty (Keskar et al. 2019, "CTRL"),
 * presence and frequency penalties (as OpenAI's API defines them),
 * then temperature, top-k (Fan et al. 2018), top-p / nucleus (Holtzman et al. 2019, "The Curious
 * Case of Neural Text Degeneration"), min-p (Nguyen et al. 2024), then a draw from the softmax of
 * what is left. Deterministic for a given seed. */

/* Seed value that means "pick one from the clock"; loom_sampler_get_seed reports the one picked. */
#define LOOM_DEFAULT_SEED UINT64_MAX

struct loom_sampler_params {
    float temp;            /* temperature; <= 0 means greedy (argmax, ties to the lowest id) */
    int top_k;             /* keep the k most likely tokens; <= 0 = off */
    float top_p;           /* keep the smallest most-likely prefix whose probability reaches p; >= 1 = off */
    float min_p;           /* drop tokens with probability < min_p * (top probability); <= 0 = off */
    float repeat_penalty;  /* > 0; 1 = off: logits of recent tokens are divided (if > 0) or multiplied (if < 0) */
    int repeat_last_n;     /* how many accepted tokens the penalties look back; 0 = off */
    float presence_penalty;   /* subtracted from the logit of each token among them; 0 = off */
    float frequency_penalty;  /* times the token's count among them, subtracted from its logit; 0 = off */
    uint64_t seed;         /* PRNG seed (0 is fine); LOOM_DEFAULT_SEED = from the clock */
};

struct loom_sampler;

/* llama.cpp's defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1 (off),
 * repeat_last_n 64, presence and frequency penalties 0 (off), seed LOOM_DEFAULT_SEED. */
LOOM_API struct loom_sampler_params loom_sampler_default_params(void);

/* Creates a sampler. Errors (logged, '*out' = NULL): LOOM_ERR_INVALID_ARG for NULL pointers, a NaN
 * temp/top_p/min_p, repeat_penalty not > 0 (or NaN/inf), a presence or frequency penalty NaN/inf,
 * repeat_last_n < 0 or > 1<<20;
 * LOOM_ERR_OOM. Out-of-range but meaningful values are clamped (top_p <= 0 and min_p >= 1 keep
 * only the most likely token(s)). */
LOOM_API enum loom_status loom_sampler_new(const struct loom_sampler_params * params, struct loom_sampler ** out);
LOOM_API void loom_sampler_free(struct loom_sampler * s);   /* NULL is a no-op */

/* Samples a token id in [0, n_vocab) from 'logits' [n_vocab] (not modified) into '*token'.
 * NaN logits count as -inf (never chosen). +inf logits win outright: when any is present, the
 * draw is uniform among them (greedy: the lowest such id). The candidate list never becomes
 * empty: top-k, top-p and min-p each keep at least the most likely token.
 * Errors (logged, '*token' untouched): LOOM_ERR_INVALID_ARG for NULL pointers, n_vocab <= 0, or
 * logits that are all -inf/NaN (nothing can be sampled); LOOM_ERR_OOM. */
LOOM_API enum loom_status loom_sampler_sample(struct loom_sampler * s, const float * logits, int n_vocab, int32_t * token);

/* Appends 'token' to the history the repetition penalty looks at (keep the last repeat_last_n).
 * Call it for prompt tokens and for each sampled token you keep. Negative ids are ignored. */
LOOM_API void loom_sampler_accept(struct loom_sampler * s, int32_t token);

/* Clears the history and restarts the PRNG from the seed in use. */
LOOM_API void loom_sampler_reset(struct loom_sampler * s);

/* The seed actually in use (the clock-derived one when LOOM_DEFAULT_SEED was asked for); creating
 * a sampler with it reproduces the same draws. */
LOOM_API uint64_t loom_sampler_get_seed(const struct loom_sampler * s);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_SAMPLER_H */
