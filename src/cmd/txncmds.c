/* txncmds: sessions and transactions at the command level — the lsid /
 * txnNumber / autocommit / startTransaction arguments every command may
 * carry, retryable writes answered from their stored outcome, waiting for
 * document locks (with deadlock detection), and the commands
 * commitTransaction, abortTransaction, refreshSessions, killSessions,
 * killAllSessions and startSession. See docs/concurrency.md. */
#include "cmd/cmd-private.h"
#include "cmd/access.h"

#include <string.h>

#include "cmd/view.h"
#include "journal/journal.h"
#include "store/catalog.h"
#include "txn/lockmgr.h"
#include "txn/session.h"
#include "util/fiber.h"
#include "util/log.h"

/* Commands a transaction may run. */
static bool txncmds_allowed(const char *name)
{
    static const char *ok[] = {"find", "getMore", "killCursors", "insert", "update", "delete",
                               "findAndModify", "findandmodify", "aggregate", "distinct",
                               "commitTransaction", "abortTransaction", "acquireLock",
                               "releaseLock", "renewLock", "lockInfo", "create",
                               "createIndexes"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(name, ok[i]) == 0)
            return true;
    return false;
}

/* Commands whose txnNumber makes them retryable writes. */
static bool txncmds_retryable(const char *name)
{
    return !strcmp(name, "insert") || !strcmp(name, "update") || !strcmp(name, "delete") ||
           !strcmp(name, "findAndModify") || !strcmp(name, "findandmodify");
}

bool cmd_txn_is_end(const char *name)
{
    return !strcmp(name, "commitTransaction") || !strcmp(name, "abortTransaction");
}

/* The isolation level a transaction's readConcern asks for: "snapshot"
 * is snapshot isolation, as mongod; "serializable" is atomdb's extension;
 * "local", "majority" or no level leave the server's default. */
static bool txncmds_isolation(const bson_iter_t *rc_it, txn_isolation_t *level, dberr_t *err)
{
    bson_t rc;
    bson_iter_t it;
    if (!cmd_iter_doc(rc_it, &rc) || !BSON_ITER_HOLDS_DOCUMENT(rc_it))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "readConcern must be an object");
    if (!bson_iter_init_find(&it, &rc, "level"))
        return true;
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return cmd_wrong_type(err, &it, "type 'string'", "readConcern.level");
    const char *l = bson_iter_utf8(&it, NULL);
    if (!strcmp(l, "snapshot"))
        *level = TXN_SNAPSHOT;
    else if (!strcmp(l, "serializable"))
        *level = TXN_SERIALIZABLE;
    else if (strcmp(l, "local") && strcmp(l, "majority"))
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "The readConcern level must be either 'local' (default), 'majority', "
                         "'snapshot' or 'serializable' (an atomdb extension) in order to run in a "
                         "transaction");
    return true;
}

int cmd_session_prepare(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    uint8_t id[16];
    int64_t now = server_now_ms();
    ctx->txn_number = -1;
    if (cmd_find(ctx, "lsid", &it)) {
        if (!session_parse_lsid(&it, id, err))
            return CMD_SESSION_FAIL;
        ctx->session = session_get(id, now);
        /* a statement of this session is running (and may be suspended
         * between slices): wait until it checks in, as mongod waits for
         * its session checkout (bounded by maxTimeMS and killOp) */
        while (ctx->session->checkout) {
            if (!fiber_current() || ctx->session->checkout == fiber_current())
                return dberr_set(err, DBERR_CONFLICTING_OPERATION_IN_PROGRESS,
                                 "Cannot run a command on this session: another operation is "
                                 "using it"),
                       CMD_SESSION_FAIL;
            if (!fiber_yield_now(err))
                return CMD_SESSION_FAIL;
            ctx->session = session_get(id, server_now_ms()); /* it may have ended meanwhile */
        }
        if (server.auth) {
            /* a session, its transaction and its retryable writes belong
             * to the user who first used it */
            uint64_t me = access_owner(ctx->client);
            if (!ctx->session->owner)
                ctx->session->owner = me;
            else if (ctx->session->owner != me)
                return dberr_set(err, DBERR_UNAUTHORIZED,
                                 "Cannot use a session that belongs to another user"),
                       CMD_SESSION_FAIL;
        }
    }
    bool has_txn = cmd_find(ctx, "txnNumber", &it);
    if (has_txn) {
        if (!BSON_ITER_HOLDS_INT64(&it) && !BSON_ITER_HOLDS_INT32(&it))
            return dberr_set(err, DBERR_TYPE_MISMATCH,
                             "BSON field 'txnNumber' is the wrong type '%s', expected type 'long'",
                             shellfmt_type_name(bson_iter_type(&it))),
                   CMD_SESSION_FAIL;
        ctx->txn_number = bson_iter_as_int64(&it);
        if (ctx->txn_number < 0)
            return dberr_set(err, DBERR_BAD_VALUE, "txnNumber must be non-negative"),
                   CMD_SESSION_FAIL;
        if (!ctx->session)
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "Transaction number requires a session ID to also be specified"),
                   CMD_SESSION_FAIL;
    }
    session_t *s = ctx->session;
    if (cmd_find(ctx, "autocommit", &it)) {
        if (!has_txn)
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "'autocommit' field requires a transaction number to also be "
                             "specified"),
                   CMD_SESSION_FAIL;
        if (!BSON_ITER_HOLDS_BOOL(&it) || bson_iter_bool(&it))
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "Specifying autocommit=true is not allowed."),
                   CMD_SESSION_FAIL;
        ctx->in_txn = true;
        if (!txncmds_allowed(ctx->name))
            return dberr_set(err, DBERR_OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
                             "Cannot run '%s' in a multi-document transaction.", ctx->name),
                   CMD_SESSION_FAIL;
        bool start = cmd_find(ctx, "startTransaction", &it) && bson_iter_as_bool(&it);
        if (!cmd_txn_is_end(ctx->name) && cmd_find(ctx, "writeConcern", &it))
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "Cannot set write concern after starting a transaction."),
                   CMD_SESSION_FAIL;
        if (start) {
            if (ctx->txn_number < s->txn_number)
                return dberr_set(err, DBERR_TRANSACTION_TOO_OLD,
                                 "Cannot start transaction %lld on session because a newer "
                                 "transaction %lld has already started",
                                 (long long)ctx->txn_number, (long long)s->txn_number),
                       CMD_SESSION_FAIL;
            bool restarting = ctx->client->rerun && ctx->txn_number == s->txn_number &&
                              s->state == SESSION_TXN_IN_PROGRESS;
            if (ctx->txn_number == s->txn_number && !restarting)
                return dberr_set(err, DBERR_CONFLICTING_OPERATION_IN_PROGRESS,
                                 "Transaction with { txnNumber: %lld } has already been started",
                                 (long long)ctx->txn_number),
                       CMD_SESSION_FAIL;
            txn_isolation_t level = (txn_isolation_t)server.txn_isolation;
            if (cmd_find(ctx, "readConcern", &it) && !txncmds_isolation(&it, &level, err))
                return CMD_SESSION_FAIL;
            if (!restarting) { /* a first statement that waited keeps its transaction */
                session_begin_txn(s, ctx->txn_number, now);
                txn_set_isolation(s->txn, level);
                snprintf(s->txn_read_concern, sizeof s->txn_read_concern, "%s", ctx->rc.level);
            } else {
                /* ... and, having seen nothing yet, reads from a new snapshot:
                 * the wait (SELECT ... FOR UPDATE as the first statement)
                 * then ends in success rather than a write conflict */
                txn_renew_snapshot(s->txn);
            }
        } else {
            if (cmd_find(ctx, "readConcern", &it))
                return dberr_set(err, DBERR_INVALID_OPTIONS,
                                 "Only the first command in a transaction may specify a "
                                 "readConcern"),
                       CMD_SESSION_FAIL;
            if (ctx->txn_number != s->txn_number || s->state == SESSION_TXN_NONE) {
                dberr_set(err, DBERR_NO_SUCH_TRANSACTION,
                          "Given transaction number %lld does not match any in-progress "
                          "transactions. The active transaction number is %lld",
                          (long long)ctx->txn_number, (long long)s->txn_number);
                err->labels |= DBERR_LABEL_TRANSIENT_TXN;
                return CMD_SESSION_FAIL;
            }
            if (!cmd_txn_is_end(ctx->name)) {
                if (s->state == SESSION_TXN_ABORTED) {
                    dberr_set(err, DBERR_NO_SUCH_TRANSACTION,
                              "Transaction with { txnNumber: %lld } has been aborted%s%s",
                              (long long)ctx->txn_number, s->abort_reason[0] ? ": " : ".",
                              s->abort_reason);
                    err->labels |= DBERR_LABEL_TRANSIENT_TXN;
                    return CMD_SESSION_FAIL;
                }
                if (s->state == SESSION_TXN_COMMITTED)
                    return dberr_set(err, DBERR_TRANSACTION_COMMITTED,
                                     "Transaction with { txnNumber: %lld } has been committed.",
                                     (long long)ctx->txn_number),
                           CMD_SESSION_FAIL;
            }
        }
        if (s->state == SESSION_TXN_IN_PROGRESS)
            ctx->view->txn = s->txn;
        return CMD_SESSION_RUN;
    }
    if (cmd_find(ctx, "startTransaction", &it))
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "'startTransaction' requires 'autocommit: false' and a txnNumber"),
               CMD_SESSION_FAIL;
    if (!has_txn)
        return CMD_SESSION_RUN;
    if (!txncmds_retryable(ctx->name))
        return dberr_set(err, DBERR_ILLEGAL_OPERATION,
                         "txnNumber may only be provided for multi-document transactions and "
                         "retryable write commands. autocommit:false was not provided, and %s "
                         "is not a retryable write command.",
                         ctx->name),
               CMD_SESSION_FAIL;
    /* a retryable write */
    if (ctx->txn_number < s->txn_number)
        return dberr_set(err, DBERR_TRANSACTION_TOO_OLD,
                         "Retryable write with txnNumber %lld is prohibited on session because a "
                         "newer retryable write with txnNumber %lld has already started on this "
                         "session.",
                         (long long)ctx->txn_number, (long long)s->txn_number),
               CMD_SESSION_FAIL;
    int found = session_retry_recall(s, ctx->txn_number, ctx->reply)
                    ? 1
                    : session_retry_lookup(server.catalog, s->id, ctx->txn_number, ctx->reply, err);
    if (found < 0)
        return CMD_SESSION_FAIL;
    ctx->retry_fresh = found == 0;
    if (ctx->txn_number > s->txn_number) {
        session_abort_txn(s, NULL);
        s->txn_number = ctx->txn_number;
        s->state = SESSION_TXN_NONE;
    }
    if (found == 1) {
        log_debug("TXN", "retryable write %lld answered from its stored outcome",
                  (long long)ctx->txn_number);
        return CMD_SESSION_RETRIED;
    }
    return CMD_SESSION_RUN;
}

bool cmd_session_finish(cmd_ctx_t *ctx, bool ok, dberr_t *err)
{
    session_t *s = ctx->session;
    if (ctx->in_txn && s && !cmd_txn_is_end(ctx->name) && s->state == SESSION_TXN_IN_PROGRESS) {
        bson_iter_t it;
        bool write_errors = ok && bson_iter_init_find(&it, ctx->reply, "writeErrors");
        if (!ok || write_errors) {
            /* any failed statement aborts the transaction, as in mongod */
            char why[200];
            snprintf(why, sizeof why, "a statement failed: %s",
                     ok ? "write error" : err->msg);
            session_abort_txn(s, why);
        }
        if (!ok && err->code == DBERR_WRITE_CONFLICT)
            err->labels |= DBERR_LABEL_TRANSIENT_TXN;
    }
    if (ok && !ctx->in_txn && s && ctx->txn_number >= 0 && txncmds_retryable(ctx->name)) {
        if (journal_mode() != JOURNAL_NONE && !journal_pending() && !ctx->retry_progress) {
            /* it changed nothing: nothing to make durable */
            session_retry_remember(s, ctx->txn_number, ctx->reply);
        } else if (!session_retry_record(server.catalog, s->id, ctx->txn_number, ctx->reply,
                                         err)) {
            /* the outcome goes into the same log record as the write */
            return false;
        }
    }
    return ok;
}

/* A lock wait ended: run the parked request again on the next loop turn
 * (never from inside the command that released the lock). */
static void txncmds_on_rerun(uv_timer_t *t)
{
    cmd_client_t *client = t->data;
    uv_close((uv_handle_t *)t, (uv_close_cb)bson_free);
    client->rerun_timer = NULL;
    client->rerun = true;
    client->rerun_parked(client);
    client->rerun = false;
}

static void txncmds_on_lock_wake(lock_waiter_t *w, bool timed_out)
{
    cmd_client_t *client = (cmd_client_t *)((char *)w - offsetof(cmd_client_t, lock_waiter));
    client->lock_timed_out = timed_out;
    if (client->rerun_timer)
        return;
    client->rerun_timer = bson_malloc0(sizeof *client->rerun_timer);
    uv_timer_init(server.loop, client->rerun_timer);
    client->rerun_timer->data = client;
    uv_timer_start(client->rerun_timer, txncmds_on_rerun, 0, 0);
}

void cmd_lock_wait_kill(cmd_client_t *client)
{
    if (!client->lock_waiter.entry)
        return; /* already woken: its rerun is on its way */
    lockmgr_cancel(&client->lock_waiter);
    client->op_killed = true;
    txncmds_on_lock_wake(&client->lock_waiter, false);
}

bool cmd_park_on_lock(cmd_ctx_t *ctx, dberr_t *err)
{
    view_t *v = ctx->view;
    cmd_client_t *client = ctx->client;
    bool timed_out = client->lock_timed_out;
    client->lock_timed_out = false;
    if (client->op_killed) { /* killOp while it waited (cmd_lock_wait_kill) */
        client->op_killed = false;
        if (v->txn)
            err->labels |= DBERR_LABEL_TRANSIENT_TXN;
        return dberr_set(err, DBERR_INTERRUPTED, "operation was interrupted");
    }
    int64_t timeout;
    if (v->txn) {
        if (timed_out) {
            dberr_set(err, DBERR_WRITE_CONFLICT,
                      "Caused by :: Write conflict during plan execution and yielding is "
                      "disabled. :: Please retry your operation or multi-document transaction. "
                      "(the document stayed locked by another transaction for more than "
                      "maxTransactionLockRequestTimeoutMillis=%d ms)",
                      server.txn_lock_timeout_ms);
            err->labels |= DBERR_LABEL_TRANSIENT_TXN;
            return false;
        }
        txn_t *victim = v->blocked_by ? txn_deadlock_victim(v->txn, v->blocked_by) : NULL;
        if (victim == v->txn) {
            dberr_set(err, DBERR_WRITE_CONFLICT,
                      "Write conflict: a deadlock between transactions was detected and this "
                      "one, the youngest, was aborted. Please retry your transaction.");
            err->labels |= DBERR_LABEL_TRANSIENT_TXN;
            return false;
        }
        if (victim)
            session_abort_txn(txn_owner(victim), "it was chosen to break a deadlock");
        timeout = server.txn_lock_timeout_ms;
    } else {
        if (timed_out)
            return dberr_set(err, DBERR_MAX_TIME_MS_EXPIRED, "operation exceeded time limit");
        timeout = ctx->max_time_ms > 0 ? ctx->max_time_ms : -1;
    }
    client->lock_waiter.txn = v->txn;
    client->lock_waiter.wake = txncmds_on_lock_wake;
    lockmgr_wait(&client->lock_waiter, &v->blocked_key, timeout, server.loop);
    /* currentOp shows it waiting: the key starts "db\0coll\0" */
    const char *k = (const char *)v->blocked_key.data;
    size_t klen = v->blocked_key.len, dl = strnlen(k, klen);
    size_t cl = dl < klen ? strnlen(k + dl + 1, klen - dl - 1) : 0;
    client->op_wait = CMD_WAIT_DOCUMENT_LOCK;
    client->op_wait_hr = uv_hrtime();
    snprintf(client->op_wait_on, sizeof client->op_wait_on, "%.*s.%.*s", (int)dl, k, (int)cl,
             cl ? k + dl + 1 : "");
    return true;
}

void cmd_session_client_closed(cmd_client_t *client)
{
    lockmgr_cancel(&client->lock_waiter);
    if (client->rerun_timer) {
        uv_timer_stop(client->rerun_timer);
        uv_close((uv_handle_t *)client->rerun_timer, (uv_close_cb)bson_free);
        client->rerun_timer = NULL;
    }
    if (client->resume && client->resume_free)
        client->resume_free(client->resume);
    client->resume = NULL;
}

/* ---- commands ---- */

static bool txncmds_need_txn(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!ctx->in_txn || !ctx->session)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "%s must be run within a transaction (lsid, txnNumber and autocommit: "
                         "false)",
                         ctx->name);
    return true;
}

bool cmd_commit_transaction(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!txncmds_need_txn(ctx, err))
        return false;
    session_t *s = ctx->session;
    switch (s->state) {
    case SESSION_TXN_COMMITTED:
        return true; /* a retried commit */
    case SESSION_TXN_ABORTED:
    case SESSION_TXN_NONE:
        dberr_set(err, DBERR_NO_SUCH_TRANSACTION, "Transaction with { txnNumber: %lld } has been "
                                                  "aborted%s%s",
                  (long long)ctx->txn_number, s->abort_reason[0] ? ": " : ".", s->abort_reason);
        err->labels |= DBERR_LABEL_TRANSIENT_TXN;
        return false;
    case SESSION_TXN_IN_PROGRESS:
        break;
    }
    if (!journal_writable(err)) {
        err->labels |= DBERR_LABEL_UNKNOWN_COMMIT;
        return false;
    }
    txn_t *t = s->txn;
    bson_iter_t lsid_it;
    bson_t lsid;
    /* the commit's log record and change events name the transaction */
    if (cmd_find(ctx, "lsid", &lsid_it) && cmd_iter_doc(&lsid_it, &lsid))
        journal_note_txn(&lsid, ctx->txn_number);
    if (!txn_validate_reads(t, server.catalog, err) || !txn_commit(t, server.catalog, err)) {
        char why[200];
        snprintf(why, sizeof why, "commit failed: %s", err->msg);
        dberr_t keep = *err;
        session_abort_txn(s, why);
        *err = keep;
        return false;
    }
    s->txn = NULL;
    s->state = SESSION_TXN_COMMITTED;
    txn_destroy(t); /* releases the locks: waiters run again */
    return true;
}

bool cmd_abort_transaction(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!txncmds_need_txn(ctx, err))
        return false;
    session_t *s = ctx->session;
    if (s->state == SESSION_TXN_COMMITTED)
        return dberr_set(err, DBERR_TRANSACTION_COMMITTED,
                         "Cannot abort transaction %lld: it has been committed",
                         (long long)ctx->txn_number);
    if (s->state != SESSION_TXN_IN_PROGRESS) {
        dberr_set(err, DBERR_NO_SUCH_TRANSACTION,
                  "Transaction with { txnNumber: %lld } has been aborted.",
                  (long long)ctx->txn_number);
        err->labels |= DBERR_LABEL_TRANSIENT_TXN;
        return false;
    }
    session_abort_txn(s, NULL);
    return true;
}

/* Calls `fn` with each lsid id of an array of lsid documents. */
static bool txncmds_each_lsid(const bson_iter_t *arr, void (*fn)(const uint8_t id[16]),
                              dberr_t *err)
{
    bson_iter_t el;
    if (!BSON_ITER_HOLDS_ARRAY(arr) || !bson_iter_recurse(arr, &el))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "expected an array of session ids");
    while (bson_iter_next(&el)) {
        uint8_t id[16];
        if (!session_parse_lsid(&el, id, err))
            return false;
        fn(id);
    }
    return true;
}

static void txncmds_touch(const uint8_t id[16])
{
    session_get(id, server_now_ms());
}

bool cmd_end_sessions(cmd_ctx_t *ctx, dberr_t *err)
{
    return txncmds_each_lsid(&ctx->arg, session_end, err);
}

bool cmd_refresh_sessions(cmd_ctx_t *ctx, dberr_t *err)
{
    return txncmds_each_lsid(&ctx->arg, txncmds_touch, err);
}

bool cmd_kill_sessions(cmd_ctx_t *ctx, dberr_t *err)
{
    return txncmds_each_lsid(&ctx->arg, session_end, err);
}

bool cmd_kill_all_sessions(cmd_ctx_t *ctx, dberr_t *err)
{
    session_end_all();
    return true;
}

bool cmd_start_session(cmd_ctx_t *ctx, dberr_t *err)
{
    uint8_t id[16];
    for (int i = 0; i < 16; i++)
        id[i] = (uint8_t)(rand() & 0xff);
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    session_get(id, server_now_ms());
    bson_t sid;
    bson_append_document_begin(ctx->reply, "id", -1, &sid);
    bson_append_binary(&sid, "id", 2, BSON_SUBTYPE_UUID, id, 16);
    bson_append_document_end(ctx->reply, &sid);
    BSON_APPEND_INT32(ctx->reply, "timeoutMinutes", SESSION_TIMEOUT_MINUTES);
    return true;
}
