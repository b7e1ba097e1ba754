/* folders.h - making the folders a path needs, as `mkdir -p` of its parent does: the
 * runtime folder that holds kairosd's socket and space mode's MPS folders.
 *
 * Thread rules: any thread.
 */
#ifndef KAIROS_DAEMON_FOLDERS_H
#define KAIROS_DAEMON_FOLDERS_H

/* Every missing folder above path, mode 0755 (before the umask). 0 or -errno. */
int folders_make_parents(const char *path);

#endif /* KAIROS_DAEMON_FOLDERS_H */
