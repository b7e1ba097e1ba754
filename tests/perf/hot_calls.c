/* hot_calls.c - times the libc calls the shim interposes that a program may make in
 * a hot loop, outside any GPU work: getenv (a name that is set and one that is not),
 * an anonymous mmap and its munmap, ioctl and fcntl on a pipe, dup and close, open
 * and close of /dev/null. Prints "NAME NS" per call, the mean over N calls, for
 * scripts/bench-interposed, which runs it with and without the shim.
 * Usage: hot_calls [N] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile long sink; /* keeps the calls from being optimised away */

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void getenv_set(int fd)
{
    (void)fd;
    sink += getenv("PATH") != NULL;
}

static void getenv_unset(int fd)
{
    (void)fd;
    sink += getenv("KAIROS_BENCH_NOT_SET") != NULL;
}

static void mmap_munmap(int fd)
{
    (void)fd;
    void *a = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a != MAP_FAILED)
        munmap(a, 1 << 20);
}

static void ioctl_pipe(int fd)
{
    int n = 0;
    sink += ioctl(fd, FIONREAD, &n);
}

static void fcntl_getfl(int fd)
{
    sink += fcntl(fd, F_GETFL);
}

static void dup_close(int fd)
{
    close(dup(fd));
}

static void open_close(int fd)
{
    (void)fd;
    close(open("/dev/null", O_RDONLY));
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int p[2];
    if (n <= 0 || pipe(p)) {
        fprintf(stderr, "usage: hot_calls [N > 0]\n");
        return 2;
    }
    static const struct {
        const char *name;
        void (*call)(int fd);
    } calls[] = {
        {"getenv_set", getenv_set},   {"getenv_unset", getenv_unset},
        {"mmap_munmap", mmap_munmap}, {"ioctl_pipe", ioctl_pipe},
        {"fcntl_getfl", fcntl_getfl}, {"dup_close", dup_close},
        {"open_close", open_close},
    };
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        for (long i = 0; i < n / 10; i++) /* warm up */
            calls[c].call(p[0]);
        double t = now_ns();
        for (long i = 0; i < n; i++)
            calls[c].call(p[0]);
        printf("%s %.1f\n", calls[c].name, (now_ns() - t) / (double)n);
    }
    return 0;
}
