/* serve-accept.h -- `loom serve`'s listening socket: each accepted connection's request head is read
 * ahead (without consuming it) and a malformed Content-Length answered here, before libmicrohttpd
 * (whose own answer to it repeats its header block and carries an HTML body) takes the connection. */
#ifndef LOOM_TOOLS_SERVE_ACCEPT_H
#define LOOM_TOOLS_SERVE_ACCEPT_H

#include <microhttpd.h>
#include <netdb.h>
#include <stdbool.h>

/* A listening TCP socket bound to 'ai' (SO_REUSEADDR), or -1 with errno set. '*port' gets the
 * port bound (for --port 0). */
int serve_listen(const struct addrinfo * ai, unsigned * port);
/* Starts the thread that accepts on 'fd' and hands good connections to 'd' (started with
 * MHD_USE_NO_LISTEN_SOCKET); 'bad_request' is the JSON body sent for a malformed Content-Length.
 * False when the thread cannot be started. */
bool serve_accept_start(int fd, struct MHD_Daemon * d, const char * bad_request);
/* Stops accepting, waits for the connections being read ahead, and closes the socket. */
void serve_accept_stop(void);

#endif
