/* test_helpers.h - small helpers shared by the core unit tests (fixture paths,
 * replaying a recording file through a trace session). */
#ifndef KAIROS_TEST_HELPERS_H
#define KAIROS_TEST_HELPERS_H

#include <stdio.h>

#include "core/rm_names.h"
#include "core/trace_session.h"

/* Path of a fixture under tests/fixtures (KAIROS_FIXTURES), in a static buffer. */
const char *fixture_path(const char *name);

/* Feeds every line of path to the session; returns the number of lines that did
 * not parse, or -1 if the file cannot be opened. */
int replay_file(struct trace_session *s, const char *path);

#endif
