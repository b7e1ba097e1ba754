/* test_exports.c - libkairos.so exports exactly the interposed symbols and needs only libc.
 *
 * Reads `nm -D --defined-only` and `readelf -d` of the library given as argv[1]
 * and compares them with SHIM_INTERPOSED and SHIM_LOADER (interposed.h; the latter
 * only where meson builds the dlopen stub), the single list, so
 * the version script, the wrappers and the list cannot drift apart. Sanitizer
 * builds may also need their runtimes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shim/interposed.h"

static const char *lib_path;

static const char *const expected[] = {
#define NAME(ret, name, params) #name,
    SHIM_INTERPOSED(NAME)
    SHIM_OWN(NAME)
#ifndef KAIROS_NO_LOADER_STUB
    SHIM_LOADER(NAME)
#endif
#undef NAME
};
#define N_EXPECTED (sizeof expected / sizeof expected[0])

static FILE *run(const char *tool)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s '%s' 2>/dev/null", tool, lib_path);
    return popen(cmd, "r");
}

static void test_exported_symbols(void **state)
{
    (void)state;
    FILE *p = run("nm -D --defined-only");
    if (!p)
        skip();
    bool seen[N_EXPECTED] = {false};
    char line[512];
    int extra = 0, lines = 0;
    while (fgets(line, sizeof line, p)) {
        char addr[64], type[8], name[256];
        if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3)
            continue;
        lines++;
        char *at = strchr(name, '@');
        if (at)
            *at = '\0';
        bool known = false;
        for (size_t i = 0; i < N_EXPECTED; i++) {
            if (strcmp(name, expected[i]) == 0) {
                seen[i] = known = true;
                break;
            }
        }
        if (!known) {
            print_error("unexpected exported symbol: %s\n", name);
            extra++;
        }
    }
    int rc = pclose(p);
    if (rc != 0 && lines == 0)
        skip(); /* no nm here */
    assert_int_equal(extra, 0);
    for (size_t i = 0; i < N_EXPECTED; i++) {
        if (!seen[i])
            print_error("interposed symbol not exported: %s\n", expected[i]);
        assert_true(seen[i]);
    }
}

static void test_needs_only_libc(void **state)
{
    (void)state;
    FILE *p = run("readelf -d");
    if (!p)
        skip();
    char line[512];
    int needed = 0, libc = 0, other = 0;
    while (fgets(line, sizeof line, p)) {
        if (!strstr(line, "(NEEDED)"))
            continue;
        char *open = strchr(line, '['), *close = open ? strchr(open, ']') : NULL;
        if (!open || !close)
            continue;
        *close = '\0';
        const char *lib = open + 1;
        needed++;
        if (strcmp(lib, "libc.so.6") == 0 || strncmp(lib, "ld-linux", 8) == 0) {
            libc++;
        } else {
#ifdef KAIROS_SANITIZED
            if (strncmp(lib, "libasan", 7) == 0 || strncmp(lib, "libubsan", 8) == 0 ||
                strncmp(lib, "libtsan", 7) == 0)
                continue;
#endif
            print_error("unexpected dependency: %s\n", lib);
            other++;
        }
    }
    int rc = pclose(p);
    if (rc != 0 && needed == 0)
        skip(); /* no readelf here */
    assert_int_equal(libc, 1);
    assert_int_equal(other, 0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/libkairos.so\n", argv[0]);
        return 2;
    }
    lib_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exported_symbols),
        cmocka_unit_test(test_needs_only_libc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
