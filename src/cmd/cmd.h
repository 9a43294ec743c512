/* cmd: runs one command request — dispatch by name through one table,
 * common argument checks, and the one place an error becomes
 * {ok: 0, errmsg, code, codeName}. The network layer hands requests in and
 * sends what comes out. */
#ifndef ATOMDB_CMD_H
#define ATOMDB_CMD_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "txn/lockmgr.h"
#include "util/dberr.h"
#include "wire/wire.h"

typedef struct cmd_client cmd_client_t;

/* What the command layer knows about the connection a request came on. The
 * network layer owns it and fills the first group. */
struct cmd_client {
    /* -- set by the network layer -- */
    int64_t id;                  /* connectionId */
    char remote[64];             /* "ip:port" of the peer */
    char local[64];              /* "ip:port" of our end */
    bool is_local;               /* the peer is on loopback */
    /* Sends a reply for the request that was parked (see CMD_PARKED). */
    void (*send_parked_reply)(cmd_client_t *client, const bson_t *body);
    /* -- command layer -- */
    int compressors[4];          /* negotiated compressor ids, in preference order */
    int ncompressors;
    bson_t *metadata;            /* `client` document from the first hello, or NULL */
    uv_timer_t *park_timer;      /* running while an awaitable hello waits */
    bool park_legacy;            /* the parked hello was isMaster/ismaster */
    bool park_hello_ok;          /* ... and asked helloOk */
    bool park_exhaust;           /* ... with exhaustAllowed: stream replies */
    uint64_t park_await_ms;      /* its maxAwaitTimeMS */
    /* Sends one streamed reply (moreToCome) for the parked request, which
     * stays parked. */
    void (*send_stream_reply)(cmd_client_t *client, const bson_t *body);
    bool rerun;                  /* cmd_run is running a parked request again */
    /* Runs the parked request again (after a lock wait). */
    void (*rerun_parked)(cmd_client_t *client);
    /* -- command layer: waiting for a document lock -- */
    lock_waiter_t lock_waiter;   /* queued on a lock while parked */
    uv_timer_t *rerun_timer;     /* runs the parked request on the next turn */
    bool lock_timed_out;         /* the wait ended by its deadline */
    void *resume;                /* where a parked batch stopped (crud.c) */
    void (*resume_free)(void *resume);
    /* -- command layer: the operation in progress (stats.c, the slow log) -- */
    uint64_t op_start_hr;        /* uv_hrtime() when the request first ran */
    uint64_t op_parked_hr;       /* when it last parked */
    uint64_t op_wait_ns;         /* time parked so far (lock and lease waits) */
    const void *op_def;          /* the parked command's table row */
    void *op;                    /* its operation while one runs on a fiber (cmd/op.c) */
    /* -- command layer: currentOp and killOp of every request (cmd/op.c) -- */
    int64_t op_id;               /* opid of the request running or parked now */
    const wire_request_t *op_req; /* that request: borrowed while it runs or is parked */
    int op_wait;                 /* CMD_WAIT_*: what a parked request waits for */
    char op_wait_on[160];        /* ... its namespace (document lock) or lock name (lease) */
    uint64_t op_wait_hr;         /* ... since when (uv_hrtime) */
    bool op_killed;              /* killOp reached the parked request: it fails (11601) */
    bool op_listed;              /* in op.c's list of connections */
    cmd_client_t *op_prev, *op_next;
    /* -- command layer: authentication (cmd/access.c, cmd/sasl.c) -- */
    struct cmd_auth *auth;       /* who is logged in, a SASL conversation; NULL before any */
    /* -- set by cmd_run for the network layer -- */
    uint64_t wait_lsn;           /* the reply waits until this log record is durable */
    bool wait_sync;              /* ... fdatasync'ed (fsync mode, j: true, w: majority) */
};

/* What a parked request waits for (cmd_client.op_wait), for currentOp's
 * waitingForLock. */
enum {
    CMD_WAIT_NONE,
    CMD_WAIT_DOCUMENT_LOCK, /* a document locked by another transaction */
    CMD_WAIT_LEASE,         /* a lease (acquireLock) held by another owner */
};

/* What cmd_run did with a request. */
typedef enum cmd_status {
    CMD_REPLIED, /* `reply` holds the answer */
    CMD_PARKED,  /* the answer comes later through send_parked_reply */
    CMD_CLOSE,   /* close the connection without a reply (shutdown) */
} cmd_status_t;

/* Runs `req` for `client`. On CMD_REPLIED `reply` (initialised by the
 * caller) holds the reply body, ok: 1 or ok: 0. */
cmd_status_t cmd_run(cmd_client_t *client, const wire_request_t *req, bson_t *reply);

/* Counts a parked request answered outside cmd_run (a lease wait that
 * ended) into the command statistics. */
void cmd_finish_parked(cmd_client_t *client, bool ok);

struct stats_cmd;
/* Called once per command name with its statistics (stats.h). */
typedef void (*cmd_stats_fn)(const char *name, const struct stats_cmd *s, void *arg);

/* Calls `fn` for every command of the table, then once for "unknown". */
void cmd_stats_foreach(cmd_stats_fn fn, void *arg);

/* Commands answered with ok: 0 since start (serverStatus asserts.user). */
int64_t cmd_stats_user_asserts(void);

/* Builds the error reply for `err` into `reply` (initialised, empty). */
void cmd_error_reply(bson_t *reply, const dberr_t *err);

/* Resident and virtual bytes of this process (/proc/self/statm); 0 when
 * unreadable. serverStatus.mem and the metrics port. */
void cmd_process_memory(int64_t *resident, int64_t *virt);

/* Releases what the command layer attached to `client` (call on close). */
void cmd_client_closed(cmd_client_t *client);

#endif
