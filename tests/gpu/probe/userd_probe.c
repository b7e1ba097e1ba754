/* userd_probe.c - a measuring preload for the GPU suite's `probe` section: it answers
 * what a channel's USERD says about queued work, before the shim relies on it.
 *
 * It watches the RM calls that place each channel's USERD (RM_ALLOC of a
 * HOPPER_CHANNEL_GPFIFO_A with hUserdMemory[0]/userdOffset[0], RM_MAP_MEMORY of that
 * memory onto a file descriptor, the mmap of that descriptor), then a sampling thread
 * reads GPGet (+0x88) and GPPut (+0x8C) of every placed channel every ~20 us and logs
 * each change as "t_ns channel get put" (CLOCK_MONOTONIC) to $USERD_PROBE_OUT, and
 * each change of the words at +0x40..+0x60 (the pushbuffer Put/Get, reference,
 * top-level Get and their high halves: is there a sign of a kernel still running
 * with nothing queued behind it?) as "w t_ns channel w40 w44 ... w60" in hex. It
 * passes every call through unchanged; the load program calls userd_probe_stop()
 * before its context goes. An experiment instrument, not the shim: it
 * keeps its tables without locks beyond one mutex and bounds them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_CH 256
#define MAX_MAP 1024
#define NV_IOC_TYPE 0x46
#define ESC_RM_ALLOC 0x2B
#define ESC_RM_MAP_MEMORY 0x4E
#define CLASS_CHANNEL 0xC86Fu

struct channel {
    uint32_t client, handle, userd_mem;
    uint64_t userd_off;
    volatile uint32_t *userd; /* resolved lazily by the sampler */
    uint32_t words[9];        /* +0x40..+0x60 as last logged */
};
struct fd_map { /* what MAP_MEMORY put on a descriptor, then where mmap placed it */
    int fd;
    uint32_t client, mem;
    uint64_t off, len;
    char *cpu;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct channel channels[MAX_CH];
static int n_channels;
static struct fd_map maps[MAX_MAP];
static int n_maps;
static int (*real_ioctl)(int, unsigned long, ...);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static FILE *out;
static volatile int stopping;
static pthread_t sampler;
static int sampler_started;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t rd32(const void *p, size_t off)
{
    uint32_t v;
    memcpy(&v, (const char *)p + off, 4);
    return v;
}

static uint64_t rd64(const void *p, size_t off)
{
    uint64_t v;
    memcpy(&v, (const char *)p + off, 8);
    return v;
}

static void resolve(struct channel *c)
{
    for (int i = 0; i < n_maps; i++) {
        struct fd_map *m = &maps[i];
        if (!m->cpu || m->client != c->client || m->mem != c->userd_mem)
            continue;
        if (c->userd_off >= m->off && c->userd_off + 0x200 <= m->off + m->len) {
            c->userd = (volatile uint32_t *)(m->cpu + (c->userd_off - m->off));
            fprintf(out, "# channel %d handle 0x%x userd mem 0x%x +0x%llx at %p\n",
                    (int)(c - channels), c->handle, c->userd_mem,
                    (unsigned long long)c->userd_off, (void *)c->userd);
            return;
        }
    }
}

static void *sample_loop(void *arg)
{
    (void)arg;
    static uint32_t last_get[MAX_CH], last_put[MAX_CH];
    while (!stopping) {
        pthread_mutex_lock(&lock);
        uint64_t t = now_ns();
        for (int i = 0; i < n_channels; i++) {
            struct channel *c = &channels[i];
            if (!c->userd)
                resolve(c);
            if (!c->userd)
                continue;
            uint32_t get = c->userd[0x88 / 4], put = c->userd[0x8C / 4];
            if (get != last_get[i] || put != last_put[i]) {
                fprintf(out, "%llu %d %u %u\n", (unsigned long long)t, i, get, put);
                last_get[i] = get;
                last_put[i] = put;
            }
            uint32_t w[9];
            for (int k = 0; k < 9; k++)
                w[k] = c->userd[(0x40 + 4 * k) / 4];
            if (memcmp(w, c->words, sizeof w)) {
                memcpy(c->words, w, sizeof w);
                fprintf(out, "w %llu %d", (unsigned long long)t, i);
                for (int k = 0; k < 9; k++)
                    fprintf(out, " %x", w[k]);
                fputc('\n', out);
            }
        }
        pthread_mutex_unlock(&lock);
        struct timespec d = {0, 20000};
        nanosleep(&d, NULL);
    }
    return NULL;
}

static void note_alloc(void *arg, unsigned size)
{
    uint32_t status = rd32(arg, size == 48 ? 40 : 28);
    if (rd32(arg, 12) != CLASS_CHANNEL || status != 0 || n_channels >= MAX_CH)
        return;
    const char *params = (const char *)(uintptr_t)rd64(arg, 16);
    if (!params)
        return;
    struct channel *c = &channels[n_channels];
    c->client = rd32(arg, 0);
    c->handle = rd32(arg, 8);
    c->userd_mem = rd32(params, 32);
    c->userd_off = rd64(params, 64);
    fprintf(out, "# alloc channel %d handle 0x%x userd mem 0x%x +0x%llx gpfifo 0x%llx entries %u\n",
            n_channels, c->handle, c->userd_mem, (unsigned long long)c->userd_off,
            (unsigned long long)rd64(params, 8), rd32(params, 16));
    n_channels++;
    if (!sampler_started && pthread_create(&sampler, NULL, sample_loop, NULL) == 0)
        sampler_started = 1;
}

static void note_map(void *arg)
{
    if (rd32(arg, 40) != 0 || n_maps >= MAX_MAP)
        return;
    struct fd_map *m = &maps[n_maps++];
    m->client = rd32(arg, 0);
    m->mem = rd32(arg, 8);
    m->off = rd64(arg, 16);
    m->len = rd64(arg, 24);
    m->fd = (int)rd32(arg, 48);
    m->cpu = NULL;
}

int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!real_ioctl)
        real_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
    int rc = real_ioctl(fd, req, arg);
    unsigned type = (req >> 8) & 0xff, nr = req & 0xff, size = (req >> 16) & 0x3fff;
    if (rc != 0 || type != NV_IOC_TYPE || !arg || !out)
        return rc;
    pthread_mutex_lock(&lock);
    if (nr == ESC_RM_ALLOC && (size == 32 || size == 48))
        note_alloc(arg, size);
    else if (nr == ESC_RM_MAP_MEMORY && size == 56)
        note_map(arg);
    pthread_mutex_unlock(&lock);
    return rc;
}

static void note_mmap(void *addr, size_t len, int fd)
{
    pthread_mutex_lock(&lock);
    for (int i = n_maps - 1; i >= 0; i--)
        if (maps[i].fd == fd && !maps[i].cpu) {
            maps[i].cpu = addr;
            if (len < maps[i].len)
                maps[i].len = len;
            break;
        }
    pthread_mutex_unlock(&lock);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (!real_mmap)
        real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    void *p = real_mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && fd >= 0 && out)
        note_mmap(p, len, fd);
    return p;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}

__attribute__((constructor)) static void probe_init(void)
{
    const char *path = getenv("USERD_PROBE_OUT");
    out = fopen(path ? path : "/tmp/userd_probe.log", "w");
    if (out)
        setvbuf(out, NULL, _IOFBF, 1 << 20);
}

/* Called by the load program before it tears its context down (found with dlsym),
 * so the sampler never reads a USERD page the driver is unmapping. */
void userd_probe_stop(void);
void userd_probe_stop(void)
{
    stopping = 1;
    if (sampler_started)
        pthread_join(sampler, NULL);
    sampler_started = 0;
    pthread_mutex_lock(&lock);
    if (out)
        fclose(out);
    out = NULL;
    pthread_mutex_unlock(&lock);
}
