/* test-sampler.c -- the sampler's distributions against exact probabilities, truncations, penalty, edge cases. */
#include "loom-sampler.h"
#include "test-util.h"

#include <math.h>
#include <string.h>

#define DRAWS 20000

static int g_errors;

static void log_capture(enum loom_log_level level, const char * text, void * user) {
    (void)user;
    (void)text;
    g_errors += level == LOOM_LOG_ERROR;
}

static struct loom_sampler_params plain(float temp, uint64_t seed) {
    struct loom_sampler_params p = loom_sampler_default_params();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

static struct loom_sampler * make(const struct loom_sampler_params * p) {
    struct loom_sampler * s = NULL;
    enum loom_status st = loom_sampler_new(p, &s);
    CHECK(st == LOOM_OK && s, "sampler_new: %s", loom_status_str(st));
    return s;
}

/* Upper (1 - ~1e-6) quantile of chi-square with 'df' degrees of freedom (Wilson & Hilferty 1931). */
static double chi2_limit(int df) {
    double z = 4.75, a = 2.0 / (9.0 * df);
    double c = 1.0 - a + z * sqrt(a);
    return df * c * c * c;
}

/* Draws DRAWS tokens and compares the counts with 'want' (exact probabilities, computed in double):
 * entries with want 0 must never occur; the rest pass a chi-square test. */
static void check_distribution(struct loom_sampler * s, const float * logits, int n, const double * want, const char * what) {
    long count[64] = {0};
    for (int i = 0; i < DRAWS; i++) {
        int32_t t = -1;
        if (loom_sampler_sample(s, logits, n, &t) != LOOM_OK || t < 0 || t >= n) {
            CHECK(false, "%s: sample failed (%d)", what, t);
            return;
        }
        count[t]++;
    }
    double chi2 = 0;
    int df = -1;
    for (int i = 0; i < n; i++) {
        if (want[i] == 0) {
            CHECK(count[i] == 0, "%s: token %d has probability 0 but was drawn %ld times", what, i, count[i]);
            continue;
        }
        double e = want[i] * DRAWS;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        df++;
    }
    if (df > 0) CHECK(chi2 < chi2_limit(df), "%s: chi-square %.2f over %d df exceeds %.2f", what, chi2, df, chi2_limit(df));
}

/* softmax(l / T) over the tokens in 'keep' (NULL: all), in double. */
static void softmax_ref(const float * l, int n, double temp, const bool * keep, double * out) {
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < n; i++) if (!keep || keep[i]) mx = fmax(mx, l[i] / temp);
    for (int i = 0; i < n; i++) {
        out[i] = !keep || keep[i] ? exp(l[i] / temp - mx) : 0;
        z += out[i];
    }
    for (int i = 0; i < n; i++) out[i] /= z;
}

static void test_defaults(void) {
    struct loom_sampler_params p = loom_sampler_default_params();
    CHECK(p.temp == 0.8f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f && p.repeat_penalty == 1.0f &&
              p.repeat_last_n == 64 && p.seed == LOOM_DEFAULT_SEED,
          "defaults");
    struct loom_sampler * s = make(&p);
    uint64_t seed = loom_sampler_get_seed(s);
    CHECK(seed != LOOM_DEFAULT_SEED, "a clock seed was picked");
    /* the reported seed reproduces the draws */
    struct loom_sampler_params q = p;
    q.seed = seed;
    struct loom_sampler * r = make(&q);
    float l[8] = {1, 2, 3, 4, 4, 3, 2, 1};
    bool same = true;
    for (int i = 0; i < 200; i++) {
        int32_t a, b;
        loom_sampler_sample(s, l, 8, &a);
        loom_sampler_sample(r, l, 8, &b);
        same &= a == b;
    }
    CHECK(same, "the reported seed reproduces the run");
    loom_sampler_free(s);
    loom_sampler_free(r);
}

static void test_uniform(void) {
    struct loom_sampler_params p = plain(1.0f, 42);
    struct loom_sampler * s = make(&p);
    const float l[4] = {1.5f, 1.5f, 1.5f, 1.5f};
    const double want[4] = {0.25, 0.25, 0.25, 0.25};
    check_distribution(s, l, 4, want, "4 equal logits");
    loom_sampler_free(s);
    /* the same through a binomial tolerance on each count: 5 sigma */
    s = make(&p);
    long c[4] = {0};
    for (int i = 0; i < DRAWS; i++) {
        int32_t t;
        loom_sampler_sample(s, l, 4, &t);
        c[t]++;
    }
    double sd = sqrt(DRAWS * 0.25 * 0.75);
    for (int i = 0; i < 4; i++) CHECK(fabs(c[i] - DRAWS * 0.25) < 5 * sd, "token %d drawn %ld times", i, c[i]);
    loom_sampler_free(s);
}

static void test_temperature(void) {
    const float l[5] = {0.0f, 1.0f, 2.0f, 3.0f, -1.0f};
    const float temps[3] = {0.5f, 1.0f, 2.0f};
    for (int k = 0; k < 3; k++) {
        struct loom_sampler_params p = plain(temps[k], 7 + (uint64_t)k);
        struct loom_sampler * s = make(&p);
        double want[5];
        softmax_ref(l, 5, temps[k], NULL, want);
        char what[64];
        snprintf(what, sizeof what, "softmax(l/%.1f)", (double)temps[k]);
        check_distribution(s, l, 5, want, what);
        loom_sampler_free(s);
    }
    /* sharpening: lower temperature puts more mass on the best token */
    double hot[5], cold[5];
    softmax_ref(l, 5, 2.0, NULL, hot);
    softmax_ref(l, 5, 0.5, NULL, cold);
    CHECK(cold[3] > hot[3], "reference sanity");
    /* extreme temperatures stay defined */
    const float neg[2] = {-5.0f, -5.1f};
    struct loom_sampler_params p = plain(1e-30f, 1);
    struct loom_sampler * s = make(&p);
    bool always0 = true;
    for (int i = 0; i < 100; i++) {
        int32_t t = -1;
        CHECK(loom_sampler_sample(s, neg, 2, &t) == LOOM_OK, "tiny temperature");
        always0 &= t == 0;
    }
    CHECK(always0, "a tiny temperature is greedy in the limit");
    loom_sampler_free(s);
    p = plain(1e30f, 2);
    s = make(&p);
    const double half[2] = {0.5, 0.5};
    check_distribution(s, neg, 2, half, "huge temperature is uniform");
    loom_sampler_free(s);
}

static void test_greedy(void) {
    uint64_t rng = 99;
    static float l[1000];
    int bad = 0;
    for (int row = 0; row < 50; row++) {
        for (int i = 0; i < 1000; i++) l[i] = (float)test_rand_normal(&rng) * 3;
        int best = 0;
        for (int i = 1; i < 1000; i++) if (l[i] > l[best]) best = i;
        struct loom_sampler_params g = plain(0.0f, 1), k1 = plain(1.0f, (uint64_t)row);
        k1.top_k = 1;
        struct loom_sampler * sg = make(&g), * sk = make(&k1);
        int32_t a = -1, b = -1;
        loom_sampler_sample(sg, l, 1000, &a);
        loom_sampler_sample(sk, l, 1000, &b);
        bad += a != best || b != best;
        loom_sampler_free(sg);
        loom_sampler_free(sk);
    }
    CHECK(bad == 0, "greedy and top_k = 1 pick the argmax (%d rows wrong)", bad);
    /* ties go to the lowest id; negative temperature is greedy too */
    const float tie[4] = {3, 5, 5, 1};
    struct loom_sampler_params g = plain(-1.0f, 1);
    struct loom_sampler * s = make(&g);
    int32_t t = -1;
    CHECK(loom_sampler_sample(s, tie, 4, &t) == LOOM_OK && t == 1, "greedy tie -> lowest id (%d)", t);
    loom_sampler_free(s);
    /* top-k = 2 keeps the two best, renormalized */
    const float l4[4] = {0.5f, 2.0f, 1.0f, 1.5f};
    struct loom_sampler_params p = plain(1.0f, 5);
    p.top_k = 2;
    s = make(&p);
    const bool keep[4] = {false, true, false, true};
    double want[4];
    softmax_ref(l4, 4, 1.0, keep, want);
    check_distribution(s, l4, 4, want, "top-k 2");
    loom_sampler_free(s);
}

static void test_seeds(void) {
    const float l[4] = {0, 0, 0, 0};
    int32_t a[100], b[100], c[100], z[100];
    uint64_t seeds[4] = {1234, 1234, 1235, 0};
    int32_t * out[4] = {a, b, c, z};
    for (int k = 0; k < 4; k++) {
        struct loom_sampler_params p = plain(1.0f, seeds[k]);
        struct loom_sampler * s = make(&p);
        CHECK(loom_sampler_get_seed(s) == seeds[k], "get_seed");
        for (int i = 0; i < 100; i++) loom_sampler_sample(s, l, 4, &out[k][i]);
        if (k == 0) {
            /* reset restarts the same sequence */
            loom_sampler_reset(s);
            int32_t again[100];
            for (int i = 0; i < 100; i++) loom_sampler_sample(s, l, 4, &again[i]);
            CHECK(memcmp(again, a, sizeof a) == 0, "reset replays the sequence");
        }
        loom_sampler_free(s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same draws");
    CHECK(memcmp(a, c, sizeof a) != 0, "different seeds, different draws");
    int zeros_distinct = 0;
    for (int i = 0; i < 100; i++) zeros_distinct += z[i] != z[0];
    CHECK(zeros_distinct > 0 && memcmp(z, a, sizeof z) != 0, "seed 0 works");
}

/* probabilities 0.5, 0.3, 0.15, 0.05 placed at ids 2, 0, 3, 1 */
static void nucleus_logits(float * l) {
    l[2] = logf(0.5f), l[0] = logf(0.3f), l[3] = logf(0.15f), l[1] = logf(0.05f);
}

static void test_top_p(void) {
    float l[4];
    nucleus_logits(l);
    struct {
        float top_p;
        bool keep[4];
        const char * what;
    } cases[] = {
        {0.45f, {false, false, true, false}, "top-p 0.45: the best alone reaches it"},
        {0.75f, {true, false, true, false}, "top-p 0.75: 0.5 + 0.3"},
        {0.85f, {true, false, true, true}, "top-p 0.85: 0.5 + 0.3 + 0.15"},
        {0.97f, {true, true, true, true}, "top-p 0.97: everything"},
        {0.0f, {false, false, true, false}, "top-p 0: keeps one"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        struct loom_sampler_params p = plain(1.0f, 100 + k);
        p.top_p = cases[k].top_p;
        struct loom_sampler * s = make(&p);
        double want[4];
        softmax_ref(l, 4, 1.0, cases[k].keep, want);
        check_distribution(s, l, 4, want, cases[k].what);
        loom_sampler_free(s);
    }
    /* top-p after temperature: at T = 0.5 the probabilities are proportional to p^2, so the best
     * alone has 0.25 / 0.365 = 0.685 and top-p 0.65 keeps only it (at T = 1 it would keep two) */
    struct loom_sampler_params p = plain(0.5f, 3);
    p.top_p = 0.65f;
    struct loom_sampler * s = make(&p);
    double sharp[4];
    softmax_ref(l, 4, 0.5, NULL, sharp);
    CHECK(sharp[2] > 0.65 && sharp[2] < 0.7, "reference %.3f", sharp[2]);
    const bool only2[4] = {false, false, true, false};
    double want[4];
    softmax_ref(l, 4, 0.5, only2, want);
    check_distribution(s, l, 4, want, "top-p applies to the tempered distribution");
    loom_sampler_free(s);
}

static void test_min_p(void) {
    float l[4];
    nucleus_logits(l);
    struct {
        float min_p;
        bool keep[4];
        const char * what;
    } cases[] = {
        {0.2f, {true, false, true, true}, "min-p 0.2: drops 0.05 < 0.1"},
        {0.35f, {true, false, true, false}, "min-p 0.35: drops 0.15 < 0.175"},
        {0.7f, {false, false, true, false}, "min-p 0.7: drops 0.3 < 0.35"},
        {5.0f, {false, false, true, false}, "min-p above 1 keeps the best"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        struct loom_sampler_params p = plain(1.0f, 200 + k);
        p.min_p = cases[k].min_p;
        struct loom_sampler * s = make(&p);
        double want[4];
        softmax_ref(l, 4, 1.0, cases[k].keep, want);
        check_distribution(s, l, 4, want, cases[k].what);
        loom_sampler_free(s);
    }
    /* all three together: top-k 3 drops id 1; top-p 0.9 on {0.5, 0.3, 0.15}/0.95 keeps 2, 0, 3;
     * min-p 0.35 then drops id 3 */
    struct loom_sampler_params p = plain(1.0f, 300);
    p.top_k = 3, p.top_p = 0.9f, p.min_p = 0.35f;
    struct loom_sampler * s = make(&p);
    const bool keep[4] = {true, false, true, false};
    double want[4];
    softmax_ref(l, 4, 1.0, keep, want);
    check_distribution(s, l, 4, want, "top-k, top-p, min-p together");
    loom_sampler_free(s);
}

static void test_penalty(void) {
    const float pos[4] = {1, 1, 1, 1}, neg[4] = {-1, -1, -1, -1};
    struct loom_sampler_params p = plain(1.0f, 11);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 8;
    const float * rows[2] = {pos, neg};
    for (int k = 0; k < 2; k++) {
        struct loom_sampler * s = make(&p);
        loom_sampler_accept(s, 0);
        float pen[4];
        memcpy(pen, rows[k], sizeof pen);
        pen[0] = k == 0 ? 0.5f : -2.0f; /* positive: divided; negative: multiplied */
        double want[4];
        softmax_ref(pen, 4, 1.0, NULL, want);
        CHECK(want[0] < 0.25, "penalized token less likely");
        check_distribution(s, rows[k], 4, want, k == 0 ? "penalty on a positive logit" : "penalty on a negative logit");
        loom_sampler_free(s);
    }
    /* window of the last n, each distinct token penalized once */
    struct loom_sampler_params g = plain(0.0f, 1);
    g.repeat_penalty = 2.0f;
    g.repeat_last_n = 2;
    struct loom_sampler * s = make(&g);
    const float l[4] = {1.0f, 1.9f, 1.9f, 0.5f};
    int32_t t = -1;
    loom_sampler_accept(s, 1);
    loom_sampler_accept(s, 2);
    loom_sampler_sample(s, l, 4, &t);
    CHECK(t == 0, "1 and 2 penalized to 0.95: greedy picks 0 (%d)", t);
    loom_sampler_accept(s, 0); /* window is now {2, 0} */
    loom_sampler_sample(s, l, 4, &t);
    CHECK(t == 1, "1 left the window (%d)", t);
    loom_sampler_reset(s);
    loom_sampler_sample(s, l, 4, &t);
    CHECK(t == 1, "reset clears the history (%d)", t);
    loom_sampler_accept(s, 0);
    loom_sampler_accept(s, 0);
    const float l2[2] = {1.0f, 0.3f};
    loom_sampler_sample(s, l2, 2, &t);
    CHECK(t == 0, "a token repeated twice is penalized once (1 -> 0.5 > 0.3)");
    loom_sampler_accept(s, 5000); /* beyond n_vocab: ignored */
    loom_sampler_accept(s, -3);
    CHECK(loom_sampler_sample(s, l2, 2, &t) == LOOM_OK, "out-of-range history ignored");
    loom_sampler_free(s);
}

/* Presence and frequency penalties: subtracted once per distinct token, the frequency one times
 * the token's count in the window, after the repetition penalty. */
static void test_presence_frequency(void) {
    const float l[3] = {1.0f, 0.9f, 0.5f};
    struct { float presence, frequency, repeat; int n_accept; int want; const char * what; } cases[] = {
        {0.15f, 0, 1, 1, 1, "presence 0.15: 1.0 -> 0.85 < 0.9"},
        {0.05f, 0, 1, 1, 0, "presence 0.05: 1.0 -> 0.95 > 0.9"},
        {0.05f, 0, 1, 3, 0, "presence counts a token once: 0.95 > 0.9"},
        {0, 0.04f, 1, 2, 0, "frequency 0.04 x 2: 1.0 -> 0.92 > 0.9"},
        {0, 0.06f, 1, 2, 1, "frequency 0.06 x 2: 1.0 -> 0.88 < 0.9"},
        {0, 0.04f, 1, 3, 1, "frequency 0.04 x 3: 1.0 -> 0.88 < 0.9"},
        {0.1f, 0, 1.05f, 1, 1, "repeat then presence: 1.0 / 1.05 - 0.1 = 0.852 < 0.9"},
        {-0.5f, 0, 1, 1, 0, "a negative presence penalty favours the token"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct loom_sampler_params p = plain(0.0f, 1);
        p.presence_penalty = cases[i].presence;
        p.frequency_penalty = cases[i].frequency;
        p.repeat_penalty = cases[i].repeat;
        struct loom_sampler * s = make(&p);
        for (int k = 0; k < cases[i].n_accept; k++) loom_sampler_accept(s, 0);
        int32_t t = -1;
        loom_sampler_sample(s, l, 3, &t);
        CHECK(t == cases[i].want, "%s (picked %d)", cases[i].what, t);
        loom_sampler_free(s);
    }
    /* the order: repeat 2 then presence 0.5 takes 1.0 to 0.0 (< 0.1); the other order would give 0.25 */
    struct loom_sampler_params o = plain(0.0f, 1);
    o.repeat_penalty = 2.0f, o.presence_penalty = 0.5f;
    struct loom_sampler * s = make(&o);
    loom_sampler_accept(s, 0);
    const float l2[2] = {1.0f, 0.1f};
    int32_t t = -1;
    loom_sampler_sample(s, l2, 2, &t);
    CHECK(t == 1, "the repetition penalty comes before the presence penalty (picked %d)", t);
    loom_sampler_free(s);
    struct loom_sampler_params b = plain(1.0f, 1);
    struct loom_sampler * none = NULL;
    b.presence_penalty = INFINITY;
    CHECK(loom_sampler_new(&b, &none) == LOOM_ERR_INVALID_ARG && !none, "infinite presence penalty");
    b.presence_penalty = 0, b.frequency_penalty = NAN;
    CHECK(loom_sampler_new(&b, &none) == LOOM_ERR_INVALID_ARG && !none, "NaN frequency penalty");
}

static void test_degenerate(void) {
    int e0 = g_errors;
    const float with_nan[4] = {NAN, 1.0f, NAN, 0.0f};
    struct loom_sampler_params p = plain(1.0f, 8);
    struct loom_sampler * s = make(&p);
    const bool keep[4] = {false, true, false, true};
    double want[4];
    const float clean[4] = {0, 1.0f, 0, 0.0f};
    softmax_ref(clean, 4, 1.0, keep, want);
    check_distribution(s, with_nan, 4, want, "NaN logits are never drawn");
    struct loom_sampler_params g = plain(0.0f, 8);
    struct loom_sampler * sg = make(&g);
    int32_t t = -1;
    const float nan_first[3] = {NAN, NAN, 2.0f};
    CHECK(loom_sampler_sample(sg, nan_first, 3, &t) == LOOM_OK && t == 2, "greedy skips NaN (%d)", t);

    const float all_ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
    const float all_nan[3] = {NAN, NAN, NAN};
    const float mixed[3] = {NAN, -INFINITY, NAN};
    const float * bad[3] = {all_ninf, all_nan, mixed};
    for (int k = 0; k < 3; k++) {
        t = 12345;
        CHECK(loom_sampler_sample(s, bad[k], 3, &t) == LOOM_ERR_INVALID_ARG && t == 12345, "nothing to sample (%d)", k);
        CHECK(loom_sampler_sample(sg, bad[k], 3, &t) == LOOM_ERR_INVALID_ARG && t == 12345, "greedy: nothing (%d)", k);
    }
    CHECK(g_errors >= e0 + 6, "reasons logged");

    const float pinf[4] = {0, INFINITY, 5, INFINITY};
    const double half[4] = {0, 0.5, 0, 0.5};
    check_distribution(s, pinf, 4, half, "+inf logits win, equally");
    CHECK(loom_sampler_sample(sg, pinf, 4, &t) == LOOM_OK && t == 1, "greedy +inf -> first");
    const float one_finite[3] = {-INFINITY, -3.0f, NAN};
    CHECK(loom_sampler_sample(s, one_finite, 3, &t) == LOOM_OK && t == 1, "single finite logit");
    loom_sampler_free(sg);

    /* the candidate list never empties */
    struct loom_sampler_params q = plain(1.0f, 9);
    q.top_k = 1, q.top_p = 0.0f, q.min_p = 1.0f;
    struct loom_sampler * sq = make(&q);
    const float l[3] = {0.1f, 0.3f, 0.2f};
    CHECK(loom_sampler_sample(sq, l, 3, &t) == LOOM_OK && t == 1, "tightest settings keep the best");
    loom_sampler_free(sq);

    /* arguments */
    CHECK(loom_sampler_sample(s, l, 0, &t) == LOOM_ERR_INVALID_ARG, "n_vocab 0");
    CHECK(loom_sampler_sample(s, NULL, 3, &t) == LOOM_ERR_INVALID_ARG, "NULL logits");
    CHECK(loom_sampler_sample(s, l, 3, NULL) == LOOM_ERR_INVALID_ARG, "NULL token");
    CHECK(loom_sampler_sample(NULL, l, 3, &t) == LOOM_ERR_INVALID_ARG, "NULL sampler");
    loom_sampler_free(s);

    struct loom_sampler * none = (struct loom_sampler *)&g_errors;
    struct loom_sampler_params b = plain(NAN, 1);
    CHECK(loom_sampler_new(&b, &none) == LOOM_ERR_INVALID_ARG && none == NULL, "NaN temperature");
    b = plain(1.0f, 1), b.repeat_penalty = 0.0f;
    CHECK(loom_sampler_new(&b, &none) == LOOM_ERR_INVALID_ARG, "zero penalty");
    b.repeat_penalty = -1.0f;
    CHECK(loom_sampler_new(&b, &none) == LOOM_ERR_INVALID_ARG, "negative penalty");
    b.repeat_penalty = 1.0f, b.repeat_last_n = -1;
    CHECK(loom_sampler_new(&b, &none) == LOOM_ERR_INVALID_ARG, "negative repeat_last_n");
    b.repeat_last_n = 64, b.top_p = NAN;
    CHECK(loom_sampler_new(&b, &none) == LOOM_ERR_INVALID_ARG, "NaN top_p");
    CHECK(loom_sampler_new(NULL, &none) == LOOM_ERR_INVALID_ARG, "NULL params");
    b = plain(1.0f, 1), b.repeat_last_n = 0;
    struct loom_sampler * nohist = make(&b);
    loom_sampler_accept(nohist, 3); /* no history kept: a no-op */
    loom_sampler_free(nohist);
    loom_sampler_free(NULL);
}

/* A Llama-sized vocabulary with the default settings is fast. */
static void test_speed(void) {
    static float l[32000];
    uint64_t rng = 5;
    for (int i = 0; i < 32000; i++) l[i] = (float)test_rand_normal(&rng) * 2;
    const int variants = 3;
    for (int k = 0; k < variants; k++) {
        struct loom_sampler_params p = loom_sampler_default_params();
        p.seed = 1;
        if (k == 1) p.top_k = 0;               /* full sort for top-p */
        if (k == 2) p.top_k = 0, p.min_p = 0;  /* the worst case */
        struct loom_sampler * s = make(&p);
        int64_t t0 = loom_time_us();
        for (int i = 0; i < 200; i++) {
            int32_t t;
            loom_sampler_sample(s, l, 32000, &t);
            loom_sampler_accept(s, t);
        }
        double ms = (double)(loom_time_us() - t0) / 1e3 / 200;
        fprintf(stderr, "sampling 32000 logits (variant %d): %.3f ms per token\n", k, ms);
        loom_sampler_free(s);
    }
}

int main(void) {
    loom_log_set(log_capture, NULL);
    test_defaults();
    test_uniform();
    test_temperature();
    test_greedy();
    test_seeds();
    test_top_p();
    test_min_p();
    test_penalty();
    test_presence_frequency();
    test_degenerate();
    test_speed();
    return test_finish("test-sampler");
}
