/* state_dir.c - the temporary state-file directory of the daemon's unit tests (see
 * state_dir.h). */
#include "state_dir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/state/state.h"
#include "daemon/tenants/registry.h"

static char dir[] = "/tmp/kairos-state-XXXXXX";
char path[256];

int state_dir_setup(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/state.json", dir);
    return 0;
}

int state_dir_teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(dir);
    memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
    return 0;
}

const struct state_settings_io *io_of(struct compute_book *cb, struct settings_book *sb)
{
    static struct registry_books books;
    static struct state_settings_io v;
    books = (struct registry_books){cb, sb};
    v = registry_state_io(&books);
    return &v;
}
