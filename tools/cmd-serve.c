/* cmd-serve.c -- `loom serve`: an HTTP server speaking OpenAI's API and the field's native endpoints
 * (libmicrohttpd for HTTP, cJSON for JSON): its options, the endpoints and the dispatch of requests.
 * A generation request is read in serve-request.c, answered in serve-reply.c, and generated in
 * serve-gen.c's -np slots; serve-accept.c owns the listening socket. */
#include "cli-devices.h"
#include "cli-kv.h"
#include "cli-util.h"
#include "commands.h"

#include <stdio.h>

#ifndef LOOM_HAVE_SERVE
int loom_cmd_serve(int argc, char ** argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "loom serve: this build has no HTTP server (libmicrohttpd or cJSON was missing when it was configured;\n"
                    "install libmicrohttpd-dev and libcjson-dev, or run `make deps`, then configure again)\n");
    return 1;
}
#else

#include "loom-llama.h"
#include "loom-sampler.h"
#include "serve-accept.h"
#include "serve-gen.h"
#include "serve-reply.h"
#include "serve-request.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define SERVE_BODY_MAX (1u << 20) /* bytes of a request body; more is refused with 413 */
#define SERVE_NP_MAX 256          /* slots (-np) at most */
#define SERVE_STOP_WAIT_MS 5000   /* how long a stop waits for the open connections to get their answers */

extern const char serve_page_html[]; /* serve-page.c */

struct serve_opts {
    const char * model, * host, * api_key, * alias;
    long long port, n_ctx, n_gpu_layers, n_parallel, n_threads, queue_max, timeout;
    bool metrics, check_tensors;
    enum loom_llama_flash_attn flash_attn;
};

static struct serve_opts O;

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom serve -m MODEL.gguf [options]\n"
            "\n"
            "An HTTP server: OpenAI's /v1/chat/completions, /v1/completions and /v1/models, and /completion,\n"
            "/tokenize, /detokenize, /props, /slots, /health, /metrics and a chat page at /. SIGTERM or Ctrl-C stops it.\n"
            "\n"
            "  -m, --model FILE        GGUF model (required)\n"
            "      --host ADDR         address to listen on (default 127.0.0.1)\n"
            "      --port N            port (default 8080; 0: a free one, printed on stderr)\n"
            "  -c, --ctx-size N        context size in tokens, of all slots together (default: the training\n"
            "                          context, at most 4096; 0 the same); each slot holds N / np\n"
            "  -np, --parallel N       slots: requests generated at once, their tokens decoded in one batch (default 1)\n"
            "  -ngl, --n-gpu-layers N  layers to offload (default 0), or auto: as many as the device's free memory holds\n"
            "  -t, --threads N         CPU threads (default: LOOM_N_THREADS, else all cores)\n"
            "  -fa, --flash-attn [on|off|auto]  the fused attention op (default auto; a bare -fa: on)\n"
            "      --check-tensors     refuse a model with a NaN or infinite F32, F16 or BF16 weight\n"
            "      --api-key KEY       require 'Authorization: Bearer KEY' (not on /health and /)\n"
            "      --metrics           serve /metrics (Prometheus text)\n"
            "      --alias NAME        the model's name in the API (default: the file name)\n"
            "      --queue-max N       requests that may wait while every slot is busy; more get 503 (default 64)\n"
            "  -to, --timeout N        seconds a connection may stay silent (its request not whole, its answer\n"
            "                          not read) before it is closed; a body short of its Content-Length gets 408 (default 30)\n"
            "  -h, --help              this help\n"
            "\n" CLI_LONG_OPTION_HELP);
}

enum { O_HOST = 256, O_PORT, O_NP, O_NGL, O_KEY, O_METRICS, O_ALIAS, O_QUEUE, O_TIMEOUT, O_FA, O_CHECK_TENSORS };
static const struct option long_opts[] = {
    {"model", required_argument, 0, 'm'},      {"host", required_argument, 0, O_HOST},
    {"port", required_argument, 0, O_PORT},    {"ctx-size", required_argument, 0, 'c'},
    {"np", required_argument, 0, O_NP},        {"parallel", required_argument, 0, O_NP},
    {"ngl", required_argument, 0, O_NGL},      {"n-gpu-layers", required_argument, 0, O_NGL},
    {"threads", required_argument, 0, 't'},    {"api-key", required_argument, 0, O_KEY},
    {"metrics", no_argument, 0, O_METRICS},    {"alias", required_argument, 0, O_ALIAS},
    {"queue-max", required_argument, 0, O_QUEUE}, {"timeout", required_argument, 0, O_TIMEOUT},
    {"to", required_argument, 0, O_TIMEOUT},   {"fa", optional_argument, 0, O_FA},
    {"flash-attn", optional_argument, 0, O_FA}, {"check-tensors", no_argument, 0, O_CHECK_TENSORS},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

static int parse(int argc, char ** argv) {
    O = (struct serve_opts){.host = "127.0.0.1", .port = 8080, .n_ctx = -1, .n_parallel = 1, .queue_max = 64, .timeout = 30,
                            .flash_attn = LOOM_LLAMA_FLASH_ATTN_AUTO};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:c:t:h", long_opts)) != -1) {
        bool ok = true;
        switch (c) {
        case 'm': O.model = optarg; break;
        case O_HOST: O.host = optarg; break;
        case O_PORT: ok = cli_parse_int("serve", "--port", optarg, 0, 65535, &O.port); break;
        case 'c': ok = cli_parse_int("serve", "-c", optarg, 0, 1 << 24, &O.n_ctx); break;
        case O_NP: ok = cli_parse_int("serve", "-np", optarg, 1, SERVE_NP_MAX, &O.n_parallel); break;
        case O_NGL: ok = cli_parse_ngl("serve", optarg, &O.n_gpu_layers); break;
        case 't': ok = cli_parse_int("serve", "-t", optarg, 1, 1024, &O.n_threads); break;
        case O_KEY: O.api_key = optarg; break;
        case O_METRICS: O.metrics = true; break;
        case O_FA: ok = cli_parse_flash_attn("serve", "--flash-attn", optarg, &O.flash_attn); break;
        case O_CHECK_TENSORS: O.check_tensors = true; break;
        case O_ALIAS: O.alias = optarg; break;
        case O_QUEUE: ok = cli_parse_int("serve", "--queue-max", optarg, 0, 1 << 20, &O.queue_max); break;
        case O_TIMEOUT: ok = cli_parse_int("serve", "--timeout", optarg, 1, 86400, &O.timeout); break;
        case 'h': usage(stdout); return 2;
        default: cli_option_error("serve", c); return 1;
        }
        if (!ok) return 1;
    }
    if (!cli_no_more_args("serve", argc, argv)) return 1;
    if (!O.model) {
        fprintf(stderr, "loom serve: no model given (-m MODEL.gguf)\n");
        return 1;
    }
    if (O.api_key && !*O.api_key) {
        fprintf(stderr, "loom serve: --api-key must not be empty\n");
        return 1;
    }
    if (!O.alias) {
        const char * s = strrchr(O.model, '/');
        O.alias = s ? s + 1 : O.model;
    }
    return 0;
}

/* ---------------------------------------------------------------- responses */

/* 'allow': the Allow header's value (a 405), or NULL. */
static enum MHD_Result send_text_allow(struct MHD_Connection * conn, unsigned status, const char * type, const char * body, size_t len,
                                       const char * allow) {
    struct MHD_Response * r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (allow) MHD_add_response_header(r, "Allow", allow);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    /* one request per connection: each request head is then read ahead by serve-accept.c */
    MHD_add_response_header(r, "Connection", "close");
    const enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_text(struct MHD_Connection * conn, unsigned status, const char * type, const char * body, size_t len) {
    return send_text_allow(conn, status, type, body, len, NULL);
}

/* Sends 'j' (consumed) as JSON. */
static enum MHD_Result send_json(struct MHD_Connection * conn, unsigned status, cJSON * j) {
    char * s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!s) return send_text(conn, 500, SERVE_JSON_TYPE, "{\"error\":{\"code\":500,\"message\":\"out of memory\",\"type\":\"server_error\"}}", 71);
    const enum MHD_Result r = send_text(conn, status, SERVE_JSON_TYPE, s, strlen(s));
    cJSON_free(s);
    return r;
}

static enum MHD_Result send_error(struct MHD_Connection * conn, unsigned status, const char * fmt, ...) __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_error(struct MHD_Connection * conn, unsigned status, const char * fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_json(conn, status, serve_error_json(status, msg));
}

/* ---------------------------------------------------------------- endpoints */

static enum MHD_Result do_generate(struct MHD_Connection * conn, const cJSON * root, enum serve_api api) {
    struct serve_req g = {.api = api, .created = (long)time(NULL), .model = O.alias};
    static unsigned long counter;
    snprintf(g.id, sizeof g.id, "%s-%lx%lx", api == SERVE_API_CHAT ? "chatcmpl" : "cmpl", (unsigned long)g.created, __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    char err[256];
    const unsigned st = serve_request_build(root, &g, err, sizeof err);
    if (st) {
        if (g.job) serve_job_unref(g.job);
        return send_error(conn, st, "%s", err);
    }
    if (!serve_gen_submit(g.job)) {
        serve_job_unref(g.job);
        if (serve_gen_stopping()) return send_error(conn, 503, "the server is stopping");
        if (!O.queue_max) return send_error(conn, 503, "the server is busy: every slot is busy and queueing is off (--queue-max 0)");
        return send_error(conn, 503, "the server is busy: every slot is busy and %lld %s waiting already", O.queue_max,
                          O.queue_max == 1 ? "request is" : "requests are");
    }
    if (!g.stream) {
        const union MHD_ConnectionInfo * ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!serve_gen_wait_client(g.job, ci ? ci->connect_fd : -1)) { /* the client went away: its slot is freed */
            serve_job_unref(g.job);
            return MHD_NO;
        }
        enum MHD_Result r;
        if (g.job->finish == SERVE_FAILED) r = send_error(conn, 500, "generation failed");
        else if (g.job->finish == SERVE_CANCELLED) r = send_error(conn, 503, "the server is stopping");
        else r = send_json(conn, 200, serve_reply_json(&g));
        serve_job_unref(g.job);
        return r;
    }
    struct MHD_Response * r = serve_reply_stream(&g);
    if (!r) return send_error(conn, 500, "out of memory");
    const enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static bool valid_utf8(const char * s, size_t n);

/* /tokenize: 'add_special' puts the vocabulary's BOS first (and EOS last where it adds one);
 * 'with_pieces' gives each token as {"id": ID, "piece": its text}, the piece an array of its byte
 * values where it is not valid UTF-8 on its own. */
static enum MHD_Result do_tokenize(struct MHD_Connection * conn, const cJSON * root) {
    const cJSON * c = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!cJSON_IsString(c)) return send_error(conn, 400, "'content' must be a string");
    char err[256];
    bool special = false, add_special = false, with_pieces = false;
    if (!serve_json_bool(root, "parse_special", &special, err, sizeof err) || !serve_json_bool(root, "add_special", &add_special, err, sizeof err) ||
        !serve_json_bool(root, "with_pieces", &with_pieces, err, sizeof err))
        return send_error(conn, 400, "%s", err);
    const struct loom_vocab * v = loom_model_vocab(serve_gen_model());
    const bool bos = add_special && loom_vocab_bos(v) >= 0;
    const size_t len = strlen(c->valuestring);
    int32_t k = loom_tokenize(v, c->valuestring, len, bos, special, NULL, 0);
    if (k == LOOM_TOKEN_ERROR) return send_error(conn, 400, "the text cannot be tokenized");
    k = k < 0 ? -k : k;
    int32_t * t = malloc(((size_t)k + 1) * sizeof *t);
    if (!t || loom_tokenize(v, c->valuestring, len, bos, special, t, k + 1) != k) {
        free(t);
        return send_error(conn, 500, "out of memory");
    }
    cJSON * r = cJSON_CreateObject();
    cJSON * a = cJSON_AddArrayToObject(r, "tokens");
    for (int32_t i = 0; i < k; i++) {
        if (!with_pieces) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber(t[i]));
            continue;
        }
        char piece[256];
        int32_t n = loom_token_to_piece(v, t[i], piece, (int32_t)sizeof piece - 1, true);
        if (n < 0) n = 0; /* a piece longer than any vocabulary holds: none */
        piece[n] = 0;
        cJSON * e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", t[i]);
        if (valid_utf8(piece, (size_t)n) && !memchr(piece, 0, (size_t)n)) {
            cJSON_AddStringToObject(e, "piece", piece);
        } else {
            cJSON * b = cJSON_AddArrayToObject(e, "piece");
            for (int32_t q = 0; q < n; q++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)piece[q]));
        }
        cJSON_AddItemToArray(a, e);
    }
    free(t);
    return send_json(conn, 200, r);
}

static enum MHD_Result do_detokenize(struct MHD_Connection * conn, const cJSON * root) {
    const cJSON * a = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsArray(a)) return send_error(conn, 400, "'tokens' must be an array of token ids");
    const struct loom_vocab * v = loom_model_vocab(serve_gen_model());
    const int32_t n_vocab = loom_vocab_n_tokens(v);
    const int n = cJSON_GetArraySize(a);
    int32_t * t = malloc(((size_t)n + 1) * sizeof *t);
    if (!t) return send_error(conn, 500, "out of memory");
    int i = 0;
    const cJSON * it;
    cJSON_ArrayForEach(it, a) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 || it->valuedouble >= n_vocab) {
            free(t);
            return send_error(conn, 400, "tokens[%d] is not a token id in [0, %d)", i, n_vocab);
        }
        t[i++] = (int32_t)it->valuedouble;
    }
    /* the streaming detokenizer, as generation uses: bytes that form no UTF-8 character (byte
     * tokens) come out as U+FFFD, so the JSON string is valid UTF-8 */
    struct loom_detok * d = NULL;
    char * s = NULL;
    size_t len = 0, cap = 0;
    bool ok = loom_detok_new(v, 0, &d) == LOOM_OK;
    for (int k = 0; ok && k <= n; k++) {
        const char * piece;
        size_t plen;
        ok = (k < n ? loom_detok_push(d, t[k], &piece, &plen) : loom_detok_flush(d, &piece, &plen)) == LOOM_OK;
        if (ok && len + plen + 1 > cap) {
            cap = (len + plen + 1) * 2;
            char * b = realloc(s, cap);
            if (b) s = b;
            else ok = false;
        }
        if (ok) memcpy(s + len, piece, plen), len += plen, s[len] = 0;
    }
    loom_detok_free(d);
    free(t);
    if (!ok) {
        free(s);
        return send_error(conn, 500, "out of memory");
    }
    cJSON * r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "content", s);
    free(s);
    return send_json(conn, 200, r);
}

static enum MHD_Result do_models(struct MHD_Connection * conn) {
    const struct loom_model * m = serve_gen_model();
    cJSON * r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "object", "list");
    cJSON * d = cJSON_AddArrayToObject(r, "data");
    cJSON * e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", O.alias);
    cJSON_AddStringToObject(e, "object", "model");
    cJSON_AddNumberToObject(e, "created", (double)time(NULL));
    cJSON_AddStringToObject(e, "owned_by", "loom");
    cJSON * meta = cJSON_AddObjectToObject(e, "meta");
    cJSON_AddNumberToObject(meta, "n_vocab", loom_model_hparams(m)->n_vocab);
    cJSON_AddNumberToObject(meta, "n_ctx_train", loom_model_hparams(m)->n_ctx_train);
    cJSON_AddNumberToObject(meta, "n_ctx", serve_gen_n_ctx());
    cJSON_AddNumberToObject(meta, "n_params", (double)loom_model_n_params(m));
    cJSON_AddNumberToObject(meta, "size", (double)loom_model_size(m));
    cJSON_AddItemToArray(d, e);
    return send_json(conn, 200, r);
}

/* A float setting as JSON shows it: its shortest decimal (0.8, not 0.800000011920929). */
static double float_json(float f) {
    char b[32];
    snprintf(b, sizeof b, "%.7g", (double)f);
    return strtod(b, NULL);
}

/* A special token's text, or "" where the vocabulary has none. */
static void add_token_text(cJSON * o, const char * key, int32_t id) {
    char piece[256] = "";
    const int32_t n = id >= 0 ? loom_token_to_piece(loom_model_vocab(serve_gen_model()), id, piece, (int32_t)sizeof piece - 1, true) : 0;
    piece[n > 0 ? n : 0] = 0;
    cJSON_AddStringToObject(o, key, piece);
}

/* GET /props: what llama-server's clients read of it -- the default generation settings (with a
 * slot's n_ctx), total_slots, the model's path and alias, its chat template (the GGUF's text, ""
 * without one) and BOS / EOS text. */
static enum MHD_Result do_props(struct MHD_Connection * conn) {
    const struct loom_model * m = serve_gen_model();
    const struct loom_vocab * v = loom_model_vocab(m);
    const struct loom_sampler_params sp = loom_sampler_default_params();
    cJSON * r = cJSON_CreateObject();
    cJSON * dg = cJSON_AddObjectToObject(r, "default_generation_settings");
    cJSON_AddNumberToObject(dg, "n_ctx", serve_gen_n_ctx());
    cJSON * pa = cJSON_AddObjectToObject(dg, "params");
    cJSON_AddNumberToObject(pa, "n_predict", -1);
    cJSON_AddNumberToObject(pa, "temperature", float_json(sp.temp));
    cJSON_AddNumberToObject(pa, "top_k", sp.top_k);
    cJSON_AddNumberToObject(pa, "top_p", float_json(sp.top_p));
    cJSON_AddNumberToObject(pa, "min_p", float_json(sp.min_p));
    cJSON_AddNumberToObject(pa, "repeat_last_n", sp.repeat_last_n);
    cJSON_AddNumberToObject(pa, "repeat_penalty", float_json(sp.repeat_penalty));
    cJSON_AddNumberToObject(pa, "presence_penalty", float_json(sp.presence_penalty));
    cJSON_AddNumberToObject(pa, "frequency_penalty", float_json(sp.frequency_penalty));
    struct serve_stats st;
    serve_gen_stats(&st);
    cJSON_AddNumberToObject(r, "total_slots", st.n_slots);
    cJSON_AddStringToObject(r, "model_path", O.model);
    cJSON_AddStringToObject(r, "model_alias", O.alias);
    const char * tmpl = loom_model_chat_template(m);
    cJSON_AddStringToObject(r, "chat_template", tmpl ? tmpl : "");
    add_token_text(r, "bos_token", loom_vocab_bos(v));
    add_token_text(r, "eos_token", loom_vocab_eos(v));
    return send_json(conn, 200, r);
}

/* GET /slots: each slot's id, context size and whether it generates now, as llama-server lists them. */
static enum MHD_Result do_slots(struct MHD_Connection * conn) {
    bool busy[SERVE_NP_MAX];
    const int n = serve_gen_slots_busy(busy, SERVE_NP_MAX);
    cJSON * r = cJSON_CreateArray();
    for (int i = 0; i < n && i < SERVE_NP_MAX; i++) {
        cJSON * sl = cJSON_CreateObject();
        cJSON_AddNumberToObject(sl, "id", i);
        cJSON_AddNumberToObject(sl, "n_ctx", serve_gen_n_ctx());
        cJSON_AddBoolToObject(sl, "is_processing", busy[i]);
        cJSON_AddItemToArray(r, sl);
    }
    return send_json(conn, 200, r);
}

static enum MHD_Result do_metrics(struct MHD_Connection * conn) {
    if (!O.metrics) return send_error(conn, 501, "this server does not serve /metrics (start it with --metrics)");
    struct serve_stats s;
    serve_gen_stats(&s);
    char b[4096];
    const int n = snprintf(b, sizeof b,
                           "# HELP loom:prompt_tokens_total Prompt tokens evaluated.\n# TYPE loom:prompt_tokens_total counter\nloom:prompt_tokens_total %llu\n"
                           "# HELP loom:prompt_seconds_total Seconds spent evaluating prompts.\n# TYPE loom:prompt_seconds_total counter\nloom:prompt_seconds_total %.6f\n"
                           "# HELP loom:tokens_predicted_total Tokens generated.\n# TYPE loom:tokens_predicted_total counter\nloom:tokens_predicted_total %llu\n"
                           "# HELP loom:tokens_predicted_seconds_total Seconds spent generating.\n# TYPE loom:tokens_predicted_seconds_total counter\nloom:tokens_predicted_seconds_total %.6f\n"
                           "# HELP loom:requests_processing Requests being generated.\n# TYPE loom:requests_processing gauge\nloom:requests_processing %d\n"
                           "# HELP loom:requests_deferred Requests waiting for a slot.\n# TYPE loom:requests_deferred gauge\nloom:requests_deferred %d\n"
                           "# HELP loom:slots Slots (-np).\n# TYPE loom:slots gauge\nloom:slots %d\n"
                           "# HELP loom:slots_idle Slots without a request.\n# TYPE loom:slots_idle gauge\nloom:slots_idle %d\n"
                           "# HELP loom:n_decode_total Batches decoded (one step of every busy slot).\n# TYPE loom:n_decode_total counter\nloom:n_decode_total %llu\n"
                           "# HELP loom:n_tokens_per_decode Tokens per decoded batch, on average.\n# TYPE loom:n_tokens_per_decode gauge\nloom:n_tokens_per_decode %.3f\n"
                           "# HELP loom:kv_cache_tokens KV cache cells in use (the slots' cached tokens).\n# TYPE loom:kv_cache_tokens gauge\nloom:kv_cache_tokens %d\n"
                           "# HELP loom:kv_cache_usage_ratio KV cache cells in use, of all.\n# TYPE loom:kv_cache_usage_ratio gauge\nloom:kv_cache_usage_ratio %.6f\n",
                           (unsigned long long)s.n_prompt_tokens, s.t_prompt_s, (unsigned long long)s.n_gen_tokens, s.t_gen_s, s.processing, s.deferred,
                           s.n_slots, s.n_slots - s.processing, (unsigned long long)s.n_decode_calls,
                           s.n_decode_calls ? (double)s.n_decode_tokens / (double)s.n_decode_calls : 0.0, s.kv_used,
                           s.kv_size > 0 ? (double)s.kv_used / s.kv_size : 0.0);
    return send_text(conn, 200, "text/plain; version=0.0.4", b, (size_t)n);
}

/* ---------------------------------------------------------------- dispatch */

struct conn_ctx {
    char * body;
    size_t len, cap;
    bool too_large;
    bool answered; /* the whole request (its body too) has come, or an answer is queued already */
};

/* 'Authorization: Bearer KEY': the scheme's name is case-insensitive (RFC 9110 11.1), one or more
 * spaces after it; the key is compared exactly. */
static bool authorized(struct MHD_Connection * conn) {
    if (!O.api_key) return true;
    const char * h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer", 6) || (h[6] != ' ' && h[6] != '\t')) return false;
    h += 6;
    while (*h == ' ' || *h == '\t') h++;
    return !strcmp(h, O.api_key);
}

/* True when a JSON text holds the escape \u0000 in a string: cJSON's strings end at a NUL, so the
 * rest of the string would be lost without a word. Such a body is refused (400), not truncated. */
static bool json_has_nul(const char * s, size_t n) {
    if (memchr(s, 0, n)) return true;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) return true;
        i++; /* the escaped character (a backslash too) */
    }
    return false;
}

/* The Content-Length the client announced, or -1 when it sent none (or one MHD will refuse). */
static long long content_length(struct MHD_Connection * conn) {
    const char * h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!h) return -1;
    char * end = NULL;
    errno = 0;
    const long long v = strtoll(h, &end, 10);
    return errno || end == h || v < 0 ? -1 : v;
}

/* The endpoints GET serves (the others take POST). */
static bool get_endpoint(const char * url) {
    static const char * const urls[] = {"/health", "/v1/health", "/", "/index.html", "/v1/models", "/models", "/metrics", "/props", "/slots"};
    for (size_t i = 0; i < sizeof urls / sizeof *urls; i++) {
        if (!strcmp(url, urls[i])) return true;
    }
    return false;
}

/* 405 for a known endpoint asked with another method than 'allow' (with the Allow header, RFC 9110 15.5.6). */
static enum MHD_Result send_method_error(struct MHD_Connection * conn, const char * method, const char * url, const char * allow) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s does not take %s (only %s)", url, method, allow);
    cJSON * j = serve_error_json(405, msg);
    char * body = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!body) return MHD_NO;
    const enum MHD_Result r = send_text_allow(conn, 405, SERVE_JSON_TYPE, body, strlen(body), allow);
    cJSON_free(body);
    return r;
}

/* True when s[0..n) is valid UTF-8 (RFC 3629): a JSON text must be (RFC 8259 8.1), and strings
 * taken from it are sent back (stop strings, prompts cut at them). */
static bool valid_utf8(const char * s, size_t n) {
    for (size_t i = 0; i < n;) {
        const size_t k = cli_utf8_len((const unsigned char *)s + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

static enum MHD_Result on_request(void * cls, struct MHD_Connection * conn, const char * url, const char * method, const char * version,
                                  const char * upload, size_t * upload_size, void ** con_cls) {
    (void)cls, (void)version;
    struct conn_ctx * c = *con_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        *con_cls = c;
        /* a body announced past the limit is refused at once, before the client sends it */
        if (content_length(conn) > (long long)SERVE_BODY_MAX) {
            c->too_large = true;
            c->answered = true;
            if (!authorized(conn)) return send_error(conn, 401, "invalid or missing API key (send 'Authorization: Bearer KEY')");
            return send_error(conn, 413, "the request body is larger than %u bytes", SERVE_BODY_MAX);
        }
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        if (!c->too_large && c->len + *upload_size > SERVE_BODY_MAX) c->too_large = true, free(c->body), c->body = NULL, c->len = 0;
        if (!c->too_large) {
            if (c->len + *upload_size + 1 > c->cap) {
                size_t cap = c->cap ? c->cap : 4096;
                while (cap < c->len + *upload_size + 1) cap *= 2;
                char * b = realloc(c->body, cap);
                if (!b) return MHD_NO;
                c->body = b, c->cap = cap;
            }
            memcpy(c->body + c->len, upload, *upload_size);
            c->len += *upload_size;
            c->body[c->len] = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    c->answered = true;
    /* HEAD is GET without the body (RFC 9110 9.3.2; libmicrohttpd leaves the body out) */
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(method, "OPTIONS")) { /* a browser's preflight */
        struct MHD_Response * r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Connection", "close");
        const enum MHD_Result ret = MHD_queue_response(conn, 204, r);
        MHD_destroy_response(r);
        return ret;
    }
    const bool health = !strcmp(url, "/health") || !strcmp(url, "/v1/health"), page = !strcmp(url, "/") || !strcmp(url, "/index.html");
    /* the endpoints that need no key: a wrong method is told so, not asked for a key */
    if ((health || page) && !get) return send_method_error(conn, method, url, "GET, HEAD");
    if (health) {
        const int rd = serve_gen_ready();
        if (rd == 1) {
            struct serve_stats st;
            serve_gen_stats(&st);
            char b[128];
            const int n = snprintf(b, sizeof b, "{\"status\":\"ok\",\"slots_idle\":%d,\"slots_processing\":%d,\"requests_deferred\":%d}",
                                   st.n_slots - st.processing, st.processing, st.deferred);
            return send_text(conn, 200, SERVE_JSON_TYPE, b, (size_t)n);
        }
        return send_error(conn, 503, "Loading model");
    }
    if (page) return send_text(conn, 200, "text/html; charset=utf-8", serve_page_html, strlen(serve_page_html));
    if (!authorized(conn)) return send_error(conn, 401, "invalid or missing API key (send 'Authorization: Bearer KEY')");
    if (c->too_large) return send_error(conn, 413, "the request body is larger than %u bytes", SERVE_BODY_MAX);
    if (serve_gen_ready() != 1) return send_error(conn, 503, "Loading model");
    if (get && (!strcmp(url, "/v1/models") || !strcmp(url, "/models"))) return do_models(conn);
    if (get && !strcmp(url, "/metrics")) return do_metrics(conn);
    if (get && !strcmp(url, "/props")) return do_props(conn);
    if (get && !strcmp(url, "/slots")) return do_slots(conn);
    enum serve_api api = SERVE_API_NATIVE;
    bool gen = true;
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions")) api = SERVE_API_CHAT;
    else if (!strcmp(url, "/v1/completions")) api = SERVE_API_COMPLETIONS;
    else if (!strcmp(url, "/completion") || !strcmp(url, "/completions")) api = SERVE_API_NATIVE;
    else if (!strcmp(url, "/tokenize") || !strcmp(url, "/detokenize")) api = SERVE_API_NATIVE, gen = false;
    else if (!get_endpoint(url)) return send_error(conn, 404, "no endpoint %s %s", method, url);
    else return send_method_error(conn, method, url, "GET, HEAD");
    if (!post) return send_method_error(conn, method, url, "POST");
    if (c->body && json_has_nul(c->body, c->len)) return send_error(conn, 400, "the body holds a NUL character (\\u0000), which is refused");
    if (c->body && !valid_utf8(c->body, c->len)) return send_error(conn, 400, "the body is not valid UTF-8");
    cJSON * root = c->body ? cJSON_ParseWithLength(c->body, c->len) : NULL;
    if (!root) return send_error(conn, 400, "the body is not valid JSON");
    enum MHD_Result r;
    if (!cJSON_IsObject(root)) r = send_error(conn, 400, "the body must be a JSON object");
    else if (gen) r = do_generate(conn, root, api);
    else r = !strcmp(url, "/tokenize") ? do_tokenize(conn, root) : do_detokenize(conn, root);
    cJSON_Delete(root);
    return r;
}

static char * g_timeout_body; /* the 408's JSON */

static void on_completed(void * cls, struct MHD_Connection * conn, void ** con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    struct conn_ctx * c = *con_cls;
    /* a request whose body stopped short of its Content-Length for --timeout seconds: libmicrohttpd
     * closes the connection without a word, and tells it here, before it closes the socket; the
     * 408 is written on it (nothing else was: no answer is queued before the whole body has come) */
    if (c && !c->answered && toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED && g_timeout_body) {
        const union MHD_ConnectionInfo * ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) serve_answer(ci->connect_fd, "408 Request Timeout", g_timeout_body, false);
    }
    if (c) free(c->body), free(c);
    *con_cls = NULL;
}

static void on_mhd_log(void * cls, const char * fmt, va_list ap) {
    (void)cls, (void)fmt, (void)ap; /* the library's notes on misbehaving clients are not the operator's errors */
}

int loom_cmd_serve(int argc, char ** argv) {
    const int pr = parse(argc, argv);
    if (pr) return pr == 2 && cli_stdout_ok("serve") ? 0 : 1;
    cli_log_setup(LOOM_LOG_WARN);
    if (access(O.model, R_OK) != 0) {
        fprintf(stderr, "loom serve: cannot open model '%s': %s\n", O.model, strerror(errno));
        return 1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, * ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%lld", O.port);
    const int gai = getaddrinfo(O.host, port, &hints, &ai);
    if (gai) {
        fprintf(stderr, "loom serve: --host %s: %s\n", O.host, gai_strerror(gai));
        return 1;
    }
    /* the port taken first (a port in use is told at once, before the model loads), then the model
     * and its KV cache made before it listens: an error is the one line, no port opened */
    unsigned bound = 0;
    const int lfd = serve_bind(ai, &bound);
    freeaddrinfo(ai);
    if (lfd < 0) {
        fprintf(stderr, "loom serve: cannot listen on %s port %lld: %s\n", O.host, O.port, strerror(errno));
        return 1;
    }
    const struct serve_gen_params gp = {.model_path = O.model, .n_ctx = (int32_t)O.n_ctx, .n_parallel = (int32_t)O.n_parallel,
                                        .n_gpu_layers = (int32_t)O.n_gpu_layers, .fit_margin = 1024,
                                        .flash_attn = O.flash_attn, .check_tensors = O.check_tensors,
                                        .n_threads = (int32_t)cli_cap_threads("serve", O.n_threads), .queue_max = (int)O.queue_max};
    if (!serve_gen_open(&gp)) {
        serve_gen_free();
        close(lfd);
        return 1;
    }
    /* SIGTERM and SIGINT go to the main thread's sigwait only: every thread started below inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* the socket is ours (serve-accept.c reads each request head ahead), the connections libmicrohttpd's */
    if (listen(lfd, 64) != 0) {
        fprintf(stderr, "loom serve: cannot listen on %s port %u: %s\n", O.host, bound, strerror(errno));
        close(lfd);
        serve_gen_free();
        return 1;
    }
    const unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                           MHD_USE_NO_LISTEN_SOCKET;
    struct MHD_Daemon * d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                                             MHD_OPTION_NOTIFY_CONNECTION, serve_accept_notify, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
                                             (unsigned)O.timeout, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(SERVE_CONN_MAX + 16),
                                             MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_END);
    char * bad_cl = serve_error_text(400, "the Content-Length header is not one decimal number");
    char msg[160];
    snprintf(msg, sizeof msg, "the request body is larger than %u bytes", SERVE_BODY_MAX);
    char * huge_cl = serve_error_text(413, msg);
    snprintf(msg, sizeof msg, "the server holds %d connections already; try again later", SERVE_CONN_MAX);
    char * busy = serve_error_text(503, msg);
    snprintf(msg, sizeof msg, "the request did not come whole within %lld s (a body shorter than its Content-Length?)", O.timeout);
    g_timeout_body = serve_error_text(408, msg);
    if (!d || !bad_cl || !huge_cl || !busy || !serve_accept_start(lfd, d, bad_cl, huge_cl, busy)) {
        fprintf(stderr, "loom serve: cannot start the HTTP server\n");
        if (d) MHD_stop_daemon(d);
        cJSON_free(bad_cl), cJSON_free(huge_cl), cJSON_free(busy), cJSON_free(g_timeout_body);
        close(lfd);
        serve_gen_free();
        return 1;
    }
    /* an IPv6 literal goes in brackets in a URL (RFC 3986 3.2.2) */
    const bool v6 = strchr(O.host, ':') != NULL;
    fprintf(stderr, "loom serve: listening on http://%s%s%s:%u\n", v6 ? "[" : "", O.host, v6 ? "]" : "", bound);
    if (!serve_gen_start()) {
        fprintf(stderr, "loom serve: cannot start the generation thread\n");
        serve_accept_stop();
        MHD_stop_daemon(d);
        cJSON_free(bad_cl), cJSON_free(huge_cl), cJSON_free(busy), cJSON_free(g_timeout_body);
        serve_gen_free();
        return 1;
    }
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "loom serve: %s: stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    serve_accept_stop(); /* no new connections; those already accepted go on */
    serve_gen_stop();    /* running and waiting requests end: a stream with its closing chunk, a whole answer 503 */
    /* every connection gets its answer before the daemon closes them (a client that does not read
     * its stream, or sends no request, is not waited for past the limit) */
    serve_accept_drain(SERVE_STOP_WAIT_MS);
    MHD_stop_daemon(d);
    serve_gen_free();
    cJSON_free(bad_cl), cJSON_free(huge_cl), cJSON_free(busy), cJSON_free(g_timeout_body);
    return 0;
}

#endif
