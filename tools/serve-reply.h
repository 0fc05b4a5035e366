/* serve-reply.h -- `loom serve`'s answers: a whole answer's JSON, the server-sent event stream of a
 * streamed one, and the error object. */
#ifndef LOOM_TOOLS_SERVE_REPLY_H
#define LOOM_TOOLS_SERVE_REPLY_H

#include "serve-request.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>

/* The error object {"error":{"code":STATUS,"message":MSG,"type":...}} (OpenAI's type names per
 * status); NULL when out of memory. */
cJSON * serve_error_json(unsigned status, const char * msg);
/* serve_error_json(status, msg) as text (cJSON_free it), or NULL when out of memory. */
char * serve_error_text(unsigned status, const char * msg);
/* The whole (not streamed) answer for g's finished job: the native one ({"content", "tokens_predicted",
 * "stop_type", "timings", ...}) or OpenAI's (a completion or chat.completion with one choice, its
 * finish_reason, "usage" and "timings"). NULL when out of memory. */
cJSON * serve_reply_json(const struct serve_req * g);
/* A response whose body is the event stream of g's job ("data: {...}" events as text comes, a
 * closing event with finish_reason / stop_type, usage and timings -- also for a job the server
 * stopped --, then "data: [DONE]" for OpenAI's APIs). The response takes over g's job reference
 * and cancels the job when it ends or the client goes away. NULL when out of memory (the job then
 * cancelled and released). */
struct MHD_Response * serve_reply_stream(const struct serve_req * g);

#endif
