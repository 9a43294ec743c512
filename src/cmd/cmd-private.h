/* cmd-private: what the command handlers share — the per-request context,
 * the handler signature, argument helpers and the handlers themselves
 * (one file per family: hello.c, admin.c, dbcmds.c, crud.c). */
#ifndef ATOMDB_CMD_PRIVATE_H
#define ATOMDB_CMD_PRIVATE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "cmd/server.h"
#include "store/collection.h"
#include "util/bsonview.h"
#include "util/dberr.h"
#include "util/shellfmt.h"

/* Top-level fields indexed once per request, so that the dozen lookups a
 * command makes do not each walk the document (cmd_find). */
#define CMD_FIELDS_MAX 24

typedef struct cmd_field {
    const char *key;
    bson_iter_t it;
} cmd_field_t;

/* The command's writeConcern (src/cmd/concern.c). */
typedef struct cmd_write_concern {
    bool given;        /* a non-empty writeConcern was sent */
    bool w_given;
    int w;             /* number of nodes; -1: `mode` names them */
    char mode[64];     /* "majority" or a tag set's name */
    bool majority;
    bool j, fsync;
    int64_t wtimeout;  /* ms; 0: none */
} cmd_write_concern_t;

/* The command's readConcern. */
#include "store/clock.h"
typedef struct cmd_read_concern {
    bool given;
    char level[16];    /* "" when not given */
    bool has_after, has_at;
    clock_ts_t after;  /* afterClusterTime */
    clock_ts_t at;     /* atClusterTime */
} cmd_read_concern_t;

/* One request as a handler sees it. */
typedef struct cmd_ctx {
    cmd_client_t *client;
    const wire_request_t *req;
    const bson_t *cmd;    /* the whole command document */
    const char *name;     /* the command name (first key) */
    const char *db;       /* $db */
    bson_iter_t arg;      /* the first element: the command's own value */
    int64_t max_time_ms;  /* 0 when none */
    bson_t *reply;        /* handlers append their fields; ok is added after */
    bool parked;          /* set by a handler that will answer later */
    bool close;           /* set by shutdown: close without a reply */
    bool wait_sync;       /* writeConcern asks for fdatasync (j: true, w: majority) */
    cmd_write_concern_t wc; /* parsed writeConcern */
    cmd_read_concern_t rc;  /* parsed readConcern */
    bool cursor_no_timeout; /* noCursorTimeout for the cursor this command opens */
    struct view *view;    /* what the command reads and writes through */
    struct session *session; /* the lsid's session, or NULL */
    int64_t txn_number;   /* txnNumber, or -1 */
    bool in_txn;          /* part of a multi-document transaction */
    bool retry_progress;  /* a retryable batch recorded its progress (crud.c):
                           * its outcome must be recorded durably */
    bool retry_fresh;     /* a retryable write whose txnNumber has nothing
                           * stored (cmd_session_prepare looked): no
                           * progress of an earlier run to resume */
    bool indexed;         /* fields[] holds every top-level field of cmd */
    uint8_t nfields;
    uint64_t first_bits; /* bit (c & 63) for the first byte c of each key in fields[] */
    cmd_field_t fields[CMD_FIELDS_MAX];
} cmd_ctx_t;

/* Indexes ctx->cmd's top-level fields for cmd_find (left unindexed, and
 * searched directly, when it has more than CMD_FIELDS_MAX). */
void cmd_ctx_index(cmd_ctx_t *ctx);

/* A command handler: appends its reply fields, or fails with `err`. */
typedef bool (*cmd_fn)(cmd_ctx_t *ctx, dberr_t *err);

/* Borrows the document or array under `it` into `out` (no copy). False
 * when `it` holds neither. The handlers' name for bsonview_iter. */
static inline bool cmd_iter_doc(const bson_iter_t *it, bson_t *out)
{
    return bsonview_iter(it, out);
}

/* Parses and checks the command's writeConcern into ctx->wc (and sets
 * ctx->wait_sync for j, fsync and "majority"); `is_write`: the command
 * writes or changes the catalog. Fails (nothing runs) on a malformed one,
 * or on a command that does not take one. */
bool cmd_write_concern_parse(cmd_ctx_t *ctx, bool is_write, dberr_t *err);
/* After a command that wrote: appends writeConcernError for what one node
 * cannot satisfy (w > 1: UnsatisfiableWriteConcern 100; an unknown mode:
 * UnknownReplWriteConcern 79), as a one-member replica set does. */
void cmd_write_concern_report(cmd_ctx_t *ctx);
/* Parses the command's readConcern into ctx->rc; fails as mongod on a
 * malformed one. */
bool cmd_read_concern_parse(cmd_ctx_t *ctx, dberr_t *err);
/* Once the session is known: a level the command cannot use, and a
 * cluster time the server cannot serve (ahead of the cluster time:
 * InvalidOptions; atClusterTime before the newest commit: SnapshotTooOld
 * 239). */
bool cmd_read_concern_check(cmd_ctx_t *ctx, bool is_write, dberr_t *err);

/* Appends $clusterTime and operationTime, as every reply carries them
 * (cmd_run does it; so must a reply sent later for a parked command). */
void cmd_append_cluster_time(bson_t *reply);

/* True for the arguments any command may carry (mongod's generic
 * arguments: $db, lsid, txnNumber, readConcern, writeConcern, comment,
 * maxTimeMS, $clusterTime, apiVersion..., and atomdb's fence), which a
 * command's own strict parser skips. */
bool cmd_is_generic_arg(const char *k);

/* Iterates the command's own arguments: the fields after the first that
 * are neither generic nor '$'-prefixed. cmd_args_init, then
 * while (cmd_args_next(&it)). */
void cmd_args_init(const cmd_ctx_t *ctx, bson_iter_t *it);
bool cmd_args_next(bson_iter_t *it);

/* Fails with mongod's 40415 "BSON field 'cmd.x' is an unknown field."
 * when the command has a field that is neither one of the `n` names in
 * `known` nor a generic argument. */
bool cmd_only_fields(const cmd_ctx_t *ctx, const char *const *known, size_t n, dberr_t *err);

/* Finds `key` in the command; false when absent. */
bool cmd_find(const cmd_ctx_t *ctx, const char *key, bson_iter_t *out);

/* The collection name the command's first element names. Fails with
 * InvalidNamespace 73 when it is not a string, as mongod. */
bool cmd_collection_name(const cmd_ctx_t *ctx, const char **out, dberr_t *err);

/* What a collection command names: the name, its namespace "db.coll" and
 * the collection (NULL when it does not exist). */
typedef struct cmd_target {
    const char *coll;
    char ns[512];
    collection_t *c;
} cmd_target_t;

/* Fills t from the command's first field (cmd_collection_name's errors). */
bool cmd_target(const cmd_ctx_t *ctx, cmd_target_t *t, dberr_t *err);

/* Sets TypeMismatch 14 worded as mongod's IDL, "BSON field '<field>' is
 * the wrong type '<it's type>', expected <expected>" (`expected` as
 * "type 'object'" or "types '[long, int, decimal, double]'"), with the
 * field's name formatted from `field_fmt`. Returns false. */
bool cmd_wrong_type(dberr_t *err, const bson_iter_t *it, const char *expected,
                    const char *field_fmt, ...) __attribute__((format(printf, 4, 5)));

/* Sets FailedToParse 9 worded as mongod's IDL, "BSON field '<field>' is
 * missing but a required field", the field's name formatted from
 * `field_fmt`. Returns false. */
bool cmd_missing_field(dberr_t *err, const char *field_fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Finds the required field `key` of type `type` into it: FailedToParse 9
 * when missing, TypeMismatch 14 when of another type, worded as mongod's
 * IDL ("BSON field 'distinct.key' is missing but a required field"). */
bool cmd_required(const cmd_ctx_t *ctx, const char *key, bson_type_t type, bson_iter_t *it,
                  dberr_t *err);

/* Optional typed arguments: false with TypeMismatch 14 ("BSON field
 * 'find.limit' is the wrong type 'string', expected types '[long, int,
 * decimal, double']") when present with the wrong type; *out keeps its
 * default when absent. */
bool cmd_opt_int64(const cmd_ctx_t *ctx, const char *key, int64_t *out, dberr_t *err);
bool cmd_opt_bool(const cmd_ctx_t *ctx, const char *key, bool *out, dberr_t *err);
bool cmd_opt_doc(const cmd_ctx_t *ctx, const char *key, bson_t *out, bool *present, dberr_t *err);

/* Compiles `filter`, giving $expr the command's `let` variables. */
struct matcher *cmd_matcher_new(const cmd_ctx_t *ctx, const bson_t *filter, dberr_t *err);
/* find's matcher: as cmd_matcher_new, with $near / $nearSphere allowed. */
struct matcher *cmd_matcher_new_near(const cmd_ctx_t *ctx, const bson_t *filter, dberr_t *err);

/* The collation an operation on `c` (NULL: no such collection) runs
 * under: its own `collation` field under `field` (NULL when the command
 * gives none; {locale: "simple"} overrides a default), else the
 * collection's or view's default (an empty `collation: {}` counts as none,
 * as mongod). *out is a new reference the caller
 * destroys, NULL for the simple collation. False with mongod's parse errors
 * (collation.h), or OptionNotSupportedOnView 167 for a view with another
 * collation than its own. */
struct collation;
struct collection;
bool cmd_collation_resolve(struct collection *c, const bson_iter_t *field,
                           struct collation **out, dberr_t *err);

/* Appends the array index key for `i` ("0", "1", ...) and returns it. */
const char *cmd_index_key(uint32_t i, char *buf, size_t size);

/* An array being appended to by position, for callbacks that add one
 * element at a time. */
typedef struct cmd_array {
    bson_t *arr;  /* the array */
    uint32_t n;   /* elements appended so far */
    char key[16]; /* the last key cmd_array_key gave */
} cmd_array_t;

/* The key of the array's next element ("0", "1", ...), counting it; valid
 * until the next call. */
const char *cmd_array_key(cmd_array_t *a);

/* Appends idIndex: {v: 2, key: {_id: 1}, name: "_id_"}, the _id index a
 * new collection gets, as mongod shows it (listCollections, oplog). */
void cmd_append_id_index(bson_t *out);

/* Appends the options of the catalog change {create, options} `cmd` (the
 * observer's document) and, unless it creates a view, its idIndex: the
 * description of a create in the oplog and in change events. */
void cmd_append_create_options(bson_t *out, const bson_t *cmd);

struct recvec;
struct projection;
struct matcher;

/* Points the {$meta: "textScore"} of sort `s` and projection `p` (either
 * may be NULL) at the $text query of filter `m`; without one, fails as
 * mongod: 40218 "query requires text score metadata, but it is not
 * available". */
struct matcher;
struct sortspec;
struct projection;
bool cmd_text_meta(struct matcher *m, struct sortspec *s, struct projection *p, dberr_t *err);

/* Answers with a cursor over `recs` (taken over; emptied): the first batch
 * in reply.cursor.firstBatch, the rest kept for getMore unless the result
 * fits or `single_batch`. `projection` and `matcher` (for positional
 * projection) are taken over too; either may be NULL. batch_size < 0 means
 * the default (101 documents). */
bool cmd_reply_cursor(cmd_ctx_t *ctx, const char *ns, struct recvec *recs,
                      struct projection *projection, struct matcher *matcher, int64_t batch_size,
                      bool single_batch, dberr_t *err);
/* cmd_reply_cursor, lending *projection and *matcher: when no cursor stays
 * open (the first batch was the whole answer) they come back through the
 * same pointers for the caller to reuse or free; NULL when a cursor keeps
 * them. */
bool cmd_reply_cursor_lend(cmd_ctx_t *ctx, const char *ns, struct recvec *recs,
                           struct projection **projection, struct matcher **matcher,
                           int64_t batch_size, bool single_batch, dberr_t *err);

/* Generates an ObjectId _id when `doc` has none and moves _id first,
 * writing the result to `out` (initialised by the caller). Fails with
 * BadValue 2 for an array or regex _id, as mongod. */
bool cmd_prepare_insert_doc(const bson_t *doc, bson_t *out, dberr_t *err);

/* Every command atomdb answers, in listCommands' order, one row each:
 * X(name, handler, counter, admin_only, is_write)
 *   counter:    what opcounters counts it as (COMMAND, QUERY, GETMORE, or
 *               NONE: insert, update and delete count their own documents)
 *   admin_only: must run against the admin database
 *   is_write:   changes data, so refused while the log cannot be written
 * Aliases (isMaster, dbstats, ...) name the same handler. This header
 * declares each handler from it; dispatch.c builds its command table. */
#ifdef ATOMDB_FAULT_INJECTION
#define CMD_FAULT_COMMANDS(X) X("atomdbFault", cmd_atomdb_fault, COMMAND, true, false)
#else
#define CMD_FAULT_COMMANDS(X)
#endif
#define CMD_COMMANDS(X)                                                                            \
    X("hello", cmd_hello, COMMAND, false, false)                                                   \
    X("isMaster", cmd_hello, COMMAND, false, false)                                                \
    X("ismaster", cmd_hello, COMMAND, false, false)                                                \
    X("ping", cmd_ping, COMMAND, false, false)                                                     \
    X("buildInfo", cmd_build_info, COMMAND, false, false)                                          \
    X("buildinfo", cmd_build_info, COMMAND, false, false)                                          \
    X("getParameter", cmd_get_parameter, COMMAND, true, false)                                     \
    X("setParameter", cmd_set_parameter, COMMAND, true, false)                                     \
    X("getCmdLineOpts", cmd_get_cmd_line_opts, COMMAND, true, false)                               \
    X("getLog", cmd_get_log, COMMAND, true, false)                                                 \
    X("replSetInitiate", cmd_repl_set_initiate, COMMAND, true, false)                              \
    X("replSetReconfig", cmd_repl_set_reconfig, COMMAND, true, false)                              \
    X("replSetGetConfig", cmd_repl_set_get_config, COMMAND, true, false)                           \
    X("replSetGetStatus", cmd_repl_set_get_status, COMMAND, true, false)                           \
    X("hostInfo", cmd_host_info, COMMAND, false, false)                                            \
    X("whatsmyuri", cmd_whatsmyuri, COMMAND, false, false)                                         \
    X("connectionStatus", cmd_connection_status, COMMAND, false, false)                            \
    X("serverStatus", cmd_server_status, COMMAND, false, false)                                    \
    X("top", cmd_top, COMMAND, true, false)                                                        \
    X("profile", cmd_profile, COMMAND, false, false)                                               \
    X("shutdown", cmd_shutdown, COMMAND, true, false)                                              \
    X("endSessions", cmd_end_sessions, COMMAND, false, false)                                      \
    X("refreshSessions", cmd_refresh_sessions, COMMAND, false, false)                              \
    X("killSessions", cmd_kill_sessions, COMMAND, false, false)                                    \
    X("killAllSessions", cmd_kill_all_sessions, COMMAND, false, false)                             \
    X("killAllSessionsByPattern", cmd_kill_all_sessions, COMMAND, false, false)                    \
    X("startSession", cmd_start_session, COMMAND, false, false)                                    \
    X("commitTransaction", cmd_commit_transaction, COMMAND, true, true)                            \
    X("abortTransaction", cmd_abort_transaction, COMMAND, true, false)                             \
    X("listCommands", cmd_list_commands, COMMAND, false, false)                                    \
    X("listDatabases", cmd_list_databases, COMMAND, true, false)                                   \
    X("listCollections", cmd_list_collections, COMMAND, false, false)                              \
    X("create", cmd_create, COMMAND, false, true)                                                  \
    X("drop", cmd_drop, COMMAND, false, true)                                                      \
    X("dropDatabase", cmd_drop_database, COMMAND, false, true)                                     \
    X("dbStats", cmd_db_stats, COMMAND, false, false)                                              \
    X("dbstats", cmd_db_stats, COMMAND, false, false)                                              \
    X("collStats", cmd_coll_stats, COMMAND, false, false)                                          \
    X("collstats", cmd_coll_stats, COMMAND, false, false)                                          \
    X("createIndexes", cmd_create_indexes, COMMAND, false, true)                                   \
    X("collMod", cmd_coll_mod, COMMAND, false, true)                                               \
    X("convertToCapped", cmd_convert_to_capped, COMMAND, false, true)                              \
    X("cloneCollectionAsCapped", cmd_clone_collection_as_capped, COMMAND, false, true)             \
    X("listIndexes", cmd_list_indexes, COMMAND, false, false)                                      \
    X("dropIndexes", cmd_drop_indexes, COMMAND, false, true)                                       \
    X("deleteIndexes", cmd_drop_indexes, COMMAND, false, true)                                     \
    X("getMore", cmd_get_more, GETMORE, false, false)                                              \
    X("killCursors", cmd_kill_cursors, COMMAND, false, false)                                      \
    X("insert", cmd_insert, NONE, false, true)                                                     \
    X("update", cmd_update, NONE, false, true)                                                     \
    X("delete", cmd_delete, NONE, false, true)                                                     \
    X("findAndModify", cmd_find_and_modify, COMMAND, false, true)                                  \
    X("findandmodify", cmd_find_and_modify, COMMAND, false, true)                                  \
    X("find", cmd_find_cmd, QUERY, false, false)                                                   \
    X("count", cmd_count, COMMAND, false, false)                                                   \
    X("distinct", cmd_distinct, COMMAND, false, false)                                             \
    X("aggregate", cmd_aggregate, COMMAND, false, false)                                           \
    X("explain", cmd_explain, COMMAND, false, false)                                               \
    X("acquireLock", cmd_acquire_lock, COMMAND, false, false)                                      \
    X("renewLock", cmd_renew_lock, COMMAND, false, false)                                          \
    X("releaseLock", cmd_release_lock, COMMAND, false, false)                                      \
    X("lockInfo", cmd_lock_info, COMMAND, false, false)                                            \
    X("listLocks", cmd_list_locks, COMMAND, false, false)                                          \
    X("fsync", cmd_fsync, COMMAND, true, false)                                                    \
    X("currentOp", cmd_current_op, COMMAND, true, false)                                           \
    X("killOp", cmd_kill_op, COMMAND, true, false)                                                 \
    X("fsyncUnlock", cmd_fsync_unlock, COMMAND, true, false)                                       \
    X("renameCollection", cmd_rename_collection, COMMAND, true, true)                              \
    X("validate", cmd_validate, COMMAND, false, false)                                             \
    X("dbHash", cmd_db_hash, COMMAND, false, false)                                                \
    X("dbhash", cmd_db_hash, COMMAND, false, false)                                                \
    X("mapReduce", cmd_map_reduce, COMMAND, false, false)                                          \
    X("mapreduce", cmd_map_reduce, COMMAND, false, false)                                          \
    /* authentication and users (cmd/sasl.c, cmd/users.c) */                                       \
    X("saslStart", cmd_sasl_start, COMMAND, false, false)                                          \
    X("saslContinue", cmd_sasl_continue, COMMAND, false, false)                                    \
    X("logout", cmd_logout, COMMAND, false, false)                                                 \
    X("authenticate", cmd_authenticate, COMMAND, false, false)                                     \
    X("createUser", cmd_create_user, COMMAND, false, true)                                         \
    X("updateUser", cmd_update_user, COMMAND, false, true)                                         \
    X("dropUser", cmd_drop_user, COMMAND, false, true)                                             \
    X("dropAllUsersFromDatabase", cmd_drop_all_users_from_database, COMMAND, false, true)          \
    X("usersInfo", cmd_users_info, COMMAND, false, false)                                          \
    X("grantRolesToUser", cmd_change_user_roles, COMMAND, false, true)                             \
    X("revokeRolesFromUser", cmd_change_user_roles, COMMAND, false, true)                          \
    X("createRole", cmd_create_role, COMMAND, false, true)                                         \
    X("updateRole", cmd_change_role, COMMAND, false, true)                                         \
    X("dropRole", cmd_drop_role, COMMAND, false, true)                                             \
    X("dropAllRolesFromDatabase", cmd_drop_all_roles_from_database, COMMAND, false, true)          \
    X("rolesInfo", cmd_roles_info, COMMAND, false, false)                                          \
    X("grantPrivilegesToRole", cmd_change_role, COMMAND, false, true)                              \
    X("revokePrivilegesFromRole", cmd_change_role, COMMAND, false, true)                           \
    X("grantRolesToRole", cmd_change_role, COMMAND, false, true)                                   \
    X("revokeRolesFromRole", cmd_change_role, COMMAND, false, true)                                \
    CMD_FAULT_COMMANDS(X)

#define CMD_DECLARE_HANDLER(name, fn, counter, admin_only, is_write)                               \
    bool fn(cmd_ctx_t *ctx, dberr_t *err);
CMD_COMMANDS(CMD_DECLARE_HANDLER)
#undef CMD_DECLARE_HANDLER
/* atomdbFault's handler (admin.c), compiled in every build. */
bool cmd_atomdb_fault(cmd_ctx_t *ctx, dberr_t *err);

/* What the handlers' files share besides the handlers, by file. */
/* admin.c: the replica-set config version hello presents as setVersion. */
int32_t repl_config_version(void);
/* txncmds.c: what cmd_run does around every handler */
enum { CMD_SESSION_RUN, CMD_SESSION_RETRIED, CMD_SESSION_FAIL };
/* Handles lsid/txnNumber/autocommit/startTransaction: starts or joins a
 * transaction (setting ctx->view->txn), or answers a retried write from its
 * stored outcome (CMD_SESSION_RETRIED, reply filled). */
int cmd_session_prepare(cmd_ctx_t *ctx, dberr_t *err);
/* After the handler: aborts a transaction whose statement failed, records
 * a retryable write's outcome. Returns the command's success. */
bool cmd_session_finish(cmd_ctx_t *ctx, bool ok, dberr_t *err);
/* True for commitTransaction and abortTransaction. */
bool cmd_txn_is_end(const char *name);
/* The handler found a document locked (VIEW_BLOCKED_CODE): queue the
 * request on the lock (true), or fail it (lock timeout, deadlock). */
bool cmd_park_on_lock(cmd_ctx_t *ctx, dberr_t *err);
/* killOp of a request parked on a document lock: takes it off the lock's
 * queue and runs it again, and its wait then fails with Interrupted
 * (11601; in a transaction the statement's failure aborts it). */
void cmd_lock_wait_kill(cmd_client_t *client);
/* killOp of a parked acquireLock: takes it off the lease's queue and
 * answers Interrupted (11601). False when it was not queued any more. */
bool cmd_lease_wait_kill(cmd_client_t *client);
/* Cancels lock waits and resume state of a closing connection. */
void cmd_session_client_closed(cmd_client_t *client);
/* maint.c: false with IllegalOperation 20 while fsync {lock: true} holds writes. */
bool cmd_fsync_locked_check(dberr_t *err);
/* explain.c: appends an explain's winningPlan for `plan` to `qp`
 * (`exists`: the collection exists; else the plan is EOF). */
void explain_append_plan(bson_t *qp, const collection_plan_t *plan, bool exists);
/* explain_append_plan with the read's filter (NULL: none): a scan of a
 * hashed index shows it as its FETCH stage's `filter`, as mongod's (the
 * hash bounds are inexact: every fetched document is matched again). */
void explain_append_plan_filtered(bson_t *qp, const collection_plan_t *plan, bool exists,
                                  const bson_t *filter);
/* Appends an explain's serverInfo to `reply`. */
void explain_append_server_info(bson_t *reply);
struct pipeline;
struct doclist;
/* An aggregate's explain ({aggregate, explain: true} or the explain
 * command): mongod's shape — the queryPlanner of the collection read
 * alone when the pipeline is at most a leading $match, else explainVersion
 * and `stages`: {$cursor: {queryPlanner}} then each further stage as
 * given; with "executionStats" the pipeline runs and each stage reports
 * nReturned and executionTimeMillisEstimate (and a join what it read).
 * `docs` holds the collection read's documents (consumed by the run). */
bool explain_aggregate(cmd_ctx_t *ctx, const char *coll, collection_t *c,
                       const struct pipeline *p, const bson_iter_t *stages_it,
                       const collection_plan_t *plan, const char *verbosity,
                       struct doclist *docs, dberr_t *err);
/* locks.c (lease locks: src/lease, docs/locks.md): checks the command's
 * `fence: {lock, token}`: true when there is none or the token is the
 * lock's current one with a live lease; otherwise false with
 * StaleFencingToken (or a parse error) and the write must not run. */
bool cmd_check_fence(cmd_ctx_t *ctx, dberr_t *err);
/* The connection closed: drops its parked acquireLock and releases the
 * locks it took with releaseOnDisconnect. */
void cmd_locks_client_closed(cmd_client_t *client);
/* A session ended (endSessions, killSessions, expiry): releases the locks
 * taken under it. `lsid` is the lsid document {id: UUID} or the UUID. */
void cmd_locks_session_ended(const bson_value_t *lsid);

/* param.c: the idle timeout in force for cursors (setParameter
 * cursorTimeoutMillis). */
int64_t param_cursor_timeout(void);
/* Sets server parameter `name` to the value at `it` (--setParameter at
 * start, where start-only parameters are allowed too); false for an
 * unknown name or a bad value. */
bool param_set(const char *name, const bson_iter_t *it, dberr_t *err);
/* True when the TTL monitor should run now (ttlMonitorEnabled, and
 * ttlMonitorSleepSecs passed since it last ran); records the run. */
bool param_ttl_due(int64_t now_ms);

/* sasl.c (authentication: cmd/access.h, docs/security.md): hello's
 * saslSupportedMechs and speculativeAuthenticate answers. */
void sasl_hello_append(cmd_ctx_t *ctx, bson_t *reply);
/* Ends the connection's SASL conversation, if one is in progress (done,
 * failed, logout, the connection closing). */
struct cmd_auth;
void sasl_end(struct cmd_auth *a);

/* Appends listCommands' `commands`: {name: {adminOnly}} for every command
 * atomdb knows. */
void cmd_append_commands(bson_t *reply);

#endif
