/* op: the operations in progress. A command that may touch many documents
 * (find, getMore, aggregate, count, distinct, update, delete,
 * findAndModify, explain) runs on its own fiber (util/fiber.h) so it can
 * give the loop back between slices; between slices the others' requests
 * run. The table of running operations answers currentOp and killOp.
 * Loop thread only. See docs/design.md ("Long operations"). */
#ifndef ATOMDB_OP_H
#define ATOMDB_OP_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "util/dberr.h"

/* Runs `req` for `client` through `run` (cmd_run's body): on a fiber when
 * the command may run long, else directly. Returns what `run` returned,
 * or CMD_PARKED when the command yielded: its reply then comes through
 * client->send_parked_reply once it finishes. */
cmd_status_t op_run(cmd_client_t *client, const wire_request_t *req, bson_t *reply,
                    cmd_status_t (*run)(cmd_client_t *client, const wire_request_t *req,
                                        bson_t *reply));

/* The connection is closing: interrupts its operation, if one is
 * suspended, and runs it to its end before the request is freed. */
void op_client_closed(cmd_client_t *client);

/* Starts the current operation's maxTimeMS clock (no effect off a fiber:
 * such commands do not run long). */
void op_set_max_time(int64_t ms);

/* What op_append_current lists besides the operations in progress. */
enum {
    OP_LIST_IDLE_CONNECTIONS = 1, /* $all, idleConnections */
    OP_LIST_IDLE_SESSIONS = 2,    /* idle transactions: idleSessions (default true) */
};

/* Appends one document per operation in progress to array `inprog`
 * (mongod's currentOp shape): those running in slices and the requests
 * parked on a document lock or a lease (waitingForLock: true, and
 * atomdb's waitingFor); OP_LIST_IDLE_CONNECTIONS adds an active: false
 * entry per idle connection, OP_LIST_IDLE_SESSIONS one (type:
 * "idleSession", with its lsid, transaction and an opid killOp takes)
 * per transaction no request is running for; with owner_of, only the
 * entries of the user logged in on that connection ($ownOps, allUsers:
 * false). */
void op_append_current(bson_t *inprog, unsigned what, const cmd_client_t *owner_of);

/* Interrupts operation `opid` with Interrupted (11601) at its next slice;
 * a request parked on a document lock or a lease leaves the wait and
 * fails at once; an idle transaction is aborted (its next statement or
 * commit gets NoSuchTransaction 251). False when no such operation runs. */
bool op_kill(int64_t opid);

/* The slice of a suspended operation while other requests keep arriving
 * (setParameter atomdbBusyYieldPeriodMicros, default 200 us; never longer
 * than atomdbYieldPeriodMicros, and cut to an eighth of the loop time the
 * other requests took since its last slice, 20 us at the least). */
void op_set_busy_slice_us(int64_t us);
int64_t op_busy_slice(void);

/* serverStatus().atomdbOperations: running, suspended, slices resumed,
 * those over 1 ms and the longest (wall clock), the yield period. */
void op_append_status(bson_t *out);

#endif
