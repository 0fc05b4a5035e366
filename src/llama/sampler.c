/* sampler.c -- next-token sampling: repetition penalty, temperature, top-k, top-p, min-p, seeded draw.
 *
 * Sources: the repetition penalty of Keskar et al. 2019 ("CTRL", section 4.1) as llama.cpp applies
 * it (divide a positive logit, multiply a negative one); top-k of Fan et al. 2018; nucleus (top-p)
 * sampling of Holtzman et al. 2019; min-p of Nguyen et al. 2024. The PRNG is xoshiro256**
 * (Blackman & Vigna 2018) seeded through splitmix64 (Steele et al. 2014), so every seed, 0
 * included, gives a well-mixed state. */
#include "loom-sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HISTORY_MAX (1 << 20) /* tokens */

struct cand {
    float v;     /* (logit - max) / temp: 0 for the most likely token, <= 0 for the rest */
    int32_t id;
    double e;    /* exp(v): unnormalized probability, set after top-k */
};

struct loom_sampler {
    struct loom_sampler_params p;
    uint64_t seed;         /* the seed in use */
    uint64_t rng[4];       /* xoshiro256** state */
    int32_t * hist;        /* ring of the last repeat_last_n accepted tokens */
    int hist_n, hist_pos;
    int32_t * uniq;        /* scratch: sorted distinct history [repeat_last_n] */
    float * work;          /* scratch: logits after NaN removal and penalty [n_vocab] */
    struct cand * cand;    /* scratch [n_vocab] */
    size_t cap;            /* entries of 'work' and 'cand' */
};

/* ---------------------------------------------------------------- PRNG */

static uint64_t splitmix64(uint64_t * x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t * s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static double rng_uniform(uint64_t * s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; } /* [0, 1) */

static void rng_seed(struct loom_sampler * s) {
    uint64_t x = s->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x); /* never all zero */
}

static uint64_t clock_seed(void) {
    static uint64_t counter; /* two samplers made in the same microsecond still differ */
    uint64_t x = (uint64_t)loom_time_us() ^ ((uint64_t)time(NULL) << 32) ^ (++counter * 0xD1B54A32D192ED03ull);
    uint64_t seed = splitmix64(&x);
    return seed == LOOM_DEFAULT_SEED ? seed - 1 : seed;
}

/* ---------------------------------------------------------------- life cycle */

struct loom_sampler_params loom_sampler_default_params(void) {
    struct loom_sampler_params p = {
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = LOOM_DEFAULT_SEED,
    };
    return p;
}

enum loom_status loom_sampler_new(const struct loom_sampler_params * p, struct loom_sampler ** out) {
    if (out) *out = NULL;
    if (!p || !out) {
        loom_log(LOOM_LOG_ERROR, "sampler: NULL argument");
        return LOOM_ERR_INVALID_ARG;
    }
    if (isnan(p->temp) || isnan(p->top_p) || isnan(p->min_p)) {
        loom_log(LOOM_LOG_ERROR, "sampler: temp, top_p and min_p must not be NaN");
        return LOOM_ERR_INVALID_ARG;
    }
    if (!(p->repeat_penalty > 0) || isinf(p->repeat_penalty)) {
        loom_log(LOOM_LOG_ERROR, "sampler: repeat_penalty %g must be positive and finite", (double)p->repeat_penalty);
        return LOOM_ERR_INVALID_ARG;
    }
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty)) {
        loom_log(LOOM_LOG_ERROR, "sampler: presence_penalty %g and frequency_penalty %g must be finite", (double)p->presence_penalty,
                 (double)p->frequency_penalty);
        return LOOM_ERR_INVALID_ARG;
    }
    if (p->repeat_last_n < 0 || p->repeat_last_n > HISTORY_MAX) {
        loom_log(LOOM_LOG_ERROR, "sampler: repeat_last_n %d is outside [0, %d]", p->repeat_last_n, HISTORY_MAX);
        return LOOM_ERR_INVALID_ARG;
    }
    struct loom_sampler * s = calloc(1, sizeof *s);
    if (s && p->repeat_last_n > 0) {
        s->hist = malloc((size_t)p->repeat_last_n * sizeof *s->hist);
        s->uniq = malloc((size_t)p->repeat_last_n * sizeof *s->uniq);
    }
    if (!s || (p->repeat_last_n > 0 && (!s->hist || !s->uniq))) {
        loom_log(LOOM_LOG_ERROR, "sampler: out of memory");
        loom_sampler_free(s);
        return LOOM_ERR_OOM;
    }
    s->p = *p;
    s->seed = p->seed == LOOM_DEFAULT_SEED ? clock_seed() : p->seed;
    rng_seed(s);
    *out = s;
    return LOOM_OK;
}

void loom_sampler_free(struct loom_sampler * s) {
    if (!s) return;
    free(s->hist);
    free(s->uniq);
    free(s->work);
    free(s->cand);
    free(s);
}

void loom_sampler_reset(struct loom_sampler * s) {
    if (!s) return;
    s->hist_n = s->hist_pos = 0;
    rng_seed(s);
}

uint64_t loom_sampler_get_seed(const struct loom_sampler * s) { return s ? s->seed : 0; }

void loom_sampler_accept(struct loom_sampler * s, int32_t token) {
    if (!s || token < 0 || s->p.repeat_last_n == 0) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->hist_n < s->p.repeat_last_n) s->hist_n++;
}

/* ---------------------------------------------------------------- steps */

static int cmp_i32(const void * a, const void * b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Penalties on the tokens among the last repeat_last_n accepted, once per distinct token: the
 * CTRL penalty, then the frequency penalty times its count and the presence penalty (OpenAI's
 * API definitions), in the field's order. */
static void apply_penalty(struct loom_sampler * s, float * w, int n_vocab) {
    const float pen = s->p.repeat_penalty, freq = s->p.frequency_penalty, present = s->p.presence_penalty;
    if ((pen == 1.0f && freq == 0.0f && present == 0.0f) || s->hist_n == 0) return;
    memcpy(s->uniq, s->hist, (size_t)s->hist_n * sizeof *s->uniq);
    qsort(s->uniq, (size_t)s->hist_n, sizeof *s->uniq, cmp_i32);
    for (int i = 0; i < s->hist_n;) {
        const int32_t id = s->uniq[i];
        int count = 0;
        for (; i < s->hist_n && s->uniq[i] == id; i++) count++;
        if (id >= n_vocab) continue;
        if (pen != 1.0f) w[id] = w[id] > 0 ? w[id] / pen : w[id] * pen;
        w[id] -= (float)count * freq + present;
    }
}

/* The total order used everywhere: more likely first, then the lower id. */
static bool cand_before(const struct cand * a, const struct cand * b) {
    return a->v > b->v || (a->v == b->v && a->id < b->id);
}

static int cand_cmp(const void * pa, const void * pb) {
    const struct cand * a = pa, * b = pb;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

/* Min-heap on cand_before (the worst kept candidate at the root). */
static void sift_worst(struct cand * c, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, w = i;
        if (l < n && cand_before(&c[w], &c[l])) w = l;
        if (l + 1 < n && cand_before(&c[w], &c[l + 1])) w = l + 1;
        if (w == i) return;
        struct cand t = c[i];
        c[i] = c[w];
        c[w] = t;
        i = w;
    }
}

/* Moves the k best candidates (by cand_before) to c[0..k), in no particular order. O(n log k). */
static void select_top_k(struct cand * c, size_t n, size_t k) {
    for (size_t i = k / 2; i-- > 0;) sift_worst(c, k, i);
    for (size_t i = k; i < n; i++) {
        if (!cand_before(&c[i], &c[0])) continue;
        c[0] = c[i];
        sift_worst(c, k, 0);
    }
}

/* Index of the largest entry (the first on ties), or -1 when all are -inf. */
static int argmax(const float * w, int n) {
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (w[i] > -INFINITY && (best < 0 || w[i] > w[best])) best = i;
    }
    return best;
}

/* Builds the candidates (temperature applied, max subtracted); returns how many. */
static size_t gather(struct loom_sampler * s, const float * w, int n_vocab, float max) {
    size_t n = 0;
    if (isinf(max)) { /* +inf logits win outright, equally */
        for (int i = 0; i < n_vocab; i++) {
            if (w[i] == INFINITY) s->cand[n++] = (struct cand){0.0f, i, 1.0};
        }
        return n;
    }
    for (int i = 0; i < n_vocab; i++) {
        if (!(w[i] > -INFINITY)) continue;
        float v = (w[i] - max) / s->p.temp; /* subtract first: l / temp alone may overflow */
        if (v > -INFINITY) s->cand[n++] = (struct cand){v, i, 0.0};
    }
    return n;
}

/* Keeps the smallest most-likely prefix whose probability (e / z) reaches 'top_p'; returns its
 * length (at least 1; all n when rounding keeps the sum below top_p). Min-p keeps a prefix of the
 * same order, so filtering it first and cutting the nucleus from what is left gives the same set
 * as top-p then min-p. The nucleus is usually short: sort the best m for growing m rather than
 * all n. */
static size_t nucleus(struct cand * c, size_t n, double z, double top_p) {
    for (size_t m = n < 64 ? n : 64;; m = n / 4 < m ? n : 4 * m) {
        if (m < n) select_top_k(c, n, m);
        qsort(c, m, sizeof *c, cand_cmp);
        double cum = 0;
        for (size_t i = 0; i < m; i++) {
            cum += c[i].e / z;
            if (cum >= top_p) return i + 1;
        }
        if (m == n) return n;
    }
}

/* Top-k, then top-p and min-p (each keeping at least the best); returns how many remain in the
 * front of s->cand. */
static size_t truncate_cands(struct loom_sampler * s, size_t n) {
    struct cand * c = s->cand;
    if (s->p.top_k > 0 && (size_t)s->p.top_k < n) {
        select_top_k(c, n, (size_t)s->p.top_k);
        n = (size_t)s->p.top_k;
    }
    double z = 0; /* normalizer of the top-k set: top-p works on these probabilities */
    for (size_t i = 0; i < n; i++) {
        c[i].e = exp((double)c[i].v);
        z += c[i].e;
    }
    if (s->p.min_p > 0) {
        /* p_i >= min_p * p_max  <=>  exp(v_i) >= min_p, since v_max = 0 */
        double floor_p = s->p.min_p < 1 ? (double)s->p.min_p : 1.0;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (c[i].e >= floor_p) c[k++] = c[i];
        }
        n = k; /* the best has exp(0) = 1 >= floor_p */
    }
    if (s->p.top_p < 1) n = nucleus(c, n, z, (double)s->p.top_p);
    return n;
}

enum loom_status loom_sampler_sample(struct loom_sampler * s, const float * logits, int n_vocab, int32_t * token) {
    if (!s || !logits || !token || n_vocab <= 0) {
        loom_log(LOOM_LOG_ERROR, "sampler: invalid arguments (n_vocab %d)", n_vocab);
        return LOOM_ERR_INVALID_ARG;
    }
    if (s->cap < (size_t)n_vocab) {
        float * w = realloc(s->work, (size_t)n_vocab * sizeof *w);
        if (w) s->work = w;
        struct cand * c = realloc(s->cand, (size_t)n_vocab * sizeof *c);
        if (c) s->cand = c;
        if (!w || !c) {
            loom_log(LOOM_LOG_ERROR, "sampler: out of memory for %d logits", n_vocab);
            return LOOM_ERR_OOM;
        }
        s->cap = (size_t)n_vocab;
    }
    float * w = s->work;
    for (int i = 0; i < n_vocab; i++) w[i] = isnan(logits[i]) ? -INFINITY : logits[i];
    apply_penalty(s, w, n_vocab);

    int best = argmax(w, n_vocab);
    if (best < 0) {
        loom_log(LOOM_LOG_ERROR, "sampler: all %d logits are -inf or NaN; nothing to sample (NaN or infinite weights? "
                 "--check-tensors finds them)",
                 n_vocab);
        return LOOM_ERR_INVALID_ARG;
    }
    if (!(s->p.temp > 0)) {
        *token = best;
        return LOOM_OK;
    }
    size_t n = gather(s, w, n_vocab, w[best]);
    n = truncate_cands(s, n);

    double total = 0;
    for (size_t i = 0; i < n; i++) total += s->cand[i].e;
    double u = rng_uniform(s->rng) * total, acc = 0;
    int32_t pick = s->cand[n - 1].id;
    for (size_t i = 0; i < n; i++) {
        acc += s->cand[i].e;
        if (u < acc) {
            pick = s->cand[i].id;
            break;
        }
    }
    *token = pick;
    return LOOM_OK;
}
