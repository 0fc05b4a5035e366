/* serve-request.c -- `loom serve`'s generation requests: the JSON of /completion, /v1/completions and
 * /v1/chat/completions read into a serve_job (the prompt's tokens, the chat template, the sampler's
 * fields, logit_bias, stop strings). */
#ifdef LOOM_HAVE_SERVE
#include "serve-request.h"

#include "loom-chat.h"
#include "loom-llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool serve_json_bool(const cJSON * o, const char * key, bool * out, char * err, size_t n) {
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

unsigned serve_request_build(const cJSON * root, struct serve_req * g, char * err, size_t en) {
    if (!cJSON_IsObject(root)) return snprintf(err, en, "the body must be a JSON object"), 400;
    int32_t eot_id = -1, n = 0, * toks;
    if (g->api == SERVE_API_CHAT) {
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
    v = g->api == SERVE_API_COMPLETIONS ? 16 : -1; /* OpenAI's default for completions */
    if (!get_int(root, "max_tokens", -1, 1 << 30, &v, err, en)) return 400;
    if (g->api == SERVE_API_NATIVE && !get_int(root, "n_predict", -1, 1 << 30, &v, err, en)) return 400;
    if (g->api == SERVE_API_CHAT && !get_int(root, "max_completion_tokens", -1, 1 << 30, &v, err, en)) return 400;
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
    if (!serve_json_bool(root, "stream", &g->stream, err, en)) return 400;
    if (!serve_json_bool(root, "ignore_eos", &j->ignore_eos, err, en)) return 400;
    if (!serve_json_bool(root, "cache_prompt", &j->cache_prompt, err, en)) return 400;
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
#endif
