/* slow_listen.c - an LD_PRELOAD library for tests: listen() first waits
 * KAIROS_TEST_LISTEN_DELAY_MS milliseconds, so that the moment between a socket's bind
 * and its listen lasts long enough to be seen (test_socket_ready.py). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

int listen(int fd, int backlog)
{
    int (*real)(int, int) = NULL;
    void *sym = dlsym(RTLD_NEXT, "listen");
    if (sym)
        memcpy(&real, &sym, sizeof real); /* ISO C has no cast from object to function */
    const char *ms = getenv("KAIROS_TEST_LISTEN_DELAY_MS");
    long v = ms ? atol(ms) : 0;
    if (v > 0) {
        struct timespec ts = {v / 1000, (v % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return real ? real(fd, backlog) : -1;
}
