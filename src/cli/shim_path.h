/* shim_path.h - where the CLI finds libkairos.so to preload into a command.
 *
 * $KAIROS_SHIM when set, else relative to the kairos binary: the build tree
 * (../shim/libkairos.so) or where meson installs it (LIBDIR/kairos/libkairos.so
 * seen from BINDIR), else that install path as configured (PREFIX/LIBDIR/kairos).
 */
#ifndef KAIROS_CLI_SHIM_PATH_H
#define KAIROS_CLI_SHIM_PATH_H

#include <stddef.h>

/* Fills out with a readable path; returns 0, or -1 when none was found. */
int shim_path_find(char *out, size_t cap);

/* Puts shim first in LD_PRELOAD, keeping what was there. Returns 0 or -ENOMEM. */
int shim_path_preload(const char *shim);

#endif /* KAIROS_CLI_SHIM_PATH_H */
