/* test-quant-dequant.c -- dequantizes every tensor of every quantized fixture ($LOOM_MODELS/quant
 * and quant/kq) and compares sum, sum of squares, position-weighted sum and the first four values
 * with dequant-stats.json there (computed independently, in double precision, by the reference
 * engine's Python dequantizers). The file is read with a small reader of its plain JSON. */
#include "loom-gguf.h"
#include "test-util.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- a minimal JSON reader */

struct js {
    const char * p, * end;
    bool bad;
};

static void js_ws(struct js * j) {
    while (j->p < j->end && isspace((unsigned char)*j->p)) j->p++;
}

static bool js_peek(struct js * j, char c) {
    js_ws(j);
    return j->p < j->end && *j->p == c;
}

static void js_expect(struct js * j, char c) {
    if (js_peek(j, c)) j->p++;
    else j->bad = true;
}

/* A string without escapes (the file's keys and type names), into buf. */
static void js_string(struct js * j, char * buf, size_t size) {
    js_expect(j, '"');
    size_t n = 0;
    while (!j->bad && j->p < j->end && *j->p != '"') {
        if (*j->p == '\\') j->bad = true;
        if (n + 1 < size) buf[n++] = *j->p;
        j->p++;
    }
    buf[n] = 0;
    js_expect(j, '"');
}

static double js_number(struct js * j) {
    js_ws(j);
    char * e;
    double v = strtod(j->p, &e);
    if (e == j->p) j->bad = true;
    j->p = e;
    return v;
}

/* Reads "[n, n, ...]" into v (at most 'max'); returns the count. */
static int js_numbers(struct js * j, double * v, int max) {
    int n = 0;
    js_expect(j, '[');
    while (!j->bad && !js_peek(j, ']')) {
        double x = js_number(j);
        if (n < max) v[n] = x;
        n++;
        if (js_peek(j, ',')) j->p++;
    }
    js_expect(j, ']');
    return n;
}

/* ---------------------------------------------------------------- the check */

struct stats {
    char type[16];
    double ne[4];
    int n_dims;
    double sum, sumsq, wsum, first4[4];
};

static void read_stats(struct js * j, struct stats * s) {
    memset(s, 0, sizeof *s);
    js_expect(j, '{');
    while (!j->bad && !js_peek(j, '}')) {
        char key[32];
        js_string(j, key, sizeof key);
        js_expect(j, ':');
        if (!strcmp(key, "type")) js_string(j, s->type, sizeof s->type);
        else if (!strcmp(key, "ne")) s->n_dims = js_numbers(j, s->ne, 4);
        else if (!strcmp(key, "sum")) s->sum = js_number(j);
        else if (!strcmp(key, "sumsq")) s->sumsq = js_number(j);
        else if (!strcmp(key, "wsum")) s->wsum = js_number(j);
        else if (!strcmp(key, "first4")) js_numbers(j, s->first4, 4);
        else j->bad = true;
        if (js_peek(j, ',')) j->p++;
    }
    js_expect(j, '}');
}

static bool close_to(double got, double want, double scale) { return fabs(got - want) <= 1e-9 * scale + 1e-12; }

/* Dequantizes tensor 'name' of 'file' and compares it with 's'. */
static void check_tensor(const char * file, const struct loom_gguf * g, const uint8_t * data, const char * name, const struct stats * s) {
    int64_t i = loom_gguf_find_tensor(g, name);
    CHECK(i >= 0, "%s: tensor %s missing", file, name);
    if (i < 0) return;
    enum loom_type type = loom_gguf_tensor_type(g, i);
    CHECK(!strcasecmp(loom_type_name(type), s->type), "%s %s: type %s, stats say %s", file, name, loom_type_name(type), s->type);
    const int64_t * ne = loom_gguf_tensor_ne(g, i);
    for (int d = 0; d < s->n_dims; d++) CHECK(ne[d] == (int64_t)s->ne[d], "%s %s: ne[%d]", file, name, d);
    const loom_to_float_fn to_float = loom_type_get_traits(type)->to_float;
    CHECK(to_float != NULL, "%s %s: no to_float for %s", file, name, loom_type_name(type));
    if (!to_float) return;
    const int64_t n = loom_gguf_tensor_nelements(g, i);
    float * x = malloc((size_t)n * sizeof *x);
    if (!x) abort();
    to_float(data + loom_gguf_data_offset(g) + loom_gguf_tensor_offset(g, i), x, n);
    double sum = 0, sumsq = 0, wsum = 0, abs_sum = 0, wabs = 0;
    for (int64_t k = 0; k < n; k++) {
        const double v = x[k], w = (double)(k % 997 + 1);
        sum += v, sumsq += v * v, wsum += w * v, abs_sum += fabs(v), wabs += w * fabs(v);
    }
    CHECK(close_to(sum, s->sum, abs_sum), "%s %s: sum %.17g, want %.17g", file, name, sum, s->sum);
    CHECK(close_to(sumsq, s->sumsq, sumsq), "%s %s: sumsq %.17g, want %.17g", file, name, sumsq, s->sumsq);
    CHECK(close_to(wsum, s->wsum, wabs), "%s %s: wsum %.17g, want %.17g", file, name, wsum, s->wsum);
    for (int k = 0; k < 4 && k < n; k++) {
        CHECK((double)x[k] == s->first4[k], "%s %s: element %d is %.9g, want %.9g", file, name, k, x[k], s->first4[k]);
    }
    free(x);
}

int main(void) {
    size_t json_size = 0;
    char * json = (char *)test_read_file(test_model_path("quant/dequant-stats.json"), &json_size);
    if (!json) return test_skip("quant/dequant-stats.json not found in $LOOM_MODELS");
    struct js j = {json, json + json_size, false};
    int n_files = 0, n_tensors = 0;
    js_expect(&j, '{');
    while (!j.bad && !js_peek(&j, '}')) {
        char file[256], rel[300];
        js_string(&j, file, sizeof file);
        js_expect(&j, ':');
        snprintf(rel, sizeof rel, "quant/%s", file);
        size_t size = 0;
        uint8_t * data = test_read_file(test_model_path(rel), &size);
        struct loom_gguf * g = NULL;
        char err[256] = "";
        CHECK(data && loom_gguf_open(test_model_path(rel), &g, err, sizeof err) == LOOM_OK, "open %s: %s", rel, err);
        int in_file = 0;
        js_expect(&j, '{');
        while (!j.bad && !js_peek(&j, '}')) {
            char name[LOOM_MAX_NAME];
            struct stats s;
            js_string(&j, name, sizeof name);
            js_expect(&j, ':');
            read_stats(&j, &s);
            if (g && data) check_tensor(file, g, data, name, &s);
            in_file++;
            if (js_peek(&j, ',')) j.p++;
        }
        js_expect(&j, '}');
        if (g) CHECK(in_file == loom_gguf_n_tensors(g), "%s: %d tensors in the stats, %lld in the file", file, in_file,
                     (long long)loom_gguf_n_tensors(g));
        loom_gguf_free(g);
        free(data);
        n_files++, n_tensors += in_file;
        if (js_peek(&j, ',')) j.p++;
    }
    js_expect(&j, '}');
    CHECK(!j.bad, "dequant-stats.json: malformed near byte %lld", (long long)(j.p - json));
    CHECK(n_files >= 27 && n_tensors >= 891, "%d files, %d tensors checked", n_files, n_tensors);
    printf("%d files, %d tensors checked\n", n_files, n_tensors);
    free(json);
    return test_finish("test-quant-dequant");
}
