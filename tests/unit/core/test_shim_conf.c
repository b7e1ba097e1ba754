/* test_shim_conf.c - the node's shim settings: the file format, refusals that make
 * the shim fail closed, and when a KAIROS_SHIM_CONF override is trusted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/shim_conf.h"
#include "kairos/proto.h"

static void parse_ok(struct shim_conf *c, const char *text)
{
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "test");
    if (shim_conf_parse(c, text, strlen(text)))
        fail_msg("'%s' refused: %s", text, c->problem);
}

static void refused(const char *text, const char *reason_part)
{
    struct shim_conf c;
    memset(&c, 0, sizeof c);
    snprintf(c.source, sizeof c.source, "test");
    assert_int_equal(shim_conf_parse(&c, text, strlen(text)), -1);
    if (!strstr(c.problem, reason_part))
        fail_msg("'%s': expected '%s' in '%s'", text, reason_part, c.problem);
    assert_false(c.fail_open); /* a refused file never means fail-open */
    assert_string_equal(c.socket_path, KAIROS_DEFAULT_SOCKET);
}

static void test_format(void **state)
{
    (void)state;
    struct shim_conf c;
    parse_ok(&c, "");
    assert_string_equal(c.socket_path, KAIROS_DEFAULT_SOCKET);
    assert_false(c.fail_open);
    parse_ok(&c, "# node\n\n  socket:   /run/k/s.sock  # comment\non_daemon_down: open");
    assert_string_equal(c.socket_path, "/run/k/s.sock");
    assert_true(c.fail_open);
    parse_ok(&c, "on_daemon_down: closed\r\n");
    assert_false(c.fail_open);
    assert_false(c.register_always);
    parse_ok(&c, "register: always\n");
    assert_true(c.register_always);
    assert_false(c.driver_passthrough); /* an unknown driver is refused by default */
    parse_ok(&c, "unsupported_driver: passthrough\n");
    assert_true(c.driver_passthrough);
    parse_ok(&c, "unsupported_driver: refuse\n");
    assert_false(c.driver_passthrough);
}

/* The sample etc/shim.conf reads as the defaults it documents. */
static void test_sample(void **state)
{
    (void)state;
    const char *dir = getenv("KAIROS_FIXTURES");
    char path[512];
    snprintf(path, sizeof path, "%s/../../etc/shim.conf", dir ? dir : ".");
    FILE *f = fopen(path, "r");
    if (!f)
        skip();
    char text[SHIM_CONF_MAX_BYTES];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    struct shim_conf c;
    memset(&c, 0, sizeof c);
    assert_int_equal(shim_conf_parse(&c, text, n), 0);
    assert_string_equal(c.socket_path, KAIROS_DEFAULT_SOCKET);
    assert_false(c.fail_open);
    assert_false(c.driver_passthrough);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("socket: relative.sock\n", "absolute path");
    {
        struct shim_conf c;
        memset(&c, 0, sizeof c);
        snprintf(c.source, sizeof c.source, "test");
        assert_int_equal(shim_conf_parse(&c, "register: always\nbogus: 1\n", 26), -1);
        assert_false(c.register_always); /* a refused file keeps the defaults */
    }
    refused("on_daemon_down: open\nsocket: /a\nsocket_typo: /b\n", "line 3: unknown key");
    refused("on_daemon_down: yes\n", "write closed or open");
    refused("register: sometimes\n", "write asked or always");
    refused("unsupported_driver: ignore\n", "write refuse or passthrough");
    {
        struct shim_conf c;
        memset(&c, 0, sizeof c);
        snprintf(c.source, sizeof c.source, "test");
        const char *text = "unsupported_driver: passthrough\nbogus: 1\n";
        assert_int_equal(shim_conf_parse(&c, text, strlen(text)), -1);
        assert_false(c.driver_passthrough); /* a refused file keeps the defaults */
    }
    refused("on_daemon_down: open\non_daemon_down: closed\n", "given twice");
    refused("socket /run/k.sock\n", "expected 'key: value'");
    char longpath[200];
    memset(longpath, 'a', sizeof longpath);
    memcpy(longpath, "socket: /", 9);
    longpath[sizeof longpath - 1] = 0;
    refused(longpath, "shorter than 108");
}

/* A file with text and mode in a temporary directory; its path in out. */
static void write_file(char *out, size_t cap, const char *text, mode_t mode)
{
    static unsigned n;
    snprintf(out, cap, "/tmp/test-shim-conf-%d-%u", (int)getpid(), n++);
    FILE *f = fopen(out, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(out, mode), 0);
}

static void test_override_trust(void **state)
{
    (void)state;
    char path[128];
    struct shim_conf c;
    write_file(path, sizeof path, "socket: /tmp/mine.sock\non_daemon_down: open\n", 0644);
    /* owned by the owner of libkairos.so (or root), writable by no one else: used */
    shim_conf_load(&c, path, getuid());
    assert_string_equal(c.socket_path, "/tmp/mine.sock");
    assert_true(c.fail_open);
    assert_string_equal(c.source, path);
    assert_string_equal(c.note, "");
    /* writable by others: ignored, the node's file (or defaults) instead */
    assert_int_equal(chmod(path, 0666), 0);
    shim_conf_load(&c, path, getuid());
    assert_non_null(strstr(c.note, "writable by its group or by others"));
    assert_string_not_equal(c.source, path);
    assert_int_equal(chmod(path, 0644), 0);
    /* owned by someone who is neither root nor libkairos.so's owner: ignored */
    if (getuid() == 0)
        assert_int_equal(chown(path, 65534, 65534), 0);
    shim_conf_load(&c, path, getuid() == 0 ? 0 : getuid() + 1);
    assert_non_null(strstr(c.note, "neither root nor the owner of libkairos.so"));
    assert_string_not_equal(c.source, path);
    unlink(path);
    /* absent: ignored with a note */
    shim_conf_load(&c, "/nonexistent/shim.conf", getuid());
    assert_non_null(strstr(c.note, "KAIROS_SHIM_CONF=/nonexistent/shim.conf ignored"));
    /* a bad trusted file: the problem, and closed */
    write_file(path, sizeof path, "on_daemon_down: open\nsocket: nope\n", 0600);
    shim_conf_load(&c, path, getuid());
    assert_non_null(strstr(c.problem, "line 2"));
    assert_false(c.fail_open);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_sample),
        cmocka_unit_test(test_override_trust),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
