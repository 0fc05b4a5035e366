/* gguf-writer-signal.c -- removes the writers' temporary files when SIGINT, SIGTERM or SIGHUP ends
 * the process, so an interrupted conversion does not leave gigabytes behind.
 *
 * While at least one temporary file is open, a handler is installed for each of those signals
 * whose disposition is the default (termination). The handler unlinks every registered temporary
 * path, restores the default action and re-raises the signal, so the process still dies of it.
 * A signal that is ignored (e.g. SIGHUP under nohup) or already handled by the application is
 * left alone: the application decides, and an orderly 'loom_gguf_writer_free' removes the file.
 * The handler touches only static memory and calls only async-signal-safe functions (unlink,
 * sigaction, raise). */
#include "gguf-writer-impl.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define TMP_SLOTS 8 /* writers streaming at the same time; more get no cleanup on a signal */

static const int signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_SIGNALS ((int)(sizeof signals / sizeof signals[0]))

static char tmp_paths[TMP_SLOTS][PATH_MAX];
static volatile sig_atomic_t tmp_used[TMP_SLOTS];
static struct sigaction saved[N_SIGNALS];
static bool installed[N_SIGNALS];
static int n_armed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void on_signal(int sig) {
    for (int i = 0; i < TMP_SLOTS; i++) {
        if (tmp_used[i]) unlink(tmp_paths[i]);
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* delivered when the handler returns (the signal is blocked while it runs) */
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_SIGNALS; i++) sigaddset(&sa.sa_mask, signals[i]);
    for (int i = 0; i < N_SIGNALS; i++) {
        struct sigaction old;
        installed[i] = false;
        if (sigaction(signals[i], NULL, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue; /* ignored or the application's */
        if (sigaction(signals[i], &sa, &saved[i]) == 0) installed[i] = true;
    }
}

static void uninstall(void) {
    for (int i = 0; i < N_SIGNALS; i++) {
        if (!installed[i]) continue;
        struct sigaction cur;
        /* put the old action back only if nobody replaced ours meanwhile */
        if (sigaction(signals[i], NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_signal) {
            sigaction(signals[i], &saved[i], NULL);
        }
        installed[i] = false;
    }
}

int gguf_writer_signal_arm(const char * tmp_path) {
    size_t n = strlen(tmp_path);
    if (n >= PATH_MAX) return -1;
    pthread_mutex_lock(&lock);
    int slot = -1;
    for (int i = 0; i < TMP_SLOTS && slot < 0; i++) {
        if (!tmp_used[i]) slot = i;
    }
    if (slot >= 0) {
        memcpy(tmp_paths[slot], tmp_path, n + 1);
        tmp_used[slot] = 1; /* after the path: the handler never sees half a name */
        if (n_armed++ == 0) install();
    }
    pthread_mutex_unlock(&lock);
    return slot;
}

void gguf_writer_signal_disarm(int slot) {
    if (slot < 0 || slot >= TMP_SLOTS) return;
    pthread_mutex_lock(&lock);
    if (tmp_used[slot]) {
        tmp_used[slot] = 0;
        if (--n_armed == 0) uninstall();
    }
    pthread_mutex_unlock(&lock);
}
