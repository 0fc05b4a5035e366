/* serve-reply.c -- `loom serve`'s answers: the JSON of a whole answer (native or OpenAI's), the
 * server-sent event stream a streamed one reads from its job, and the error object. */
#ifdef LOOM_HAVE_SERVE
#include "serve-reply.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

cJSON * serve_error_json(unsigned status, const char * msg) {
    cJSON * e = cJSON_CreateObject(), * root = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "code", status);
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddItemToObject(root, "error", e);
    return root;
}

char * serve_error_text(unsigned status, const char * msg) {
    cJSON * j = serve_error_json(status, msg);
    char * s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return s;
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
    cJSON_AddNumberToObject(t, "prompt_n", j->n_evaluated);
    cJSON_AddNumberToObject(t, "prompt_ms", j->t_prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_second", j->t_prompt_ms > 0 ? 1000.0 * j->n_evaluated / j->t_prompt_ms : 0);
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
static cJSON * envelope(const struct serve_req * g, const char * object, cJSON ** choice) {
    cJSON * r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", g->id);
    cJSON_AddStringToObject(r, "object", object);
    cJSON_AddNumberToObject(r, "created", (double)g->created);
    cJSON_AddStringToObject(r, "model", g->model);
    cJSON * ch = cJSON_AddArrayToObject(r, "choices");
    *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(*choice, "index", 0);
    cJSON_AddItemToArray(ch, *choice);
    return r;
}

cJSON * serve_reply_json(const struct serve_req * g) {
    const struct serve_job * j = g->job;
    cJSON * r, * ch;
    if (g->api == SERVE_API_NATIVE) {
        r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "content", j->text);
        cJSON_AddStringToObject(r, "model", g->model);
        cJSON_AddNumberToObject(r, "tokens_predicted", j->n_gen);
        cJSON_AddNumberToObject(r, "tokens_evaluated", j->n_prompt);
        cJSON_AddNumberToObject(r, "id_slot", j->slot);
        cJSON_AddBoolToObject(r, "stop", true);
        cJSON_AddStringToObject(r, "stop_type", stop_type(j->finish));
        cJSON_AddItemToObject(r, "timings", timings_json(j));
        return r;
    }
    if (g->api == SERVE_API_CHAT) {
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
static cJSON * chunk_json(const struct serve_req * g, const char * text, bool first, bool last) {
    const struct serve_job * j = g->job;
    cJSON * r, * ch;
    if (g->api == SERVE_API_NATIVE) {
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
    if (g->api == SERVE_API_CHAT) {
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

/* One streamed answer: libmicrohttpd's content reader hands out its events as the job's text grows. */
struct stream {
    struct serve_req g;
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
            if (s->g.api == SERVE_API_NATIVE) return MHD_CONTENT_READER_END_OF_STREAM;
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
                ok = stream_add_event(s, serve_error_json(500, "generation failed"));
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

struct MHD_Response * serve_reply_stream(const struct serve_req * g) {
    struct stream * s = calloc(1, sizeof *s);
    struct MHD_Response * r = s ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free) : NULL;
    if (!r) {
        free(s);
        pthread_mutex_lock(&g->job->mu);
        g->job->cancel = true;
        pthread_mutex_unlock(&g->job->mu);
        serve_job_unref(g->job);
        return NULL;
    }
    s->g = *g;
    s->first = true;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Connection", "close");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    return r;
}
#endif
