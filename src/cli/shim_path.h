/* shim_path.h - where the CLI finds libkairos.so to preload into a command.
 *
 * $KAIROS_SHIM when set, else relative to the kairos binary: the build tree
 * (../shim/libkairos.so) or where meson installs it (LIBDIR/kairos/libkairos.so
 * seen from BINDIR), else that install path as configured (PREFIX/LIBDIR/kairos);
 * and the node's settings such a shim will read.
 */
#ifndef KAIROS_CLI_SHIM_PATH_H
#define KAIROS_CLI_SHIM_PATH_H

#include <stddef.h>

#include "core/shim_conf.h"

/* Fills out with a readable path; returns 0, or -1 when none was found. */
int shim_path_find(char *out, size_t cap);

/* The settings the shim at path will read (core/shim_conf.h), judged as that
 * shim judges them: KAIROS_SHIM_CONF trusted when owned by root or by the owner of
 * the file at path. */
void shim_path_conf(const char *shim, struct shim_conf *c);

/* Puts shim first in LD_PRELOAD, keeping what was there. Returns 0 or -ENOMEM. */
int shim_path_preload(const char *shim);

#endif /* KAIROS_CLI_SHIM_PATH_H */
