/* service.h - kairosd and its service manager (systemd, Type=notify): READY=1 once
 * the socket accepts, STOPPING=1 when a stop begins, and WATCHDOG=1 pings from the
 * event loop (a timer at half of WATCHDOG_USEC), so a loop that stops turning stops
 * the pings and systemd restarts kairosd. Through libsystemd's sd_notify; without
 * NOTIFY_SOCKET (not under systemd) each call does nothing.
 *
 * Thread rules: one thread, the loop's.
 */
#ifndef KAIROS_DAEMON_SERVICE_H
#define KAIROS_DAEMON_SERVICE_H

struct loop;
struct service;

/* Starts the watchdog pings when the service manager asked for them (WATCHDOG_USEC
 * for this process). Returns 0 or a negative errno; *out is NULL on failure. */
int service_init(struct service **out, struct loop *loop);
void service_fini(struct service *s);

/* READY=1 with STATUS=status. */
void service_ready(struct service *s, const char *status);
/* STOPPING=1. */
void service_stopping(struct service *s);
/* RELOADING=1 then READY=1 around a reload (SIGHUP). */
void service_reloading(struct service *s, int done);

#endif /* KAIROS_DAEMON_SERVICE_H */
