/* agent.h - the shim's link to kairosd: one connection per process.
 *
 * Speaks include/kairos/proto.h over a SOCK_SEQPACKET socket: HELLO on the first
 * GPU use (or again with REATTACH after the daemon restarted); CREDIT one-way
 * (its replies and CREDIT_RECALL arrive as pushes); CHARGE (waits for the GRANT),
 * COMMIT and RELEASE for peers without credit.
 * The socket is moved to a high descriptor number with close-on-exec, and the
 * shim's close/dup2 tell the agent when the application closes or replaces it,
 * so protocol bytes never reach one of the application's files.
 *
 * TIME_POLICY pushes are read under the same mutex and handed to the handler set
 * with agent_set_policy_handler (timectl.h), by a requester waiting for its reply
 * or by agent_service, the watcher thread's call.
 *
 * Thread rules: all functions are thread-safe (one mutex around each exchange);
 * never called with the shim's state lock held.
 */
#ifndef KAIROS_SHIM_AGENT_H
#define KAIROS_SHIM_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kairos/proto.h"
#include "shim/real.h"

struct agent_quota {
    uint32_t tenant_id;
    uint32_t n_gpus;
    uint64_t quota[KAIROS_MAX_GPUS];
    bool routed;                /* route holds kairosd's ROUTED (a first HELLO to a kairosd
                                 * that knows space mode) */
    struct kairos_routed route; /* how this process reaches the GPU (space_route.h) */
};

/* Connects and registers as a member of tenant ("": wherever kairosd places this
 * process, KAIROS_HELLO_PLACE). held is what this process holds
 * (sent with reattach). A first registration (not reattach) also asks ROUTE where
 * kairosd knows it (KAIROS_HELLO_SPACE), and a refused ROUTE is a refusal. Returns 0;
 * -ENOENT/-ECONNREFUSED/-ETIMEDOUT when the daemon cannot be reached; -EPERM when it
 * refused us (err says why). */
int agent_connect(const struct shim_real *r, const char *socket_path, const char *tenant,
                  const uint64_t held[KAIROS_MAX_GPUS], bool reattach, struct agent_quota *q,
                  char *err, size_t err_len);

/* CHARGE with its flags (KAIROS_CHARGE_MANAGED: a managed range) and wait for the
 * GRANT. Returns 0 with *grant filled, or -errno when the daemon is gone (-EPIPE,
 * -ECONNRESET, -ETIMEDOUT, -ENOTCONN). */
int agent_charge_flags(uint32_t gpu, uint64_t bytes, uint64_t token, uint32_t flags,
                       struct kairos_grant *grant);
int agent_commit(const struct kairos_commit *commit);
int agent_release(uint32_t gpu, uint64_t bytes);

/* RUNNABLE, one-way, for the control thread: never waits, neither for the mutex
 * (a requester may hold it for seconds waiting for its reply) nor for room in
 * the socket. Returns 0, -EBUSY when it could not be sent now (try again
 * later), or -errno (-ENOTCONN: no daemon). */
int agent_report_runnable(const struct kairos_runnable *r);

/* ENDING, one-way (soft_end.h): waits at most AGENT_ENDING_LOCK_MS for the mutex,
 * never for room in the socket. 0, or -errno (-ENOTCONN: no daemon; -EBUSY: the
 * mutex or the socket stayed busy). */
#define AGENT_ENDING_LOCK_MS 1000
int agent_send_ending(void);

/* A message with no reply (SHARED with KAIROS_SHARED_FREED): sent on the socket
 * before anything this thread sends after it, never waiting for room there (a
 * kairosd that stopped reading must not hang the caller's free). 0, -EBUSY when
 * the socket is full (the caller keeps what it would have released), or a
 * negative errno. */
int agent_tell(uint16_t type, const void *body, uint32_t size);

/* FORKED or INHERITED (proto.h): sends it and waits for kairosd's OK. Returns 0,
 * -EAGAIN with kairosd's reason in err when it follows no more hand-overs for this
 * process's tenant or user (KAIROS_ERR_BUSY), -EPERM with it when it refused the
 * claim otherwise, or -errno when the daemon is gone (-ENOTCONN: no connection). */
int agent_report_handover(uint16_t type, const void *body, uint32_t size, char *err,
                          size_t err_len);
/* FORKED for child, never waiting for a lock that is held across a blocking call
 * (issue 25, item 9). With a fork ticket in hand (reserved by kairosd ahead, in the
 * tenant's and uid's share of hand-overs; refilled off the fork path by
 * FORK_TICKETS, whose answer is a push) it sends FORKED with KAIROS_FORKED_TICKET
 * and waits for nothing: 0. With none it asks and waits up to AGENT_FORK_WAIT_MS
 * for one: -EAGAIN (err says why) when kairosd answers none or does not answer in
 * time (the fork must fail). -ENOTCONN without a link (the fork goes unreported;
 * the watcher's reattach adopts the children, heirs.h), -EOPNOTSUPP when this
 * link's kairosd gives no tickets (a kairosd of before: agent_report_handover). */
int agent_report_fork(pid_t child, char *err, size_t err_len);
/* CREDIT, one-way, for the credit sender: never waits for room in the socket.
 * Returns 0, -EAGAIN (try later) or -errno (-ENOTCONN: no daemon). */
int agent_send_credit(const struct kairos_credit *c);
/* The same for an allocating thread: never waits for the agent's mutex either
 * (-EBUSY while a registration holds it). */
int agent_try_send_credit(const struct kairos_credit *c);
/* Receives a CREDIT reply (credit set) or a CREDIT_RECALL (recall set), with the
 * agent's mutex held, from whichever thread read it: quick, no agent calls. */
typedef void agent_credit_fn(const struct kairos_credit *credit,
                             const struct kairos_credit_recall *recall);
void agent_set_credit_handler(agent_credit_fn *fn);
/* Receives a ROOM (a refusal on gpu may fit now), under the same rules. */
typedef void agent_room_fn(uint32_t gpu);
void agent_set_room_handler(agent_room_fn *fn);

bool agent_connected(void);
/* Receives a TIME_POLICY pushed by the daemon. Called with the agent's mutex held,
 * from whichever thread read it (a requester or agent_service): it must be quick
 * and must not call the agent. */
typedef void agent_policy_fn(const struct kairos_time_policy *policy);
void agent_set_policy_handler(agent_policy_fn *fn);

/* The watcher's call, and an allocating thread's while it waits for its credit:
 * waits up to timeout_ms (without the mutex) for the daemon to push a message or
 * hang up; dispatches pushes. Returns 0 while connected, -ENOTCONN when there is
 * no connection (any more: hang-up, error, or an unexpected message). */
int agent_service(int timeout_ms);
/* The application closed or replaced descriptor fd: forget it if it was ours. */
bool agent_owns_fd(int fd);
void agent_forget(void);
/* In a forked child: the parent's connection is the parent's. */
void agent_after_fork(void);

#endif /* KAIROS_SHIM_AGENT_H */
