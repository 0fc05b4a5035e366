/* serve-accept.c -- `loom serve`'s listening socket: accepted connections are read ahead for a
 * malformed or huge Content-Length (answered here with the JSON error), then handed to libmicrohttpd. */
#ifdef LOOM_HAVE_SERVE
#define _GNU_SOURCE /* memmem, accept4 */
#include "serve-accept.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 16384   /* bytes of a request head read ahead; a longer head goes to libmicrohttpd as it is */
#define HEAD_WAIT_MS 2000 /* how long the head may take to arrive before the connection goes on as it is */

static struct {
    int fd;
    struct MHD_Daemon * d;
    const char * bad_request, * too_large, * busy;
    pthread_t thread;
    bool started;
    atomic_bool stopping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in_flight;        /* connections being read ahead */
    atomic_int mhd_live;  /* connections libmicrohttpd holds (its connection notifications count them) */
} A = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

int serve_bind(const struct addrinfo * ai, unsigned * port) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return -1;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    *port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6) *port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return fd;
}

/* What the head 'h' (ending at its blank line) says of its Content-Length: CL_BAD when it is not one
 * decimal number (RFC 9112 6.3: a list of differing values, a sign, letters or no digits at all),
 * CL_HUGE when it is one past what a signed 64-bit number holds (libmicrohttpd and the request
 * handler could not read it: such a body is too large for any limit), else CL_OK. */
enum { CL_OK, CL_BAD, CL_HUGE };
static int check_content_length(const char * h, size_t n) {
    const char * end = h + n, * line = h;
    char first[24] = "";
    int r = CL_OK;
    while (line < end) {
        const char * eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) eol = end;
        if ((size_t)(eol - line) > 15 && !strncasecmp(line, "content-length:", 15)) {
            const char * v = line + 15, * ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t')) v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t')) ve--;
            if (ve == v) return CL_BAD;
            for (const char * c = v; c < ve; c++) {
                if (!isdigit((unsigned char)*c)) return CL_BAD;
            }
            while (ve - v > 1 && *v == '0') v++; /* leading zeros do not count */
            char val[24];
            if (ve - v > 19) {
                snprintf(val, sizeof val, "huge"); /* more digits than 64 bits hold */
                r = CL_HUGE;
            } else {
                snprintf(val, sizeof val, "%.*s", (int)(ve - v), v);
                if (ve - v == 19 && strcmp(val, "9223372036854775807") > 0) r = CL_HUGE;
            }
            if (first[0] && strcmp(first, val)) return CL_BAD; /* two that differ */
            snprintf(first, sizeof first, "%s", val);
        }
        line = eol + 1;
    }
    return r;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct conn {
    int fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
};

void serve_answer(int fd, const char * status, const char * body, bool wait) {
    char head[256];
    const size_t blen = strlen(body);
    const int hl = snprintf(head, sizeof head,
                            "HTTP/1.1 %s\r\nContent-Type: " SERVE_JSON_TYPE "\r\n"
                            "Access-Control-Allow-Origin: *\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n", status, blen);
    const int fl = MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT);
    if (send(fd, head, (size_t)hl, fl) == hl) send(fd, body, blen, fl);
}

/* serve_answer, then the connection closed. */
static void answer_and_close(int fd, const char * status, const char * body, bool wait) {
    serve_answer(fd, status, body, wait);
    shutdown(fd, SHUT_WR);
    /* what the client sent is read away: closing with unread bytes would reset the connection,
     * and the client could lose the answer */
    char junk[4096];
    while (recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {}
    close(fd);
}

/* Reads the request head ahead (MSG_PEEK: it stays for libmicrohttpd), answers a malformed
 * Content-Length itself, and hands the rest on. */
static void * screen(void * arg) {
    struct conn * c = arg;
    char * buf = malloc(HEAD_MAX);
    int cl = CL_OK;
    size_t seen = 0;
    const int64_t t0 = now_ms();
    while (buf) { /* also while stopping: a request that came is answered (503 where it asks for generation) */
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (poll(&p, 1, 50) < 0 && errno != EINTR) break;
        const ssize_t n = recv(c->fd, buf, HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break; /* closed: libmicrohttpd sees it */
        if (n > 0) {
            const char * e = memmem(buf, (size_t)n, "\r\n\r\n", 4);
            if (e) {
                cl = check_content_length(buf, (size_t)(e - buf) + 2);
                break;
            }
            if ((size_t)n == HEAD_MAX) break;
            if ((size_t)n == seen) { /* nothing new: the peeked bytes keep poll() ready, so wait a little */
                const struct timespec ts = {0, 5 * 1000000};
                nanosleep(&ts, NULL);
            }
            seen = (size_t)n;
        }
        if (now_ms() - t0 > HEAD_WAIT_MS) break;
    }
    free(buf);
    if (cl == CL_BAD) {
        answer_and_close(c->fd, "400 Bad Request", A.bad_request, true);
    } else if (cl == CL_HUGE) {
        answer_and_close(c->fd, "413 Content Too Large", A.too_large, true);
    } else {
        /* on failure libmicrohttpd closes the socket itself (closing it here too could close
         * another connection's descriptor, reused meanwhile) */
        (void)MHD_add_connection(A.d, c->fd, (const struct sockaddr *)&c->addr, c->addr_len);
    }
    free(c);
    pthread_mutex_lock(&A.mu);
    A.in_flight--;
    pthread_cond_broadcast(&A.cv);
    pthread_mutex_unlock(&A.mu);
    return NULL;
}

/* Takes one connection from the listening socket (which poll(2) found ready) and starts reading its head. */
static void accept_one(void) {
    struct conn * c = calloc(1, sizeof *c);
    if (!c) return;
    c->addr_len = sizeof c->addr;
    c->fd = accept4(A.fd, (struct sockaddr *)&c->addr, &c->addr_len, SOCK_CLOEXEC);
    if (c->fd < 0) {
        free(c);
        return;
    }
    pthread_mutex_lock(&A.mu);
    const bool full = A.in_flight + atomic_load(&A.mhd_live) >= SERVE_CONN_MAX;
    if (!full) A.in_flight++;
    pthread_mutex_unlock(&A.mu);
    if (full) { /* answered here, never handed on: libmicrohttpd stays below its own limit */
        answer_and_close(c->fd, "503 Service Unavailable", A.busy, false);
        free(c);
        return;
    }
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, screen, c) != 0) {
        close(c->fd);
        free(c);
        pthread_mutex_lock(&A.mu);
        A.in_flight--;
        pthread_mutex_unlock(&A.mu);
    }
    pthread_attr_destroy(&at);
}

static void * acceptor(void * arg) {
    (void)arg;
    struct pollfd p = {.fd = A.fd, .events = POLLIN};
    while (!atomic_load(&A.stopping)) {
        if (poll(&p, 1, 100) > 0) accept_one();
    }
    /* the connections the kernel completed before the stop are taken too (closing the socket
     * with them in its backlog would reset them): they get their answer */
    while (poll(&p, 1, 0) > 0) accept_one();
    return NULL;
}

void serve_accept_notify(void * cls, struct MHD_Connection * conn, void ** socket_context, enum MHD_ConnectionNotificationCode toe) {
    (void)cls, (void)conn, (void)socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) atomic_fetch_add(&A.mhd_live, 1);
    else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) atomic_fetch_sub(&A.mhd_live, 1);
}

bool serve_accept_start(int fd, struct MHD_Daemon * d, const char * bad_request, const char * too_large, const char * busy) {
    A.fd = fd;
    A.d = d;
    A.bad_request = bad_request;
    A.too_large = too_large;
    A.busy = busy;
    A.started = pthread_create(&A.thread, NULL, acceptor, NULL) == 0;
    return A.started;
}

bool serve_accept_drain(int timeout_ms) {
    const int64_t t0 = now_ms();
    while (atomic_load(&A.mhd_live) > 0) {
        if (now_ms() - t0 >= timeout_ms) return false;
        const struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    return true;
}

void serve_accept_stop(void) {
    atomic_store(&A.stopping, true);
    if (A.started) pthread_join(A.thread, NULL);
    A.started = false;
    if (A.fd >= 0) close(A.fd); /* at once after the last look at the backlog */
    A.fd = -1;
    pthread_mutex_lock(&A.mu);
    while (A.in_flight > 0) pthread_cond_wait(&A.cv, &A.mu);
    pthread_mutex_unlock(&A.mu);
}
#endif
