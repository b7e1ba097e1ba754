/* state_dir.h - the temporary directory a state-file test writes in: made before
 * each test (cmocka setup), its state file and itself removed after (teardown), so
 * that the tests of the state file (test_state.c) and of the settings it carries
 * (test_registry.c) share one fixture. */
#ifndef KAIROS_TESTS_STATE_DIR_H
#define KAIROS_TESTS_STATE_DIR_H

/* The state file's path inside the directory, valid between setup and teardown. */
extern char path[256];

int state_dir_setup(void **state);
int state_dir_teardown(void **state);

#endif /* KAIROS_TESTS_STATE_DIR_H */
