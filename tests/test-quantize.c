/* test-quantize.c -- the quantizers and `loom quantize`:
 * - rows of weights quantized by the reference engine (tests/data/quant-ref-rows.dat, made once
 *   from its fixtures by bench/quant/make-ref-rows.c) come out byte for byte the same;
 * - every preset of the fixtures written by the reference engine's llama-quantize ($LOOM_MODELS/quant,
 *   made once, see the README there) is reproduced byte for byte from the same F32 file (tensor
 *   types, order, metadata and every quantized byte); the files its Python quantizers wrote
 *   (stories260K Q8_0 / Q4_0 / Q4_1 / Q5_0) hold the same tensor types and bytes;
 * - the written files load in Loom;
 * - quantization error per type on random rows is below a bound derived from the bits per weight
 *   (computed here in double precision from the dequantized values);
 * - hostile blocks (zeros, denormals, values near FLT_MAX, NaN) give finite (zero) scales, and
 *   loom_model_quantize refuses a tensor holding NaN, naming it, and its bad arguments. */
#include "loom-gguf.h"
#include "loom-llama.h"
#include "loom-convert.h"
#include "test-util.h"

#include <float.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[256];

/* ---------------------------------------------------------------- rows the reference quantized */

static uint32_t rd32(const uint8_t * p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void test_ref_rows(void) {
    const char * src = getenv("LOOM_SRC");
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/quant-ref-rows.dat", src ? src : ".");
    size_t size = 0;
    uint8_t * d = test_read_file(path, &size);
    CHECK(d && size >= 8 && !memcmp(d, "LQRR", 4), "cannot read %s", path);
    if (!d || size < 8) {
        free(d);
        return;
    }
    const uint32_t n = rd32(d + 4);
    size_t at = 8;
    int types_seen = 0;
    for (uint32_t k = 0; k < n && at + 12 <= size; k++) {
        const enum loom_type type = (enum loom_type)rd32(d + at);
        const uint32_t ne0 = rd32(d + at + 4), rows = rd32(d + at + 8);
        at += 12;
        CHECK(loom_type_is_known((int)type) && ne0 % loom_blck_size(type) == 0, "record %u: bad type/length", k);
        const size_t rs = loom_row_size(type, ne0);
        if (at + (size_t)rows * (ne0 * 4 + rs) > size) break;
        float * x = malloc((size_t)ne0 * 4);
        uint8_t * q = malloc(rs);
        for (uint32_t r = 0; r < rows; r++) {
            memcpy(x, d + at + (size_t)r * ne0 * 4, (size_t)ne0 * 4);
            loom_type_get_traits(type)->from_float(x, q, ne0);
            const uint8_t * ref = d + at + (size_t)rows * ne0 * 4 + (size_t)r * rs;
            CHECK(!memcmp(q, ref, rs), "%s row %u: bytes differ from the reference engine's", loom_type_name(type), r);
        }
        free(x);
        free(q);
        at += (size_t)rows * (ne0 * 4 + rs);
        types_seen++;
    }
    CHECK(types_seen == 12 && at == size, "%d records read, %zu of %zu bytes", types_seen, at, size);
    free(d);
}

/* ---------------------------------------------------------------- presets against the fixtures */

/* Tensor names, types, shapes and data of 'a' and 'b' equal (metadata aside). */
static void check_same_tensors(const char * what, const char * pa, const char * pb) {
    char err[256];
    struct loom_gguf *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    uint8_t * da = test_read_file(pa, &na), * db = test_read_file(pb, &nb);
    CHECK(da && db && loom_gguf_open(pa, &a, err, sizeof err) == LOOM_OK && loom_gguf_open(pb, &b, err, sizeof err) == LOOM_OK,
          "%s: cannot open", what);
    if (a && b) {
        CHECK(loom_gguf_n_tensors(a) == loom_gguf_n_tensors(b), "%s: tensor counts", what);
        for (int64_t i = 0; i < loom_gguf_n_tensors(b); i++) {
            const char * name = loom_gguf_tensor_name(b, i);
            const int64_t k = loom_gguf_find_tensor(a, name);
            CHECK(k >= 0, "%s: no tensor '%s'", what, name);
            if (k < 0) continue;
            CHECK(loom_gguf_tensor_type(a, k) == loom_gguf_tensor_type(b, i), "%s: '%s' is %s, the reference wrote %s", what, name,
                  loom_type_name(loom_gguf_tensor_type(a, k)), loom_type_name(loom_gguf_tensor_type(b, i)));
            if (loom_gguf_tensor_size(a, k) != loom_gguf_tensor_size(b, i)) continue;
            const uint8_t * x = da + loom_gguf_data_offset(a) + loom_gguf_tensor_offset(a, k);
            const uint8_t * y = db + loom_gguf_data_offset(b) + loom_gguf_tensor_offset(b, i);
            CHECK(!memcmp(x, y, loom_gguf_tensor_size(b, i)), "%s: '%s' (%s) bytes differ from the reference's", what, name,
                  loom_type_name(loom_gguf_tensor_type(b, i)));
        }
    }
    loom_gguf_free(a);
    loom_gguf_free(b);
    free(da);
    free(db);
}

static void check_loads(const char * path) {
    struct loom_model * m = NULL;
    struct loom_model_params mp = loom_model_default_params();
    CHECK(loom_model_load(path, mp, &m) == LOOM_OK && m, "%s does not load: %s", path, test_last_error);
    loom_model_free(m);
}

/* 'byte_identical': a file llama-quantize wrote (metadata and layout compared too). */
static void check_preset(const char * src, const char * ref, const char * preset, bool byte_identical, bool load) {
    char out[512];
    snprintf(out, sizeof out, "%s/%s.gguf", tmp_dir, preset);
    char ref_path[512], src_path[512]; /* test_model_path's buffer is static */
    snprintf(ref_path, sizeof ref_path, "%s", test_model_path(ref));
    snprintf(src_path, sizeof src_path, "%s", test_model_path(src));
    struct loom_quantize_params qp = {.n_threads = 2};
    const enum loom_status st = loom_model_quantize(src_path, out, preset, &qp);
    CHECK(st == LOOM_OK, "quantize %s to %s: %s (%s)", src, preset, loom_status_str(st), test_last_error);
    if (st != LOOM_OK) return;
    if (byte_identical) {
        size_t n1 = 0, n2 = 0;
        uint8_t * a = test_read_file(out, &n1), * b = test_read_file(ref_path, &n2);
        CHECK(a && b && n1 == n2 && !memcmp(a, b, n1), "%s %s: not the reference engine's file (%zu / %zu bytes)", src, preset, n1,
              n2);
        free(a);
        free(b);
    }
    check_same_tensors(preset, out, ref_path);
    if (load) check_loads(out);
    unlink(out);
}

static void test_presets(void) {
    static const char * kq[] = {"Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_0", "Q4_K_S", "Q4_K_M",
                                "Q5_1", "Q5_K_S", "Q5_K_M", "Q6_K",  "Q8_0", "IQ4_NL", "IQ4_XS"};
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) {
        char ref[64];
        snprintf(ref, sizeof ref, "quant/kq/kq-%s.gguf", kq[i]);
        check_preset("quant/kq/kq-F32.gguf", ref, kq[i], true, i % 3 == 0);
    }
    static const char * st_ref[] = {"F16", "BF16", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"};
    for (size_t i = 0; i < sizeof st_ref / sizeof st_ref[0]; i++) {
        char ref[64];
        snprintf(ref, sizeof ref, "quant/stories260K-%s.gguf", st_ref[i]);
        check_preset("quant/stories260K-F32.gguf", ref, st_ref[i], true, true);
    }
    /* made by the reference's Python quantizers (llama-quantize refuses these for rows of 172) */
    static const char * st_py[] = {"Q8_0", "Q4_0", "Q4_1", "Q5_0"};
    for (size_t i = 0; i < sizeof st_py / sizeof st_py[0]; i++) {
        char ref[64];
        snprintf(ref, sizeof ref, "quant/stories260K-%s.gguf", st_py[i]);
        check_preset("quant/stories260K-F32.gguf", ref, st_py[i], false, true);
    }
}

/* ---------------------------------------------------------------- error bounds on random rows */

/* Relative RMSE bound per type: a b-bit uniform grid over +-amax of a normal block (amax ~ 2.5
 * sigma for 32 values, ~3 sigma for 256) has RMSE step / sqrt(12) with step = 2 amax / (2^b - 1);
 * the bounds are that with b the type's value bits, times 1.5 for the block's scale rounding, and
 * K-quants' sub-block minimums. */
struct bound {
    enum loom_type type;
    int bits;
};

static void test_rmse(void) {
    static const struct bound bounds[] = {
        {LOOM_TYPE_Q4_0, 4},   {LOOM_TYPE_Q4_1, 4},   {LOOM_TYPE_Q5_0, 5},   {LOOM_TYPE_Q5_1, 5}, {LOOM_TYPE_Q8_0, 8},
        {LOOM_TYPE_Q2_K, 2},   {LOOM_TYPE_Q3_K, 3},   {LOOM_TYPE_Q4_K, 4},   {LOOM_TYPE_Q5_K, 5}, {LOOM_TYPE_Q6_K, 6},
        {LOOM_TYPE_Q8_K, 8},   {LOOM_TYPE_IQ4_NL, 4}, {LOOM_TYPE_IQ4_XS, 4},
    };
    enum { N = 256 * 48 };
    float * x = malloc(sizeof(float) * N), * y = malloc(sizeof(float) * N);
    uint8_t * q = malloc(N * 2);
    uint64_t seed = 42;
    for (int i = 0; i < N; i++) x[i] = (float)(0.02 * test_rand_normal(&seed));
    for (size_t t = 0; t < sizeof bounds / sizeof bounds[0]; t++) {
        const struct loom_type_traits * tt = loom_type_get_traits(bounds[t].type);
        CHECK(tt->from_float && tt->to_float, "%s: no codec", tt->name);
        if (!tt->from_float || !tt->to_float) continue;
        tt->from_float(x, q, N);
        tt->to_float(q, y, N);
        double se = 0, sx = 0;
        for (int i = 0; i < N; i++) {
            se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            sx += (double)x[i] * x[i];
        }
        const double rel = sqrt(se / sx);
        const double bound = 1.5 * (2 * 3.0 / ((1 << bounds[t].bits) - 1)) / sqrt(12.0);
        CHECK(rel < bound, "%s: relative RMSE %.4g above %.4g", tt->name, rel, bound);
        if (getenv("LOOM_DEBUG")) printf("%-7s relative RMSE %.5f (bound %.5f)\n", tt->name, rel, bound);
    }
    free(x);
    free(y);
    free(q);
}

/* ---------------------------------------------------------------- hostile blocks */

static void test_hostile(void) {
    static const enum loom_type types[] = {LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1, LOOM_TYPE_Q8_0,
                                           LOOM_TYPE_Q2_K, LOOM_TYPE_Q3_K, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K,
                                           LOOM_TYPE_Q8_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS};
    enum { N = 256 };
    float x[N], y[N];
    uint8_t q[512];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const struct loom_type_traits * tt = loom_type_get_traits(types[t]);
        if (!tt->from_float || !tt->to_float) continue;
        /* zeros: every decoded value exactly 0 */
        memset(x, 0, sizeof x);
        tt->from_float(x, q, N);
        tt->to_float(q, y, N);
        bool zero = true;
        for (int i = 0; i < N; i++) zero &= y[i] == 0.f;
        CHECK(zero, "%s: a block of zeros does not decode to zeros", tt->name);
        /* denormals, near FLT_MAX, a mix of both: finite decoded values; NaN / inf: NaN blocks */
        for (int k = 0; k < 4; k++) {
            uint64_t seed = 7 + (uint64_t)k;
            for (int i = 0; i < N; i++) {
                const double u = test_rand_uniform(&seed) * 2 - 1;
                x[i] = k == 0 ? (float)(u * 1e-40) : k == 1 ? (float)(u * FLT_MAX) : (i % 2 ? (float)(u * 1e-40) : (float)(u * 3e38));
            }
            if (k == 3) x[5] = NAN, x[77] = INFINITY;
            tt->from_float(x, q, N);
            tt->to_float(q, y, N);
            /* every value of a block holding the NaN or the inf decodes to NaN, every other one is finite */
            const int bl = (int)tt->blck_size;
            int wrong = 0;
            for (int i = 0; i < N; i++) {
                const bool bad_block = k == 3 && (i / bl == 5 / bl || i / bl == 77 / bl);
                wrong += bad_block ? !isnan(y[i]) : !isfinite(y[i]);
            }
            CHECK(wrong == 0, "%s: case %d: %d values decode wrongly (NaN expected in a block holding NaN / inf, else finite)", tt->name, k,
                  wrong);
            if (k == 0) { /* denormal input: values of that size (no scale blows up) */
                bool tiny = true;
                for (int i = 0; i < N; i++) tiny &= fabsf(y[i]) < 1e-30f;
                CHECK(tiny, "%s: denormal block decodes to large values", tt->name);
            }
        }
    }
}

/* ---------------------------------------------------------------- loom_model_quantize's refusals */

/* 'bad' at element 300 of attn_q, 'bad_norm' at element 7 of the norm (which quantizing keeps F32). */
static void write_tiny(const char * path, float bad, float bad_norm) {
    struct loom_gguf_writer * w = loom_gguf_writer_new();
    static float data[256 * 4], norm[256];
    for (int i = 0; i < 256 * 4; i++) data[i] = (float)((i * 37 % 101) - 50) * 1e-3f;
    for (int i = 0; i < 256; i++) norm[i] = 1.f;
    data[300] = bad;
    norm[7] = bad_norm;
    const int64_t ne[2] = {256, 4};
    loom_gguf_writer_set_str(w, "general.architecture", "llama");
    loom_gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", LOOM_TYPE_F32, 1, ne, norm);
    loom_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", LOOM_TYPE_F32, 2, ne, data);
    char err[256];
    CHECK(loom_gguf_writer_write_file(w, path, err, sizeof err) == LOOM_OK, "write %s: %s", path, err);
    loom_gguf_writer_free(w);
}

static void test_refusals(void) {
    char in[300], out[300];
    snprintf(in, sizeof in, "%s/tiny.gguf", tmp_dir);
    snprintf(out, sizeof out, "%s/tiny-q.gguf", tmp_dir);
    write_tiny(in, 0.5f, 1.f);
    CHECK(loom_model_quantize(in, out, "Q4_K_M", NULL) == LOOM_OK, "tiny Q4_K_M: %s", test_last_error);
    struct loom_gguf * g = NULL;
    char err[256];
    if (loom_gguf_open(out, &g, err, sizeof err) == LOOM_OK) {
        CHECK(loom_gguf_get_u32(g, "general.file_type", 0) == 15, "file_type %u", loom_gguf_get_u32(g, "general.file_type", 0));
        CHECK(loom_gguf_get_u32(g, "general.quantization_version", 0) == 2, "quantization_version");
        const int64_t q = loom_gguf_find_tensor(g, "blk.0.attn_q.weight"), n = loom_gguf_find_tensor(g, "blk.0.attn_norm.weight");
        CHECK(q >= 0 && loom_gguf_tensor_type(g, q) == LOOM_TYPE_Q4_K, "attn_q type");
        CHECK(n >= 0 && loom_gguf_tensor_type(g, n) == LOOM_TYPE_F32, "the norm stays F32");
        loom_gguf_free(g);
    } else {
        CHECK(false, "open %s: %s", out, err);
    }
    unlink(out);
    /* unknown preset, missing input, output == input: errors, nothing written */
    CHECK(loom_model_quantize(in, out, "Q4_K_X", NULL) == LOOM_ERR_INVALID_ARG, "unknown preset accepted");
    CHECK(strstr(test_last_error, "Q4_K_X") != NULL, "message: %s", test_last_error);
    CHECK(loom_model_quantize("/nonexistent/in.gguf", out, "Q8_0", NULL) == LOOM_ERR_IO, "missing input");
    /* the type names of --output-tensor-type / --token-embedding-type: the presets' 15 base types, in any case */
    char names[256];
    snprintf(names, sizeof names, "%s", loom_quantize_tensor_type_names());
    int n_names = 0;
    for (char * save = NULL, * t = strtok_r(names, ", ", &save); t; t = strtok_r(NULL, ", ", &save), n_names++) {
        CHECK(loom_quantize_tensor_type_known(t), "'%s' of the names is not known", t);
    }
    CHECK(n_names == 15, "%d tensor type names: %s", n_names, loom_quantize_tensor_type_names());
    CHECK(loom_quantize_tensor_type_known("Q6_k") && loom_quantize_tensor_type_known("BF16"), "Q6_k / BF16 not known");
    CHECK(!loom_quantize_tensor_type_known("q9") && !loom_quantize_tensor_type_known("Q4_K_M") && !loom_quantize_tensor_type_known("iq2_xxs") &&
              !loom_quantize_tensor_type_known("") && !loom_quantize_tensor_type_known(NULL),
          "a name that is no tensor type known");
    const struct loom_quantize_params bad_type = {.output_tensor_type = "tiny.gguf"};
    CHECK(loom_model_quantize(in, out, "Q4_0", &bad_type) == LOOM_ERR_INVALID_ARG && access(out, F_OK) != 0, "output type 'tiny.gguf' accepted");
    CHECK(strstr(test_last_error, "unknown tensor type 'tiny.gguf' for the output tensor (one of q4_0, ") != NULL, "message: %s", test_last_error);
    size_t n0 = 0;
    uint8_t * before = test_read_file(in, &n0);
    CHECK(loom_model_quantize(in, in, "Q8_0", NULL) == LOOM_ERR_INVALID_ARG, "output == input accepted");
    size_t n1 = 0;
    uint8_t * after = test_read_file(in, &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0), "the input was changed");
    free(before);
    free(after);
    /* a NaN and an inf: refused, naming the tensor, no output left */
    const float bads[2] = {NAN, -INFINITY};
    for (int k = 0; k < 2; k++) {
        write_tiny(in, bads[k], 1.f);
        CHECK(loom_model_quantize(in, out, "Q8_0", NULL) == LOOM_ERR_FORMAT, "NaN / inf input accepted");
        CHECK(strstr(test_last_error, "blk.0.attn_q.weight") != NULL, "message does not name the tensor: %s", test_last_error);
        CHECK(access(out, F_OK) != 0, "an output was left after a refusal");
        /* in a tensor the preset keeps in its type (a norm stays F32): refused too */
        write_tiny(in, 0.5f, bads[k]);
        CHECK(loom_model_quantize(in, out, "Q8_0", NULL) == LOOM_ERR_FORMAT, "NaN / inf in a kept tensor accepted");
        CHECK(strstr(test_last_error, "blk.0.attn_norm.weight") != NULL, "message does not name the norm: %s", test_last_error);
        CHECK(access(out, F_OK) != 0, "an output was left after a refusal");
    }
    /* a finite value beyond F16's range, for F16: refused (it would become inf) */
    write_tiny(in, 1e38f, 1.f);
    CHECK(loom_model_quantize(in, out, "F16", NULL) == LOOM_ERR_FORMAT, "a value beyond F16's range accepted for F16");
    CHECK(strstr(test_last_error, "F16's range") != NULL, "message: %s", test_last_error);
    CHECK(access(out, F_OK) != 0, "an output was left after a refusal");
    CHECK(!test_dir_has_temp(tmp_dir), "a temporary file was left");
    unlink(in);
}

int main(void) {
    loom_log_set(test_capture_log, NULL);
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/loom-test-quantize-XXXXXX");
    if (!mkdtemp(tmp_dir)) return test_skip("cannot create a temporary folder");
    test_ref_rows();
    test_rmse();
    test_hostile();
    test_refusals();
    if (access(test_model_path("quant/kq/kq-F32.gguf"), R_OK) == 0) {
        test_presets();
    } else {
        printf("skipped the preset checks: quant/kq/kq-F32.gguf not found in $LOOM_MODELS\n");
    }
    rmdir(tmp_dir);
    return test_finish("test-quantize");
}
