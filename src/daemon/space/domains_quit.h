/* domains_quit.h - `kairosd --quit-domains`: ending for good the MPS control daemons a
 * stopped kairosd left running for its fault domains (docs/space.md).
 *
 * A kairosd that stops leaves its domains' daemons running so that their clients' work
 * goes on and its next start adopts them; a node that stops using Kairos (the package
 * removed, the service disabled) ends them with this. It refuses while a kairosd answers
 * on the socket (that kairosd would start them again), asks every daemon under the
 * socket's folder whose pid file names a live control daemon to quit (MPS's `quit`: the
 * daemon takes no new client and exits once its clients have ended), waits up to the
 * given seconds for them to exit, and says which still run.
 */
#ifndef KAIROS_DAEMON_DOMAINS_QUIT_H
#define KAIROS_DAEMON_DOMAINS_QUIT_H

#include <stdio.h>

#include "daemon/config/space_config.h"

/* 0: no daemon left running; 1: some still wait for their clients (asked to quit, they
 * exit once those end), or kairosd runs, or the folder cannot be read. Reports to out
 * (one line a daemon) and errors to err. */
int domains_quit_run(const char *socket_path, const struct space_config *cfg, double wait_s,
                     FILE *out, FILE *err);

#endif
