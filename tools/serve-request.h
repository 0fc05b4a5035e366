/* serve-request.h -- `loom serve`'s generation requests: the JSON of /completion, /v1/completions and
 * /v1/chat/completions read into a serve_job. */
#ifndef LOOM_TOOLS_SERVE_REQUEST_H
#define LOOM_TOOLS_SERVE_REQUEST_H

#include "serve-gen.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* Which API a generation request speaks: the native /completion, OpenAI's completions or chat. */
enum serve_api { SERVE_API_NATIVE, SERVE_API_COMPLETIONS, SERVE_API_CHAT };

/* One generation request: what it asks for, and what its answer is named. */
struct serve_req {
    enum serve_api api;
    bool stream;
    struct serve_job * job;   /* the request's reference (NULL until serve_request_build makes it) */
    char id[40];              /* the answer's "id" (OpenAI's) */
    long created;             /* its "created": seconds since the epoch */
    const char * model;       /* its "model": the server's --alias */
};

/* Reads the request's JSON object 'root' into a new job in g->job (the prompt's tokens checked
 * against a slot's context of the loaded model; g->stream from "stream"). Returns 0, or the HTTP
 * status of the error (400 a field of the wrong type or range, 500 out of memory) with its message
 * in 'err' ('en' bytes); g->job may be set then too (the caller drops it). */
unsigned serve_request_build(const cJSON * root, struct serve_req * g, char * err, size_t en);
/* Reads the optional boolean field 'key' of 'o' into '*out'; false (with the message in 'err', 'n'
 * bytes) when it is there and not a boolean (null counts as absent). */
bool serve_json_bool(const cJSON * o, const char * key, bool * out, char * err, size_t n);

#endif
