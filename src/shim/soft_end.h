/* soft_end.h - a job scheduler's SIGTERM to an MPS client ends it without harming its
 * fault domain (space mode, docs/space.md "Faults").
 *
 * Slurm and Kubernetes end a job with SIGTERM, SIGKILL later. A process that dies of
 * SIGTERM's default action with work in flight on its MPS server faults every client
 * of that server, as a SIGKILL does (docs/h200-measurements.md). Once kairosd routed
 * this process to a fault domain's MPS (space_route.h), the shim catches SIGTERM where
 * the application left it to the default action: the handler puts the default back and
 * wakes the shim's thread (sem_post, async-signal-safe; it does nothing else), which
 * sends ENDING; kairosd ends the MPS client (terminate_client) and sends SIGTERM again,
 * which now ends the process. If none comes within KAIROS_ENDING_WAIT_MS (or kairosd
 * cannot be told), the thread raises SIGTERM itself: the process always ends.
 *
 * What the application sees: a SIGTERM handler of its own, set before or after, is
 * its own (ours is installed only over SIG_DFL, and a later sigaction replaces it);
 * SIG_IGN stays ignored; sigaction(SIGTERM, NULL, &old) shows our handler until the
 * first SIGTERM. A forked child gets the default back (pthread_atfork); a vfork child
 * that catches it before its exec puts the default back and raises SIGTERM at once
 * (the handler compares getpid with the armed process's); exec resets it anyway.
 *
 * Thread rules: soft_end_arm from any thread (once per process; later calls do
 * nothing); the handler runs in whichever thread the kernel picks.
 */
#ifndef KAIROS_SHIM_SOFT_END_H
#define KAIROS_SHIM_SOFT_END_H

#include <stdbool.h>

/* Sends ENDING to kairosd without waiting for a reply: 0, or -errno (not connected). */
typedef int soft_end_sender(void);

/* Catches SIGTERM for this process if its disposition is SIG_DFL, with send to tell
 * kairosd. Returns whether it is caught. */
bool soft_end_arm(soft_end_sender *send);

#endif /* KAIROS_SHIM_SOFT_END_H */
