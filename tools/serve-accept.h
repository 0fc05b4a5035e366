/* serve-accept.h -- `loom serve`'s listening socket: each accepted connection's request head is read
 * ahead (without consuming it) and a malformed Content-Length answered here, before libmicrohttpd
 * (whose own answer to it repeats its header block and carries an HTML body) takes the connection. */
#ifndef LOOM_TOOLS_SERVE_ACCEPT_H
#define LOOM_TOOLS_SERVE_ACCEPT_H

#include <microhttpd.h>
#include <netdb.h>
#include <stdbool.h>

/* The Content-Type of every JSON answer (llama-server's). */
#define SERVE_JSON_TYPE "application/json; charset=utf-8"

/* Connections held at once (being read ahead, or libmicrohttpd's); one more is answered 503 at
 * once and closed. Below libmicrohttpd's own MHD_OPTION_CONNECTION_LIMIT (SERVE_CONN_MAX + 16),
 * which is never reached: past it libmicrohttpd 0.9.75 was seen to stop serving for good. */
#define SERVE_CONN_MAX 240

/* A TCP socket bound to 'ai' (SO_REUSEADDR), or -1 with errno set (EADDRINUSE: another program
 * listens there). '*port' gets the port bound (for --port 0). It does not listen yet: a client
 * is refused until listen(2) on it, so that the port can be taken before the model loads and
 * opened once it has. */
int serve_bind(const struct addrinfo * ai, unsigned * port);
/* Writes a whole HTTP/1.1 answer ("Connection: close") with the JSON 'body' on socket 'fd' (the
 * status line's 'status', e.g. "408 Request Timeout"); 'wait': the send may block, else what does
 * not fit the socket's buffer at once is lost. The socket stays open. */
void serve_answer(int fd, const char * status, const char * body, bool wait);
/* Starts the thread that accepts on 'fd' and hands good connections to 'd' (started with
 * MHD_USE_NO_LISTEN_SOCKET and serve_accept_notify as its MHD_OPTION_NOTIFY_CONNECTION);
 * 'bad_request' is the JSON body sent (400) for a malformed Content-Length, 'too_large' the one
 * sent (413) for a Content-Length past 2^63 - 1, 'busy' the one sent (503) past SERVE_CONN_MAX
 * connections. False when the thread cannot be started. */
bool serve_accept_start(int fd, struct MHD_Daemon * d, const char * bad_request, const char * too_large, const char * busy);
/* libmicrohttpd's connection notification: counts the connections it holds. */
void serve_accept_notify(void * cls, struct MHD_Connection * conn, void ** socket_context, enum MHD_ConnectionNotificationCode toe);
/* Stops accepting (the connections already waiting in the socket's backlog are still taken and
 * handed on), waits for the connections being read ahead, and closes the socket. */
void serve_accept_stop(void);
/* Waits until libmicrohttpd holds no connection (each has had its answer and been closed), at most
 * 'timeout_ms'; false when some are still open then. */
bool serve_accept_drain(int timeout_ms);

#endif
