/* cmd-serve.c -- `loom serve`: an HTTP server speaking OpenAI's API and the field's native endpoints
 * (libmicrohttpd for HTTP, cJSON for JSON); generation runs in serve-gen.c's -np slots. */
#include "cli-devices.h"
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
#include "serve-accept.h"
#include "loom-chat.h"
#include "loom-sampler.h"
#include "serve-gen.h"

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
    bool metrics;
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
            "      --api-key KEY       require 'Authorization: Bearer KEY' (not on /health and /)\n"
            "      --metrics           serve /metrics (Prometheus text)\n"
            "      --alias NAME        the model's name in the API (default: the file name)\n"
            "      --queue-max N       requests that may wait while every slot is busy; more get 503 (default 64)\n"
            "  -to, --timeout N        seconds a connection may stay silent (its request not whole, its answer\n"
            "                          not read) before it is closed; a body short of its Content-Length gets 408 (default 30)\n"
            "  -h, --help              this help\n"
            "\n" CLI_LONG_OPTION_HELP);
}

enum { O_HOST = 256, O_PORT, O_NP, O_NGL, O_KEY, O_METRICS, O_ALIAS, O_QUEUE, O_TIMEOUT };
static const struct option long_opts[] = {
    {"model", required_argument, 0, 'm'},      {"host", required_argument, 0, O_HOST},
    {"port", required_argument, 0, O_PORT},    {"ctx-size", required_argument, 0, 'c'},
    {"np", required_argument, 0, O_NP},        {"parallel", required_argument, 0, O_NP},
    {"ngl", required_argument, 0, O_NGL},      {"n-gpu-layers", required_argument, 0, O_NGL},
    {"threads", required_argument, 0, 't'},    {"api-key", required_argument, 0, O_KEY},
    {"metrics", no_argument, 0, O_METRICS},    {"alias", required_argument, 0, O_ALIAS},
    {"queue-max", required_argument, 0, O_QUEUE}, {"timeout", required_argument, 0, O_TIMEOUT},
    {"to", required_argument, 0, O_TIMEOUT},   {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

static int parse(int argc, char ** argv) {
    O = (struct serve_opts){.host = "127.0.0.1", .port = 8080, .n_ctx = -1, .n_parallel = 1, .queue_max = 64, .timeout = 30};
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

static const char * error_type(unsigned status) {
    switch (status) {
    case 400: case 408: case 413: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return "server_error";
    }
}

static cJSON * error_json(unsigned status, const char * msg) {
    cJSON * e = cJSON_CreateObject(), * root = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "code", status);
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddItemToObject(root, "error", e);
    return root;
}

/* error_json(status, msg) as text (cJSON_free it), or NULL when out of memory. */
static char * error_text(unsigned status, const char * msg) {
    cJSON * j = error_json(status, msg);
    char * s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return s;
}

static enum MHD_Result send_error(struct MHD_Connection * conn, unsigned status, const char * fmt, ...) __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_error(struct MHD_Connection * conn, unsigned status, const char * fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_json(conn, status, error_json(status, msg));
}

/* ---------------------------------------------------------------- requests */

/* What a request asks the generator for, read from its JSON. */
enum api { API_NATIVE, API_COMPLETIONS, API_CHAT };

struct gen_req {
    enum api api;
    bool stream;
    struct serve_job * job;
    char id[40];
    long created;
};

/* Reads an optional number field into '*out' (in [lo, hi]); false (with 'err' set) for a wrong type or range. */
static bool get_num(const cJSON * o, const char * key, double lo, double hi, double * out, char * err, size_t n) {
    const cJSON * v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(err, n, "'%s' must be a number in [%g, %g]", key, lo, hi);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

/* get_num for a field that counts (tokens, a seed): a number with a fraction is refused too; the
 * bounds are written as integers ('hi_text': the upper one as text, where a double cannot hold it). */
static bool get_int_text(const cJSON * o, const char * key, double lo, double hi, const char * hi_text, double * out, char * err, size_t n) {
    const cJSON * v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi || v->valuedouble != floor(v->valuedouble)) {
        if (hi_text) snprintf(err, n, "'%s' must be an integer in [%.0f, %s]", key, lo, hi_text);
        else snprintf(err, n, "'%s' must be an integer in [%.0f, %.0f]", key, lo, hi);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static bool get_int(const cJSON * o, const char * key, double lo, double hi, double * out, char * err, size_t n) {
    return get_int_text(o, key, lo, hi, NULL, out, err, n);
}

static bool get_bool(const cJSON * o, const char * key, bool * out, char * err, size_t n) {
    const cJSON * v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) {
        snprintf(err, n, "'%s' must be a boolean", key);
        return false;
    }
    *out = cJSON_IsTrue(v);
    return true;
}

/* Tokenizes 'text' (NULL on error, reported in 'err'); 'special': template markers are tokens;
 * 'bos': BOS first where the vocabulary adds one. */
static int32_t * tokenize(const char * text, bool special, bool bos, int32_t * n, char * err, size_t en) {
    const struct loom_vocab * v = loom_model_vocab(serve_gen_model());
    const size_t len = strlen(text);
    bos = bos && loom_vocab_get_add_bos(v);
    int32_t k = loom_tokenize(v, text, len, bos, special, NULL, 0);
    if (k == LOOM_TOKEN_ERROR) {
        snprintf(err, en, "the text cannot be tokenized");
        return NULL;
    }
    k = k < 0 ? -k : k;
    int32_t * t = malloc(((size_t)k + 1) * sizeof *t);
    if (!t || loom_tokenize(v, text, len, bos, special, t, k + 1) != k) {
        free(t);
        snprintf(err, en, "out of memory");
        return NULL;
    }
    *n = k;
    return t;
}

/* A message's content as one string: a string as it is, null as "", or OpenAI's array of content
 * parts, of which only {"type":"text","text":...} is taken (the texts concatenated, in '*owned',
 * heap). NULL with 'err' set for another type or part. */
static const char * message_text(const cJSON * content, int i, char ** owned, char * err, size_t en) {
    *owned = NULL;
    if (cJSON_IsString(content)) return content->valuestring;
    if (cJSON_IsNull(content)) return "";
    if (!cJSON_IsArray(content)) {
        snprintf(err, en, "messages[%d].content must be a string or an array of content parts", i);
        return NULL;
    }
    size_t len = 0;
    int k = 0;
    const cJSON * part;
    cJSON_ArrayForEach(part, content) {
        const cJSON * type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON * text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            snprintf(err, en, "messages[%d].content[%d] is not a text part ({\"type\":\"text\",\"text\":...}); only text is supported", i, k);
            return NULL;
        }
        len += strlen(text->valuestring);
        k++;
    }
    char * s = malloc(len + 1);
    if (!s) {
        snprintf(err, en, "out of memory");
        return NULL;
    }
    len = 0;
    cJSON_ArrayForEach(part, content) {
        const char * t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        const size_t n = strlen(t);
        memcpy(s + len, t, n);
        len += n;
    }
    s[len] = 0;
    *owned = s;
    return s;
}

/* The role a message of OpenAI's role 'role' is written with in template 't' ('tmpl': the file's
 * Jinja text), or NULL for a role the server refuses: "developer" (OpenAI's newer name for the
 * system role) is "system"; "tool" (a tool's result) is "ipython" in a Llama 3 template that names
 * that role (Llama 3.1's), else "tool", which loom_chat_apply writes as it writes any role name
 * (ChatML's "<|im_start|>tool"; an assistant turn where the family's markers are fixed, as the
 * field's built-in formatter does). */
static const char * chat_role(const char * role, enum loom_chat_template t, const char * tmpl) {
    if (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant")) return role;
    if (!strcmp(role, "developer")) return "system";
    if (!strcmp(role, "tool")) return t == LOOM_CHAT_TEMPLATE_LLAMA3 && tmpl && strstr(tmpl, "ipython") ? "ipython" : "tool";
    return NULL;
}

/* The chat messages formatted in the model's template (heap), or NULL with 'err' set. */
static char * format_chat(const cJSON * msgs, int32_t * eot_id, char * err, size_t en) {
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        snprintf(err, en, "'messages' must be a non-empty array");
        return NULL;
    }
    const int n = cJSON_GetArraySize(msgs);
    struct loom_chat_message * m = calloc((size_t)n, sizeof *m);
    char ** owned = calloc((size_t)n, sizeof *owned); /* the contents joined from parts */
    if (!m || !owned) {
        free(m), free(owned);
        snprintf(err, en, "out of memory");
        return NULL;
    }
    enum loom_chat_template t = LOOM_CHAT_TEMPLATE_CHATML;
    const char * tmpl = loom_model_chat_template(serve_gen_model());
    loom_chat_template_detect(tmpl, &t);
    int i = 0;
    const cJSON * it;
    bool ok = true;
    cJSON_ArrayForEach(it, msgs) {
        const cJSON * role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON * content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsObject(it) || !cJSON_IsString(role) || !content) {
            snprintf(err, en, "messages[%d] must be an object with string 'role' and 'content'", i);
            ok = false;
            break;
        }
        m[i].role = chat_role(role->valuestring, t, tmpl);
        if (!m[i].role) {
            snprintf(err, en, "messages[%d].role '%.64s' is not one of system, developer, user, assistant, tool", i, role->valuestring);
            ok = false;
            break;
        }
        m[i].content = message_text(content, i, &owned[i], err, en);
        if (!m[i].content) {
            ok = false;
            break;
        }
        i++;
    }
    if (!ok) {
        for (int k = 0; k < n; k++) free(owned[k]);
        free(owned), free(m);
        return NULL;
    }
    const char * eot = loom_chat_template_eot_text(t);
    *eot_id = eot ? loom_vocab_find(loom_model_vocab(serve_gen_model()), eot, strlen(eot)) : -1;
    int32_t k = loom_chat_apply(t, m, (size_t)n, true, NULL, 0);
    char * s = NULL;
    if (k != LOOM_TOKEN_ERROR) {
        k = k < 0 ? -k : k;
        s = malloc((size_t)k + 1);
        if (s && loom_chat_apply(t, m, (size_t)n, true, s, k + 1) != k) free(s), s = NULL;
    }
    for (int q = 0; q < n; q++) free(owned[q]);
    free(owned), free(m);
    if (!s) snprintf(err, en, "the messages cannot be formatted in the chat template");
    return s;
}

/* Adds one logit_bias entry to 'j': 'bias' (a number, or false: never sampled) for token 'id'. */
static bool add_bias(struct serve_job * j, double id, const cJSON * bias, const char * where, char * err, size_t en) {
    const int32_t n_vocab = loom_vocab_n_tokens(loom_model_vocab(serve_gen_model()));
    if (id != floor(id) || id < 0 || id >= n_vocab) return snprintf(err, en, "'logit_bias' %s: not a token id in [0, %d)", where, n_vocab), false;
    float b;
    if (cJSON_IsFalse(bias)) b = -INFINITY;
    else if (cJSON_IsNumber(bias) && isfinite(bias->valuedouble)) b = (float)bias->valuedouble;
    else return snprintf(err, en, "'logit_bias' %s: the bias must be a number or false", where), false;
    if (j->n_biases == LOGIT_BIAS_MAX) return snprintf(err, en, "'logit_bias' holds at most %d tokens", LOGIT_BIAS_MAX), false;
    j->biases[j->n_biases++] = (struct logit_bias){.token = (int32_t)id, .bias = b};
    return true;
}

/* 'logit_bias' in OpenAI's form, an object {"TOKEN_ID": bias}, or the native one, an array of
 * [TOKEN_ID or "text", bias] pairs (a text: each of its tokens; bias false: never sampled). */
static bool get_logit_bias(const cJSON * root, struct serve_job * j, char * err, size_t en) {
    const cJSON * lb = cJSON_GetObjectItemCaseSensitive(root, "logit_bias"), * it;
    if (!lb || cJSON_IsNull(lb)) return true;
    if (cJSON_IsObject(lb)) {
        cJSON_ArrayForEach(it, lb) {
            char * end = NULL;
            const double id = strtod(it->string, &end);
            if (!*it->string || *end) return snprintf(err, en, "'logit_bias' key \"%.40s\": not a token id", it->string), false;
            if (!add_bias(j, id, it, it->string, err, en)) return false;
        }
        return true;
    }
    if (!cJSON_IsArray(lb)) return snprintf(err, en, "'logit_bias' must be an object {\"TOKEN_ID\": bias} or an array of [token, bias] pairs"), false;
    int i = 0;
    cJSON_ArrayForEach(it, lb) {
        char where[24];
        snprintf(where, sizeof where, "[%d]", i++);
        const cJSON * t = cJSON_GetArrayItem(it, 0), * b = cJSON_GetArrayItem(it, 1);
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !(cJSON_IsNumber(t) || cJSON_IsString(t)))
            return snprintf(err, en, "'logit_bias' %s must be a pair [token id or text, bias]", where), false;
        if (cJSON_IsNumber(t)) {
            if (!add_bias(j, t->valuedouble, b, where, err, en)) return false;
            continue;
        }
        int32_t n = 0;
        const struct loom_vocab * v = loom_model_vocab(serve_gen_model());
        int32_t k = loom_tokenize(v, t->valuestring, strlen(t->valuestring), false, false, NULL, 0);
        if (k == LOOM_TOKEN_ERROR) return snprintf(err, en, "'logit_bias' %s: the text cannot be tokenized", where), false;
        n = k < 0 ? -k : k;
        int32_t * toks = malloc(((size_t)n + 1) * sizeof *toks);
        if (!toks || loom_tokenize(v, t->valuestring, strlen(t->valuestring), false, false, toks, n + 1) != n) {
            free(toks);
            return snprintf(err, en, "out of memory"), false;
        }
        bool ok = true;
        for (int32_t q = 0; ok && q < n; q++) ok = add_bias(j, toks[q], b, where, err, en);
        free(toks);
        if (!ok) return false;
    }
    return true;
}

/* The tokens of a completion's 'prompt', as llama-server reads it: a string (BOS first where the
 * vocabulary adds one); an array of token ids, taken as they are (no BOS added); or an array mixing
 * ids and strings, each string tokenized in its place (BOS only before a string that comes first).
 * An array of strings alone is several prompts, refused unless it holds one (one prompt per
 * request). Returns the tokens (heap; '*n' of them), or NULL with 'err' set and '*status' the
 * HTTP status: 400 for another type, an id outside [0, n_vocab) or a fraction, 500 out of memory. */
static int32_t * prompt_tokens(const cJSON * p, int32_t * n, unsigned * status, char * err, size_t en) {
    *status = 400;
    if (cJSON_IsString(p)) return tokenize(p->valuestring, false, true, n, err, en);
    const char * what = "'prompt' must be a string, or an array of token ids and strings";
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0) return snprintf(err, en, "%s", what), NULL;
    const int32_t n_vocab = loom_vocab_n_tokens(loom_model_vocab(serve_gen_model()));
    int n_str = 0, n_num = 0, i = 0;
    const cJSON * it;
    cJSON_ArrayForEach(it, p) {
        if (cJSON_IsString(it)) n_str++;
        else if (cJSON_IsNumber(it)) n_num++;
        else return snprintf(err, en, "%s: 'prompt'[%d] is neither", what, i), NULL;
        if (cJSON_IsNumber(it) && (it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 || it->valuedouble >= n_vocab))
            return snprintf(err, en, "'prompt'[%d] is not a token id in [0, %d)", i, n_vocab), NULL;
        i++;
    }
    if (n_num == 0 && n_str > 1) return snprintf(err, en, "'prompt' holds %d prompts; one per request is supported", n_str), NULL;
    int32_t * toks = NULL, len = 0;
    i = 0;
    cJSON_ArrayForEach(it, p) {
        int32_t k = 1, * piece = NULL;
        if (cJSON_IsString(it) && !(piece = tokenize(it->valuestring, false, i == 0, &k, err, en))) return free(toks), NULL;
        int32_t * t = realloc(toks, ((size_t)len + (size_t)k + 1) * sizeof *t);
        if (!t) {
            free(piece), free(toks);
            *status = 500;
            return snprintf(err, en, "out of memory"), NULL;
        }
        toks = t;
        if (piece) memcpy(toks + len, piece, (size_t)k * sizeof *piece);
        else toks[len] = (int32_t)it->valuedouble;
        len += k;
        free(piece);
        i++;
    }
    *n = len;
    return toks;
}

/* Builds the job a generation request asks for; returns 0, or the HTTP status of the error in 'err'. */
static unsigned build_job(const cJSON * root, struct gen_req * g, char * err, size_t en) {
    if (!cJSON_IsObject(root)) return snprintf(err, en, "the body must be a JSON object"), 400;
    int32_t eot_id = -1, n = 0, * toks;
    if (g->api == API_CHAT) {
        char * text = format_chat(cJSON_GetObjectItemCaseSensitive(root, "messages"), &eot_id, err, en);
        if (!text) return 400;
        toks = tokenize(text, true, true, &n, err, en);
        free(text);
        if (!toks) return 400;
    } else {
        unsigned st;
        toks = prompt_tokens(cJSON_GetObjectItemCaseSensitive(root, "prompt"), &n, &st, err, en);
        if (!toks) return st;
    }
    const int32_t n_ctx = serve_gen_n_ctx();
    if (n == 0) {
        free(toks);
        return snprintf(err, en, "the prompt is empty (and the model adds no BOS)"), 400;
    }
    if (n >= n_ctx) {
        free(toks);
        return snprintf(err, en, "the prompt has %d tokens; a slot's context holds %d (one more is needed to generate)", n, n_ctx), 400;
    }
    struct serve_job * j = serve_job_new(toks, n);
    free(toks);
    if (!j) return snprintf(err, en, "out of memory"), 500;
    g->job = j;
    j->eot_id = eot_id;
    double v;
    v = g->api == API_COMPLETIONS ? 16 : -1; /* OpenAI's default for completions */
    if (!get_int(root, "max_tokens", -1, 1 << 30, &v, err, en)) return 400;
    if (g->api == API_NATIVE && !get_int(root, "n_predict", -1, 1 << 30, &v, err, en)) return 400;
    if (g->api == API_CHAT && !get_int(root, "max_completion_tokens", -1, 1 << 30, &v, err, en)) return 400;
    j->n_predict = (int32_t)v;
    v = j->sp.temp;
    if (!get_num(root, "temperature", 0, 1e6, &v, err, en)) return 400;
    j->sp.temp = (float)v;
    v = j->sp.top_p;
    if (!get_num(root, "top_p", 0, 1, &v, err, en)) return 400;
    j->sp.top_p = (float)v;
    v = j->sp.top_k;
    if (!get_int(root, "top_k", -1, 1 << 30, &v, err, en)) return 400;
    j->sp.top_k = (int)v;
    v = j->sp.min_p;
    if (!get_num(root, "min_p", 0, 1, &v, err, en)) return 400;
    j->sp.min_p = (float)v;
    /* the penalties look back over the prompt and what is generated, repeat_last_n tokens (-1: the slot's context) */
    v = j->sp.repeat_penalty;
    if (!get_num(root, "repeat_penalty", 1e-6, 1e6, &v, err, en)) return 400;
    j->sp.repeat_penalty = (float)v;
    v = j->sp.repeat_last_n;
    if (!get_int(root, "repeat_last_n", -1, 1 << 20, &v, err, en)) return 400;
    j->sp.repeat_last_n = v < 0 ? n_ctx : (int)v;
    v = j->sp.presence_penalty;
    if (!get_num(root, "presence_penalty", -1e6, 1e6, &v, err, en)) return 400;
    j->sp.presence_penalty = (float)v;
    v = j->sp.frequency_penalty;
    if (!get_num(root, "frequency_penalty", -1e6, 1e6, &v, err, en)) return 400;
    j->sp.frequency_penalty = (float)v;
    if (!get_logit_bias(root, j, err, en)) return 400;
    v = -1;
    /* loom run's --seed bounds: -1 (from the clock), or up to LOOM_DEFAULT_SEED - 1; JSON's doubles
     * round the largest ones to 2^64, which is taken as that largest seed */
    if (!get_int_text(root, "seed", -1, 18446744073709551616.0, "18446744073709551614", &v, err, en)) return 400;
    j->sp.seed = v < 0 ? LOOM_DEFAULT_SEED : v >= 18446744073709551615.0 ? LOOM_DEFAULT_SEED - 1 : (uint64_t)v;
    v = 1;
    if (!get_int(root, "n", 1, 1, &v, err, en)) return snprintf(err, en, "only n = 1 is supported"), 400;
    if (!get_bool(root, "stream", &g->stream, err, en)) return 400;
    if (!get_bool(root, "ignore_eos", &j->ignore_eos, err, en)) return 400;
    if (!get_bool(root, "cache_prompt", &j->cache_prompt, err, en)) return 400;
    const cJSON * stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (cJSON_IsString(stop)) {
        if (!serve_job_add_stop(j, stop->valuestring)) return snprintf(err, en, "out of memory"), 500;
    } else if (cJSON_IsArray(stop)) {
        const cJSON * s;
        cJSON_ArrayForEach(s, stop) {
            if (!cJSON_IsString(s)) return snprintf(err, en, "'stop' must be a string or an array of strings"), 400;
            if (!serve_job_add_stop(j, s->valuestring)) return snprintf(err, en, "'stop' holds at most %d strings", SERVE_STOP_MAX), 400;
        }
    } else if (stop && !cJSON_IsNull(stop)) {
        return snprintf(err, en, "'stop' must be a string or an array of strings"), 400;
    }
    return 0;
}

/* llama-server's finish_reason: "stop" for an end of generation or a stop string, else "length"
 * (the token limit, the slot's context full, or the server stopping). */
static const char * finish_reason(enum serve_finish f) {
    return f == SERVE_EOS || f == SERVE_WORD ? "stop" : "length";
}

/* The native API's stop_type: "eos", "word", "limit", or "none" (the server stopped it). */
static const char * stop_type(enum serve_finish f) {
    return f == SERVE_EOS ? "eos" : f == SERVE_WORD ? "word" : f == SERVE_LENGTH ? "limit" : "none";
}

static cJSON * timings_json(const struct serve_job * j) {
    cJSON * t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "cache_n", j->n_cached);
    cJSON_AddNumberToObject(t, "prompt_n", j->n_prompt - j->n_cached);
    cJSON_AddNumberToObject(t, "prompt_ms", j->t_prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_second", j->t_prompt_ms > 0 ? 1000.0 * (j->n_prompt - j->n_cached) / j->t_prompt_ms : 0);
    cJSON_AddNumberToObject(t, "predicted_n", j->n_gen);
    cJSON_AddNumberToObject(t, "predicted_ms", j->t_gen_ms);
    cJSON_AddNumberToObject(t, "predicted_per_second", j->t_gen_ms > 0 ? 1000.0 * j->n_gen / j->t_gen_ms : 0);
    return t;
}

static cJSON * usage_json(const struct serve_job * j) {
    cJSON * u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + j->n_gen);
    return u;
}

/* The OpenAI envelope: id, object, created, model, choices [one]. */
static cJSON * envelope(const struct gen_req * g, const char * object, cJSON ** choice) {
    cJSON * r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", g->id);
    cJSON_AddStringToObject(r, "object", object);
    cJSON_AddNumberToObject(r, "created", (double)g->created);
    cJSON_AddStringToObject(r, "model", O.alias);
    cJSON * ch = cJSON_AddArrayToObject(r, "choices");
    *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(*choice, "index", 0);
    cJSON_AddItemToArray(ch, *choice);
    return r;
}

/* A whole (not streamed) answer for a finished job. */
static cJSON * final_json(const struct gen_req * g) {
    const struct serve_job * j = g->job;
    cJSON * r, * ch;
    if (g->api == API_NATIVE) {
        r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "content", j->text);
        cJSON_AddStringToObject(r, "model", O.alias);
        cJSON_AddNumberToObject(r, "tokens_predicted", j->n_gen);
        cJSON_AddNumberToObject(r, "tokens_evaluated", j->n_prompt);
        cJSON_AddNumberToObject(r, "id_slot", j->slot);
        cJSON_AddBoolToObject(r, "stop", true);
        cJSON_AddStringToObject(r, "stop_type", stop_type(j->finish));
        cJSON_AddItemToObject(r, "timings", timings_json(j));
        return r;
    }
    if (g->api == API_CHAT) {
        r = envelope(g, "chat.completion", &ch);
        cJSON * m = cJSON_AddObjectToObject(ch, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", j->text);
    } else {
        r = envelope(g, "text_completion", &ch);
        cJSON_AddStringToObject(ch, "text", j->text);
        cJSON_AddNullToObject(ch, "logprobs");
    }
    cJSON_AddStringToObject(ch, "finish_reason", finish_reason(j->finish));
    cJSON_AddItemToObject(r, "usage", usage_json(j));
    cJSON_AddItemToObject(r, "timings", timings_json(j));
    return r;
}

/* One streamed event: 'text' (may be NULL: the opening or closing chunk); 'last' adds finish_reason, usage and timings. */
static cJSON * chunk_json(const struct gen_req * g, const char * text, bool first, bool last) {
    const struct serve_job * j = g->job;
    cJSON * r, * ch;
    if (g->api == API_NATIVE) {
        r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "content", text ? text : "");
        cJSON_AddBoolToObject(r, "stop", last);
        if (last) {
            cJSON_AddStringToObject(r, "stop_type", stop_type(j->finish));
            cJSON_AddNumberToObject(r, "tokens_predicted", j->n_gen);
            cJSON_AddNumberToObject(r, "tokens_evaluated", j->n_prompt);
            cJSON_AddItemToObject(r, "timings", timings_json(j));
        }
        return r;
    }
    if (g->api == API_CHAT) {
        r = envelope(g, "chat.completion.chunk", &ch);
        cJSON * d = cJSON_AddObjectToObject(ch, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (text) cJSON_AddStringToObject(d, "content", text);
    } else {
        r = envelope(g, "text_completion", &ch);
        cJSON_AddStringToObject(ch, "text", text ? text : "");
    }
    if (last) cJSON_AddStringToObject(ch, "finish_reason", finish_reason(j->finish));
    else cJSON_AddNullToObject(ch, "finish_reason");
    if (last) {
        cJSON_AddItemToObject(r, "usage", usage_json(j));
        cJSON_AddItemToObject(r, "timings", timings_json(j));
    }
    return r;
}

/* ---------------------------------------------------------------- streaming */

struct stream {
    struct gen_req g;
    size_t sent;       /* bytes of the job's text already sent */
    bool first, ended, done_sent;
    char * out;        /* the events not yet handed to the library */
    size_t out_len, out_off;
};

static bool stream_add_event(struct stream * s, cJSON * ev) {
    char * js = ev ? cJSON_PrintUnformatted(ev) : NULL;
    cJSON_Delete(ev);
    if (!js) return false;
    const size_t n = strlen(js);
    char * o = malloc(n + 9);
    if (!o) {
        cJSON_free(js);
        return false;
    }
    memcpy(o, "data: ", 6);
    memcpy(o + 6, js, n);
    memcpy(o + 6 + n, "\n\n", 3);
    cJSON_free(js);
    free(s->out);
    s->out = o, s->out_len = n + 8, s->out_off = 0;
    return true;
}

/* Hands out the next bytes of the event stream, waiting for the generator when nothing is ready. */
static ssize_t stream_read(void * cls, uint64_t pos, char * buf, size_t max) {
    (void)pos;
    struct stream * s = cls;
    while (s->out_off == s->out_len) {
        if (s->done_sent) return MHD_CONTENT_READER_END_OF_STREAM;
        if (s->ended) { /* after the closing event */
            free(s->out);
            s->out = NULL;
            if (s->g.api == API_NATIVE) return MHD_CONTENT_READER_END_OF_STREAM;
            static const char done[] = "data: [DONE]\n\n";
            s->out = strdup(done);
            if (!s->out) return MHD_CONTENT_READER_END_WITH_ERROR;
            s->out_len = sizeof done - 1, s->out_off = 0, s->done_sent = true;
            break;
        }
        struct serve_job * j = s->g.job;
        pthread_mutex_lock(&j->mu);
        for (;;) {
            size_t avail = j->len;
            if (j->finish == SERVE_RUNNING) { /* hold back what could be the start of a stop string, and never split a character */
                avail = j->len > j->longest_stop ? j->len - j->longest_stop : 0;
                while (avail > s->sent && ((unsigned char)j->text[avail] & 0xC0) == 0x80) avail--;
            }
            if (avail > s->sent || j->finish != SERVE_RUNNING) break;
            pthread_cond_wait(&j->cv, &j->mu);
        }
        size_t avail = j->len;
        const bool fin = j->finish != SERVE_RUNNING;
        if (!fin) {
            avail = j->len > j->longest_stop ? j->len - j->longest_stop : 0;
            while (avail > s->sent && ((unsigned char)j->text[avail] & 0xC0) == 0x80) avail--;
        }
        char * piece = NULL;
        if (avail > s->sent) {
            piece = malloc(avail - s->sent + 1);
            if (piece) memcpy(piece, j->text + s->sent, avail - s->sent), piece[avail - s->sent] = 0;
            s->sent = avail;
        }
        pthread_mutex_unlock(&j->mu);
        bool ok;
        if (piece || !fin) {
            ok = stream_add_event(s, chunk_json(&s->g, piece ? piece : "", s->first, false));
            s->first = false;
        } else {
            /* a stream the server stops (SIGTERM) ends as one cut short by the token limit would:
             * its closing chunk (finish_reason "length", stop_type "none"), then [DONE] */
            if (j->finish == SERVE_FAILED) {
                ok = stream_add_event(s, error_json(500, "generation failed"));
            } else {
                ok = stream_add_event(s, chunk_json(&s->g, NULL, s->first, true));
            }
            s->ended = true;
        }
        free(piece);
        if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = s->out_len - s->out_off;
    if (n > max) n = max;
    memcpy(buf, s->out + s->out_off, n);
    s->out_off += n;
    return (ssize_t)n;
}

/* Called when the stream ends or the client goes away: a running job is cancelled (the slot freed). */
static void stream_free(void * cls) {
    struct stream * s = cls;
    struct serve_job * j = s->g.job;
    pthread_mutex_lock(&j->mu);
    j->cancel = true;
    pthread_mutex_unlock(&j->mu);
    serve_job_unref(j);
    free(s->out);
    free(s);
}

/* ---------------------------------------------------------------- endpoints */

static enum MHD_Result do_generate(struct MHD_Connection * conn, const cJSON * root, enum api api) {
    struct gen_req g = {.api = api, .created = (long)time(NULL)};
    static unsigned long counter;
    snprintf(g.id, sizeof g.id, "%s-%lx%lx", api == API_CHAT ? "chatcmpl" : "cmpl", (unsigned long)g.created, __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    char err[256];
    const unsigned st = build_job(root, &g, err, sizeof err);
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
        else r = send_json(conn, 200, final_json(&g));
        serve_job_unref(g.job);
        return r;
    }
    struct stream * s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_lock(&g.job->mu);
        g.job->cancel = true;
        pthread_mutex_unlock(&g.job->mu);
        serve_job_unref(g.job);
        return send_error(conn, 500, "out of memory");
    }
    s->g = g;
    s->first = true;
    struct MHD_Response * r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
    if (!r) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Connection", "close");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
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
    if (!get_bool(root, "parse_special", &special, err, sizeof err) || !get_bool(root, "add_special", &add_special, err, sizeof err) ||
        !get_bool(root, "with_pieces", &with_pieces, err, sizeof err))
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
    cJSON * j = error_json(405, msg);
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
    enum api api = API_NATIVE;
    bool gen = true;
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions")) api = API_CHAT;
    else if (!strcmp(url, "/v1/completions")) api = API_COMPLETIONS;
    else if (!strcmp(url, "/completion") || !strcmp(url, "/completions")) api = API_NATIVE;
    else if (!strcmp(url, "/tokenize") || !strcmp(url, "/detokenize")) api = API_NATIVE, gen = false;
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
    char * bad_cl = error_text(400, "the Content-Length header is not one decimal number");
    char msg[160];
    snprintf(msg, sizeof msg, "the request body is larger than %u bytes", SERVE_BODY_MAX);
    char * huge_cl = error_text(413, msg);
    snprintf(msg, sizeof msg, "the server holds %d connections already; try again later", SERVE_CONN_MAX);
    char * busy = error_text(503, msg);
    snprintf(msg, sizeof msg, "the request did not come whole within %lld s (a body shorter than its Content-Length?)", O.timeout);
    g_timeout_body = error_text(408, msg);
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
