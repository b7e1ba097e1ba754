/* dlopen_app.c - a program that loads one library the ways plugin hosts do and runs it.
 *
 * usage: dlopen_app [-D] [-N|-B] LIB [SYMBOL [ARGS...]]
 *
 * Loads LIB with dlopen(LIB, RTLD_NOW), with RTLD_DEEPBIND added by -D, or with
 * dlmopen into a new namespace (-N, LM_ID_NEWLM) or the base one (-B, LM_ID_BASE).
 * LIB may be a bare name: the dynamic linker then searches this program's RUNPATH
 * ($ORIGIN/plugins), which only works while dlopen sees this program as its caller.
 * Prints "dlopen_app: loaded LIB" or "dlopen_app: not loaded: DLERROR" (exit 1), then
 * calls int SYMBOL(argc, argv) with argv = SYMBOL ARGS... and exits with its result.
 * Parses its options by hand: the plugin may use getopt (tests/fakedrv/fakeapp.c).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int plugin_main_fn(int argc, char **argv);

static void *load(const char *lib, int mode, int ns)
{
    if (ns == 'N')
        return dlmopen(LM_ID_NEWLM, lib, mode);
    if (ns == 'B')
        return dlmopen(LM_ID_BASE, lib, mode);
    return dlopen(lib, mode);
}

int main(int argc, char **argv)
{
    int mode = RTLD_NOW, ns = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-D") == 0)
            mode |= RTLD_DEEPBIND;
        else if (strcmp(argv[i], "-N") == 0 || strcmp(argv[i], "-B") == 0)
            ns = argv[i][1];
        else
            break;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: dlopen_app [-D] [-N|-B] LIB [SYMBOL [ARGS...]]\n");
        return 2;
    }
    void *h = load(argv[i], mode, ns);
    if (!h) {
        printf("dlopen_app: not loaded: %s\n", dlerror());
        return 1;
    }
    printf("dlopen_app: loaded %s\n", argv[i]);
    fflush(stdout);
    if (i + 1 >= argc)
        return 0;
    void *sym = dlsym(h, argv[i + 1]);
    if (!sym) {
        printf("dlopen_app: no symbol %s: %s\n", argv[i + 1], dlerror());
        return 1;
    }
    plugin_main_fn *fn;
    memcpy(&fn, &sym, sizeof fn);
    return fn(argc - i - 1, argv + i + 1);
}
