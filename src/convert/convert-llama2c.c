/* convert-llama2c.c -- a llama2.c checkpoint + tokenizer -> a GGUF llama model. */
#include "loom-gguf.h"
#include "loom-convert.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct llama2c_config {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    bool shared_classifier;
};

/* Element counts of the checkpoint's arrays, in file order. */
enum { W_EMBD, W_RMS_ATT, W_Q, W_K, W_V, W_O, W_RMS_FFN, W_1, W_2, W_3, W_RMS_FINAL, W_FREQ_RE, W_FREQ_IM, W_CLS, W_COUNT };

static bool mul_ok(uint64_t a, uint64_t b, uint64_t * out) {
    if (a && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

static enum loom_status read_config(const uint8_t * data, size_t size, struct llama2c_config * c, uint64_t counts[W_COUNT]) {
    if (size < 28) {
        loom_log(LOOM_LOG_ERROR, "checkpoint: %zu bytes, too short for the 28-byte header", size);
        return LOOM_ERR_FORMAT;
    }
    int32_t h[7];
    memcpy(h, data, sizeof h);
    if (!memcmp(data, "ak42", 4)) {
        loom_log(LOOM_LOG_ERROR, "checkpoint: the versioned llama2.c export format ('ak42') is not supported; use the legacy format");
        return LOOM_ERR_UNSUPPORTED;
    }
    /* the sign of the vocab size says whether the classifier is shared; check the magnitude before
     * negating (-INT32_MIN overflows) */
    if (h[5] < -(1 << 24) || h[5] > (1 << 24)) {
        loom_log(LOOM_LOG_ERROR, "checkpoint: vocab size %d is out of range (magnitude 1..%d)", h[5], 1 << 24);
        return LOOM_ERR_FORMAT;
    }
    *c = (struct llama2c_config){h[0], h[1], h[2], h[3], h[4], h[5] < 0 ? -h[5] : h[5], h[6], h[5] > 0};
    const int32_t lim = 1 << 20;
    if (c->dim <= 0 || c->dim > lim || c->hidden_dim <= 0 || c->hidden_dim > lim || c->n_layers <= 0 || c->n_layers > 4096 ||
        c->n_heads <= 0 || c->n_kv_heads <= 0 || c->vocab_size <= 0 || c->vocab_size > (1 << 24) || c->seq_len <= 0 ||
        c->seq_len > (1 << 24) || c->dim % c->n_heads || c->n_heads % c->n_kv_heads || (c->dim / c->n_heads) % 2) {
        loom_log(LOOM_LOG_ERROR, "checkpoint: header (dim %d, hidden %d, layers %d, heads %d, kv heads %d, vocab %d, seq %d) is invalid",
                 h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
        return LOOM_ERR_FORMAT;
    }
    uint64_t dim = (uint64_t)c->dim, hid = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers;
    uint64_t kv = dim / (uint64_t)c->n_heads * (uint64_t)c->n_kv_heads, head = dim / (uint64_t)c->n_heads;
    uint64_t t = 0;
    bool ok = mul_ok((uint64_t)c->vocab_size, dim, &counts[W_EMBD]) && mul_ok(L, dim, &counts[W_RMS_ATT]) &&
              mul_ok(L, dim * dim, &counts[W_Q]) && mul_ok(L, dim * kv, &counts[W_K]) && mul_ok(L, dim * kv, &counts[W_V]) &&
              mul_ok(L, dim * dim, &counts[W_O]) && mul_ok(L, dim, &counts[W_RMS_FFN]) && mul_ok(L, hid * dim, &counts[W_1]) &&
              mul_ok(L, dim * hid, &counts[W_2]) && mul_ok(L, hid * dim, &counts[W_3]) &&
              mul_ok((uint64_t)c->seq_len, head / 2, &t);
    counts[W_RMS_FINAL] = dim;
    counts[W_FREQ_RE] = counts[W_FREQ_IM] = t;
    counts[W_CLS] = c->shared_classifier ? 0 : counts[W_EMBD];
    uint64_t total = 0;
    for (int i = 0; ok && i < W_COUNT; i++) {
        ok = counts[i] <= UINT64_MAX / 4 && total + counts[i] * 4 >= total;
        total += counts[i] * 4;
    }
    if (!ok || total > size - 28) {
        loom_log(LOOM_LOG_ERROR, "checkpoint: the header promises %llu bytes of weights, the file has %zu",
                 (unsigned long long)total, size - 28);
        return LOOM_ERR_FORMAT;
    }
    /* bytes left over mean the header does not describe the weights (a wrong size would read every
     * tensor from the wrong place), so they are refused, not skipped */
    uint64_t extra = (uint64_t)(size - 28) - total;
    if (extra > 0 && c->shared_classifier && extra == counts[W_EMBD] * 4) {
        loom_log(LOOM_LOG_ERROR, "checkpoint: %llu bytes after the weights the header describes: the size of a separate classifier, but "
                 "the header's positive vocab size says the classifier is shared", (unsigned long long)extra);
        return LOOM_ERR_FORMAT;
    }
    if (extra > 0) {
        loom_log(LOOM_LOG_ERROR, "checkpoint: %llu bytes after the weights the header describes (dim %d, hidden %d, layers %d, heads %d, "
                 "kv heads %d, vocab %d, seq %d): the header does not match the weights", (unsigned long long)extra, c->dim,
                 c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len);
        return LOOM_ERR_FORMAT;
    }
    return LOOM_OK;
}

static enum loom_status set_metadata(struct loom_gguf_writer * w, const struct llama2c_config * c, const char * name) {
    enum loom_status st = LOOM_OK;
#define SET(call) if (st == LOOM_OK) st = (call)
    SET(loom_gguf_writer_set_str(w, "general.architecture", "llama"));
    SET(loom_gguf_writer_set_str(w, "general.name", name));
    SET(loom_gguf_writer_set_u32(w, "general.file_type", 0));
    SET(loom_gguf_writer_set_u32(w, "llama.context_length", (uint32_t)c->seq_len));
    SET(loom_gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)c->dim));
    SET(loom_gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden_dim));
    SET(loom_gguf_writer_set_u32(w, "llama.block_count", (uint32_t)c->n_layers));
    SET(loom_gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads));
    SET(loom_gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads));
    SET(loom_gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)(c->dim / c->n_heads)));
    SET(loom_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f));
    SET(loom_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f));
#undef SET
    return st;
}

/* tokenizer.ggml.* from a vocabulary (GGUF conventions are the vocabulary's own). */
enum loom_status loom_vocab_write_gguf(const struct loom_vocab * v, struct loom_gguf_writer * w);

enum loom_status loom_vocab_write_gguf(const struct loom_vocab * v, struct loom_gguf_writer * w) {
    int32_t n = loom_vocab_n_tokens(v);
    const char ** texts = malloc((size_t)n * sizeof *texts);
    size_t * lens = malloc((size_t)n * sizeof *lens);
    float * scores = malloc((size_t)n * sizeof *scores);
    int32_t * types = malloc((size_t)n * sizeof *types);
    enum loom_status st = texts && lens && scores && types ? LOOM_OK : LOOM_ERR_OOM;
    for (int32_t i = 0; st == LOOM_OK && i < n; i++) {
        texts[i] = loom_vocab_get_text(v, i, &lens[i]);
        scores[i] = loom_vocab_get_score(v, i);
        types[i] = (int32_t)loom_vocab_get_type(v, i);
    }
#define SET(call) if (st == LOOM_OK) st = (call)
    SET(loom_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    SET(loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", texts, lens, (size_t)n));
    SET(loom_gguf_writer_set_arr_data(w, "tokenizer.ggml.scores", LOOM_GGUF_TYPE_FLOAT32, scores, (size_t)n));
    SET(loom_gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", LOOM_GGUF_TYPE_INT32, types, (size_t)n));
    if (loom_vocab_bos(v) >= 0) SET(loom_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)loom_vocab_bos(v)));
    if (loom_vocab_eos(v) >= 0) SET(loom_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)loom_vocab_eos(v)));
    if (loom_vocab_unk(v) >= 0) SET(loom_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)loom_vocab_unk(v)));
#undef SET
    /* the writer copies arrays when they are set */
    free(texts);
    free(lens);
    free(scores);
    free(types);
    return st;
}

static enum loom_status add_tensors(struct loom_gguf_writer * w, const struct llama2c_config * c, const float * p,
                                    const uint64_t counts[W_COUNT]) {
    const float * arr[W_COUNT];
    for (int i = 0; i < W_COUNT; i++) {
        arr[i] = p;
        p += counts[i];
    }
    const int64_t dim = c->dim, hid = c->hidden_dim, kv = (int64_t)c->dim / c->n_heads * c->n_kv_heads;
    enum loom_status st = LOOM_OK;
    char name[LOOM_MAX_NAME];
#define ADD2(nm, src, ne0, ne1) do { int64_t ne[2] = {ne0, ne1}; if (st == LOOM_OK) st = loom_gguf_writer_add_tensor(w, nm, LOOM_TYPE_F32, ne1 > 1 ? 2 : 1, ne, src); } while (0)
    ADD2("token_embd.weight", arr[W_EMBD], dim, (int64_t)c->vocab_size);
    /* per layer: GGUF name, llama2.c array, [ne0, ne1] (one layer's slice is ne0 * ne1 floats) */
    const struct { const char * suffix; int w; int64_t ne0, ne1; } per_layer[] = {
        {"attn_norm", W_RMS_ATT, dim, 1}, {"attn_q", W_Q, dim, dim},        {"attn_k", W_K, dim, kv},
        {"attn_v", W_V, dim, kv},         {"attn_output", W_O, dim, dim},   {"ffn_norm", W_RMS_FFN, dim, 1},
        {"ffn_gate", W_1, dim, hid},      {"ffn_down", W_2, hid, dim},      {"ffn_up", W_3, dim, hid},
    };
    for (int64_t l = 0; l < c->n_layers; l++) {
        for (size_t t = 0; t < sizeof per_layer / sizeof per_layer[0]; t++) {
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, per_layer[t].suffix);
            ADD2(name, arr[per_layer[t].w] + l * per_layer[t].ne0 * per_layer[t].ne1, per_layer[t].ne0, per_layer[t].ne1);
        }
    }
    ADD2("output_norm.weight", arr[W_RMS_FINAL], dim, 1);
    if (!c->shared_classifier) ADD2("output.weight", arr[W_CLS], dim, (int64_t)c->vocab_size);
#undef ADD2
    return st;
}

static const char * base_name(const char * path, char * buf, size_t size) {
    const char * b = strrchr(path, '/');
    snprintf(buf, size, "%s", b ? b + 1 : path);
    char * dot = strrchr(buf, '.');
    if (dot && dot != buf) *dot = 0;
    return buf;
}

enum loom_status loom_convert_llama2c(const char * checkpoint_path, const char * tokenizer_path, const char * out_path) {
    int fd = open(checkpoint_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block: refused below */
    if (fd < 0) {
        loom_log(LOOM_LOG_ERROR, "cannot open checkpoint '%s': %s", checkpoint_path, strerror(errno));
        return LOOM_ERR_IO;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0) {
        loom_log(LOOM_LOG_ERROR, "checkpoint '%s' is not a regular non-empty file", checkpoint_path);
        close(fd);
        return LOOM_ERR_FORMAT;
    }
    size_t size = (size_t)sb.st_size;
    uint8_t * data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) {
        loom_log(LOOM_LOG_ERROR, "cannot map checkpoint '%s': %s", checkpoint_path, strerror(errno));
        return LOOM_ERR_IO;
    }
    struct llama2c_config c;
    uint64_t counts[W_COUNT];
    struct loom_vocab * vocab = NULL;
    struct loom_gguf_writer * w = NULL;
    enum loom_status st = read_config(data, size, &c, counts);
    if (st == LOOM_OK) st = loom_vocab_load_llama2c(tokenizer_path, c.vocab_size, &vocab);
    if (st == LOOM_OK) {
        w = loom_gguf_writer_new();
        if (!w) st = LOOM_ERR_OOM;
    }
    char name[256], err[512];
    if (st == LOOM_OK) st = loom_gguf_writer_protect(w, checkpoint_path);
    if (st == LOOM_OK) st = loom_gguf_writer_protect(w, tokenizer_path);
    if (st == LOOM_OK) st = set_metadata(w, &c, base_name(checkpoint_path, name, sizeof name));
    if (st == LOOM_OK) st = loom_vocab_write_gguf(vocab, w);
    if (st == LOOM_OK) st = add_tensors(w, &c, (const float *)(data + 28), counts);
    if (st == LOOM_OK) {
        st = loom_gguf_writer_write_file(w, out_path, err, sizeof err);
        if (st != LOOM_OK) loom_log(LOOM_LOG_ERROR, "%s", err);
    }
    loom_gguf_writer_free(w);
    loom_vocab_free(vocab);
    munmap(data, size);
    return st;
}
