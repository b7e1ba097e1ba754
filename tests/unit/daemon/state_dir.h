/* state_dir.h - the temporary directory a state-file test writes in: made before
 * each test (cmocka setup), its state file and itself removed after (teardown), and
 * the registry's settings as kairosd hands them to the state file, so that the tests
 * of the state file (test_state.c), of the settings it carries (test_registry.c) and
 * of the chargeback counters it saves (test_usage.c) share one fixture. */
#ifndef KAIROS_TESTS_STATE_DIR_H
#define KAIROS_TESTS_STATE_DIR_H

/* The state file's path inside the directory, valid between setup and teardown. */
extern char path[256];

int state_dir_setup(void **state);
int state_dir_teardown(void **state);

struct compute_book;
struct settings_book;
struct state_settings_io;
/* The registry's settings, as kairosd gives them to the state file (registry_state_io),
 * in the books given: the compute policies in cb, the other settings in sb. One at a
 * time: the next call replaces it. */
const struct state_settings_io *io_of(struct compute_book *cb, struct settings_book *sb);

#endif /* KAIROS_TESTS_STATE_DIR_H */
