/* dispatch: the command table, the checks every command shares ($db,
 * maxTimeMS, read preference), opcounters, and the one place an error
 * becomes {ok: 0, errmsg, code, codeName}. */
#include "cmd/changestream.h"
#include "cmd/cmd-private.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cmd/memory.h"
#include "cmd/op.h"
#include "cmd/stats.h"
#include "cmd/access.h"
#include "cmd/view.h"
#include "cmd/oplog.h"
#include "doc/matcher.h"
#include "journal/journal.h"
#include "store/clock.h"
#include "txn/txn.h"
#include "txn/session.h"
#include "util/bsonview.h"
#include "util/fiber.h"
#include "util/log.h"
#include "util/shellfmt.h"

/* Counts toward opcounters.query etc. instead of .command. */
typedef enum cmd_counter {
    CMD_COUNT_COMMAND,
    CMD_COUNT_QUERY,
    CMD_COUNT_GETMORE,
    CMD_COUNT_NONE, /* counted by the handler (insert/update/delete) */
} cmd_counter_t;

typedef struct cmd_def {
    const char *name;
    cmd_fn fn;
    cmd_counter_t counter;
    bool admin_only; /* must run against the admin database */
    bool is_write;   /* changes data: refused while the log cannot be written */
} cmd_def_t;

#define CMD_ROW(name, fn, counter, admin_only, is_write)                                           \
    {name, fn, CMD_COUNT_##counter, admin_only, is_write},
static const cmd_def_t cmd_table[] = {CMD_COMMANDS(CMD_ROW)};
#undef CMD_ROW

void cmd_append_commands(bson_t *reply)
{
    bson_t commands, one;
    bson_append_document_begin(reply, "commands", -1, &commands);
    for (size_t i = 0; i < sizeof cmd_table / sizeof cmd_table[0]; i++) {
        bson_append_document_begin(&commands, cmd_table[i].name, -1, &one);
        BSON_APPEND_BOOL(&one, "adminOnly", cmd_table[i].admin_only);
        bson_append_document_end(&commands, &one);
    }
    bson_append_document_end(reply, &commands);
}

#define CMD_N (sizeof cmd_table / sizeof cmd_table[0])

/* Each command's access rule (cmd/access.c), looked up once. */
static const access_rule_t *cmd_rules[CMD_N];

int cmd_access_unruled(bson_t *out)
{
    int n = 0;
    char key[16];
    for (size_t i = 0; i < CMD_N; i++)
        if (!access_rule_find(cmd_table[i].name))
            bson_append_utf8(out, cmd_index_key((uint32_t)n++, key, sizeof key), -1,
                             cmd_table[i].name, -1);
    return n;
}

static const access_rule_t *cmd_rule(const cmd_def_t *def)
{
    size_t i = (size_t)(def - cmd_table);
    if (!cmd_rules[i])
        cmd_rules[i] = access_rule_find(def->name);
    return cmd_rules[i];
}

/* The command table by name: an open-addressed hash of the names (FNV-1a),
 * built on first use, so a lookup is one hash and usually one strcmp
 * instead of a scan of the whole table. */
#define CMD_HASH_SLOTS 512 /* a power of two, over 4x the table */

static uint16_t cmd_hash_slots[CMD_HASH_SLOTS]; /* table index + 1; 0 = empty */

static uint32_t cmd_name_hash(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

static const cmd_def_t *cmd_lookup(const char *name)
{
    static bool built;
    if (!built) {
        for (size_t i = 0; i < CMD_N; i++) {
            uint32_t h = cmd_name_hash(cmd_table[i].name) & (CMD_HASH_SLOTS - 1);
            while (cmd_hash_slots[h])
                h = (h + 1) & (CMD_HASH_SLOTS - 1);
            cmd_hash_slots[h] = (uint16_t)(i + 1);
        }
        built = true;
    }
    uint32_t h = cmd_name_hash(name) & (CMD_HASH_SLOTS - 1);
    for (; cmd_hash_slots[h]; h = (h + 1) & (CMD_HASH_SLOTS - 1)) {
        const cmd_def_t *def = &cmd_table[cmd_hash_slots[h] - 1];
        if (strcmp(def->name, name) == 0)
            return def;
    }
    return NULL;
}

/* $clusterTime and operationTime, as every reply of a replica-set member
 * carries them. The signature's key id is 0 and its hash zero: without
 * keyfile authentication mongod signs nothing either; drivers only gossip
 * the document back. operationTime is the cluster time of the command's
 * own commit, or of the newest commit it could have read. */
void cmd_append_cluster_time(bson_t *reply)
{
    /* {$clusterTime: {clusterTime, signature: {hash, keyId}}, operationTime}
     * is the same for every reply but for its two timestamps: built once,
     * appended whole, and the timestamps written in place */
    static const uint8_t zero_hash[20];
    static bson_t tail;
    static bool tail_built;
    if (!tail_built) {
        bson_t ct, sig;
        bson_init(&tail);
        bson_append_document_begin(&tail, "$clusterTime", 12, &ct);
        BSON_APPEND_TIMESTAMP(&ct, "clusterTime", 0, 0);
        bson_append_document_begin(&ct, "signature", 9, &sig);
        bson_append_binary(&sig, "hash", 4, BSON_SUBTYPE_BINARY, zero_hash, sizeof zero_hash);
        BSON_APPEND_INT64(&sig, "keyId", 0);
        bson_append_document_end(&ct, &sig);
        bson_append_document_end(&tail, &ct);
        BSON_APPEND_TIMESTAMP(&tail, "operationTime", 0, 0);
        tail_built = true;
    }
    clock_ts_t now = clock_now();
    uint32_t at = reply->len - 1; /* where the first appended element lands */
    bson_iter_t it, ct;
    if (!bson_concat(reply, &tail) ||
        !bson_iter_init_from_data_at_offset(&it, bson_get_data(reply), reply->len, at, 12) ||
        !bson_iter_recurse(&it, &ct) || !bson_iter_next(&ct) || !bson_iter_next(&it))
        return; /* not reached: the reply was a valid document */
    bson_iter_overwrite_timestamp(&ct, now.t, now.i);
    bson_iter_overwrite_timestamp(&it, now.t, now.i);
}

void cmd_error_reply(bson_t *reply, const dberr_t *err)
{
    bson_reinit(reply);
    BSON_APPEND_DOUBLE(reply, "ok", 0.0);
    BSON_APPEND_UTF8(reply, "errmsg", err->msg);
    BSON_APPEND_INT32(reply, "code", err->code);
    BSON_APPEND_UTF8(reply, "codeName", dberr_codename(err->code));
    if (err->labels) {
        static const struct {
            unsigned bit;
            const char *name;
        } names[] = {{DBERR_LABEL_TRANSIENT_TXN, "TransientTransactionError"},
                     {DBERR_LABEL_UNKNOWN_COMMIT, "UnknownTransactionCommitResult"},
                     {DBERR_LABEL_RETRYABLE_WRITE, "RetryableWriteError"},
                     {DBERR_LABEL_NON_RESUMABLE_CS, "NonResumableChangeStreamError"}};
        bson_t labels;
        uint32_t n = 0;
        char key[16];
        bson_append_array_begin(reply, "errorLabels", -1, &labels);
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (err->labels & names[i].bit)
                bson_append_utf8(&labels, cmd_index_key(n++, key, sizeof key), -1, names[i].name,
                                 -1);
        bson_append_array_end(reply, &labels);
    }
    if (err->extra_len) {
        bson_t extra;
        bson_iter_t it;
        if (bson_init_static(&extra, err->extra, err->extra_len) && bson_iter_init(&it, &extra))
            while (bson_iter_next(&it))
                bson_append_value(reply, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
}

void cmd_client_closed(cmd_client_t *client)
{
    if (client->park_timer) {
        uv_timer_stop(client->park_timer);
        uv_close((uv_handle_t *)client->park_timer, (uv_close_cb)bson_free);
        client->park_timer = NULL;
    }
    if (client->metadata) {
        bson_destroy(client->metadata);
        client->metadata = NULL;
    }
    cmd_locks_client_closed(client);
    cmd_session_client_closed(client);
    access_client_closed(client);
    changestream_client_closed(client);
}

/* Checks the arguments every command may carry. */
bool cmd_is_generic_arg(const char *k)
{
    /* mongod's generic_argument.idl: what any command may carry */
    static const char *generic[] = {
        "$db",           "lsid",        "txnNumber",      "autocommit",       "startTransaction",
        "stmtId",        "comment",     "maxTimeMS",      "readConcern",      "writeConcern",
        "$readPreference", "$clusterTime", "apiVersion",  "apiStrict",        "apiDeprecationErrors",
        "$client",       "$audit",      "clientOperationKey", "txnRetryCounter", "fence"};
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++)
        if (k[0] == generic[i][0] && !strcmp(k, generic[i]))
            return true;
    return false;
}

void cmd_args_init(const cmd_ctx_t *ctx, bson_iter_t *it)
{
    bson_iter_init(it, ctx->cmd);
    bson_iter_next(it);
}

bool cmd_args_next(bson_iter_t *it)
{
    while (bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        if (k[0] != '$' && !cmd_is_generic_arg(k))
            return true;
    }
    return false;
}

bool cmd_only_fields(const cmd_ctx_t *ctx, const char *const *known, size_t n, dberr_t *err)
{
    bson_iter_t f;
    bson_iter_init(&f, ctx->cmd);
    bson_iter_next(&f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        size_t i = 0;
        while (i < n && strcmp(k, known[i]))
            i++;
        if (i == n && !cmd_is_generic_arg(k))
            return dberr_set(err, 40415, "BSON field '%s.%s' is an unknown field.", ctx->name, k);
    }
    return true;
}

static bool cmd_check_generic(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    if (cmd_find(ctx, "maxTimeMS", &it)) {
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            return dberr_set(err, DBERR_BAD_VALUE, "maxTimeMS must be a number");
        double v = bson_iter_as_double(&it);
        if (v < 0 || v > 2147483647.0)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "%g value for maxTimeMS is out of range [0, 2147483647]", v);
        ctx->max_time_ms = (int64_t)v;
        op_set_max_time(ctx->max_time_ms);
    }
    if (cmd_find(ctx, "$readPreference", &it)) {
        bson_t rp;
        bson_iter_t mode;
        if (!cmd_iter_doc(&it, &rp))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "$readPreference must be an object");
        if (bson_iter_init_find(&mode, &rp, "mode") && BSON_ITER_HOLDS_UTF8(&mode)) {
            const char *m = bson_iter_utf8(&mode, NULL);
            if (strcmp(m, "primary") && strcmp(m, "primaryPreferred") && strcmp(m, "nearest") &&
                strcmp(m, "secondaryPreferred") && strcmp(m, "secondary"))
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "Could not parse $readPreference mode '%s'", m);
        }
    }
    return true;
}

/* What cmd_run_one tells cmd_run about the command it ran, for stats and
 * the slow-operation log. */
typedef struct cmd_outcome {
    const cmd_def_t *def; /* NULL: no such command (or no name) */
    const char *coll;     /* the collection it names (borrowed from the request), or NULL */
    bool ok;
    int32_t code;         /* the error's code when !ok */
    int64_t keys_examined, docs_examined, nreturned;
    char plan_stage[16];   /* the view's, see view.h */
    uint8_t plan_key[96];
    uint32_t plan_key_len;
} cmd_outcome_t;

static void cmd_outcome_take(cmd_outcome_t *out, const view_t *v, bool ok, const dberr_t *err)
{
    out->ok = ok;
    out->code = ok ? 0 : err->code;
    out->keys_examined = v->keys_examined;
    out->docs_examined = v->docs_examined;
    out->nreturned = v->nreturned;
    memcpy(out->plan_stage, v->plan_stage, sizeof out->plan_stage);
    out->plan_key_len = v->plan_key_len;
    if (v->plan_key_len)
        memcpy(out->plan_key, v->plan_key, v->plan_key_len);
}

static cmd_status_t cmd_run_one(cmd_client_t *client, const wire_request_t *req, bson_t *reply,
                                cmd_outcome_t *out)
{
    client->wait_lsn = 0;
    client->wait_sync = false;
    dberr_t err;
    dberr_clear(&err);
    cmd_ctx_t ctx = {0};
    ctx.client = client;
    ctx.req = req;
    ctx.cmd = &req->cmd;
    ctx.reply = reply;
    ctx.db = req->db;
    ctx.txn_number = -1;
    const cmd_def_t *def = NULL;
    view_t view;
    view_init(&view, req->db, NULL);
    ctx.view = &view;

    if (!bson_iter_init(&ctx.arg, &req->cmd) || !bson_iter_next(&ctx.arg)) {
        dberr_set(&err, DBERR_FAILED_TO_PARSE, "no command name given");
        goto fail;
    }
    ctx.name = bson_iter_key(&ctx.arg);
    cmd_ctx_index(&ctx);
    def = cmd_lookup(ctx.name);
    out->def = def;
    if (def && def->fn == cmd_get_more) {
        bson_iter_t coll;
        if (cmd_find(&ctx, "collection", &coll) && BSON_ITER_HOLDS_UTF8(&coll))
            out->coll = bson_iter_utf8(&coll, NULL);
    } else if (BSON_ITER_HOLDS_UTF8(&ctx.arg)) {
        out->coll = bson_iter_utf8(&ctx.arg, NULL);
    }
    if (!def) {
        server.ops.command++;
        dberr_set(&err, DBERR_COMMAND_NOT_FOUND, "no such command: '%s'", ctx.name);
        goto fail;
    }
    switch (def->counter) {
    case CMD_COUNT_COMMAND:
        server.ops.command++;
        break;
    case CMD_COUNT_QUERY:
        server.ops.query++;
        break;
    case CMD_COUNT_GETMORE:
        server.ops.getmore++;
        break;
    case CMD_COUNT_NONE:
        break;
    }
    if (req->opcode == WIRE_OP_MSG && !req->has_db) {
        dberr_set(&err, 40571, "OP_MSG requests require a $db argument");
        goto fail;
    }
    if (def->admin_only && strcmp(ctx.db, "admin") != 0) {
        dberr_set(&err, DBERR_UNAUTHORIZED, "%s may only be run against the admin database.",
                  ctx.name);
        goto fail;
    }
    if (server.auth) {
        const access_rule_t *rule = cmd_rule(def);
        if (!rule) { /* a command with no row in the access table: refused */
            dberr_set(&err, DBERR_UNAUTHORIZED, "command %s has no access rule", ctx.name);
            goto fail;
        }
        if (!access_check(&ctx, rule, &err))
            goto fail;
    }
    if (!cmd_check_generic(&ctx, &err) || !cmd_write_concern_parse(&ctx, def->is_write, &err) ||
        !cmd_read_concern_parse(&ctx, &err))
        goto fail;
    if (!oplog_check_command(&ctx, def->is_write, &err))
        goto fail; /* local.oplog.rs is read-only, and only find reads it */
    if (def->is_write && (!journal_writable(&err) || !cmd_fsync_locked_check(&err)))
        goto fail;
    if (def->is_write && !memory_write_allowed(ctx.name, ctx.cmd, &err))
        goto fail; /* --max-memory: nothing is written */
    if (def->is_write && !cmd_check_fence(&ctx, &err))
        goto fail; /* a stale fencing token: nothing is written */
    bson_iter_t bdv;
    view.bypass_validation = cmd_find(&ctx, "bypassDocumentValidation", &bdv) &&
                             bson_iter_as_bool(&bdv);
    int prep = cmd_session_prepare(&ctx, &err);
    if (prep == CMD_SESSION_FAIL || !cmd_read_concern_check(&ctx, def->is_write, &err))
        goto fail;
    bool ok = true;
    if (prep == CMD_SESSION_RUN) {
        size_t savepoint = view.txn ? txn_savepoint(view.txn) : 0;
        /* A transaction's statement and a retryable insert, update or
         * delete batch run in slices like any command, holding their
         * session (checked out) meanwhile; commit and abort apply or drop
         * the write set in one slice (and an index build on a collection
         * new to the transaction, never in the catalog, runs in one slice
         * as before), and a retryable findAndModify stays
         * one log record with its config.transactions entry, so a retry
         * after a crash finds all of it or none of it. A retryable batch
         * records its progress as it goes (crud.c). See
         * docs/concurrency.md "Transactions in slices". */
        bool sliced_retry = !ctx.in_txn && ctx.txn_number >= 0 &&
                            (!strcmp(ctx.name, "insert") || !strcmp(ctx.name, "update") ||
                             !strcmp(ctx.name, "delete"));
        bool pinned = (ctx.in_txn && (cmd_txn_is_end(ctx.name) ||
                                      !strcmp(ctx.name, "createIndexes"))) ||
                      (!ctx.in_txn && ctx.txn_number >= 0 && !sliced_retry);
        session_t *held = ctx.session && ctx.txn_number >= 0 && fiber_current()
                              ? ctx.session
                              : NULL;
        if (held)
            session_checkout(held, fiber_current());
        if (pinned)
            fiber_no_yield_begin();
        uint64_t started = uv_hrtime();
        ok = def->fn(&ctx, &err);
        if (view.txn && ctx.session)
            ctx.session->txn_active_ns += uv_hrtime() - started;
        if (pinned)
            fiber_no_yield_end();
        if (held) {
            dberr_t killed;
            dberr_clear(&killed);
            if (!session_checkin(held, &killed) && (ctx.in_txn || !ok)) {
                /* the session or its transaction was ended while the
                 * statement ran: it fails with why (its transaction is
                 * aborted now, nothing it wrote stays); a retryable batch
                 * that finished anyway keeps its result */
                ok = false;
                err = killed;
                view.txn = NULL;
                bson_reinit(reply);
            }
        }
        if (!ok && err.code == VIEW_BLOCKED_CODE) {
            /* a document is locked: undo this attempt's transaction changes
             * and wait; the command runs again from its start */
            if (view.txn)
                txn_rollback_to(view.txn, savepoint);
            bson_reinit(reply);
            if (cmd_park_on_lock(&ctx, &err)) {
                journal_seal(); /* a batch's earlier statements, outside a txn */
                view_destroy(&view);
                return CMD_PARKED;
            }
        }
        ok = cmd_session_finish(&ctx, ok, &err);
        if (held && session_end_pending(held))
            ctx.session = NULL; /* endSessions/killSessions arrived meanwhile */
    }
    /* whatever the command changed, even when it failed part-way, is one
     * log record; the reply waits until that record is durable */
    client->wait_lsn = journal_seal();
    client->wait_sync = journal_mode() == JOURNAL_FSYNC || ctx.wait_sync;
    if (def->is_write && strcmp(ctx.db, "admin") == 0)
        access_changed(); /* a direct write may have changed admin.system.users/roles */
    if (!ok)
        goto fail;
    cmd_outcome_take(out, &view, true, &err);
    view_destroy(&view);
    if (ctx.close)
        return CMD_CLOSE;
    if (ctx.parked)
        return CMD_PARKED;
    cmd_write_concern_report(&ctx);
    BSON_APPEND_DOUBLE(reply, "ok", 1.0);
    cmd_append_cluster_time(reply);
    return CMD_REPLIED;
fail:
    cmd_outcome_take(out, &view, false, &err);
    view_destroy(&view);
    log_debug("COMMAND", "%s failed: %s (%d)", ctx.name ? ctx.name : "?", err.msg, err.code);
    cmd_error_reply(reply, &err);
    cmd_append_cluster_time(reply);
    return CMD_REPLIED;
}

/* ---- what commands cost: stats.c's counters, top, the slow log ---- */

#define CMD_N (sizeof cmd_table / sizeof cmd_table[0])
#define CMD_SLOW_LOG_MAX_BYTES 4096

static stats_cmd_t cmd_stats[CMD_N];
static stats_cmd_t cmd_stats_unknown; /* names atomdb has no command for */
static int64_t cmd_user_asserts;      /* commands answered ok: 0 */

void cmd_stats_foreach(cmd_stats_fn fn, void *arg)
{
    for (size_t i = 0; i < CMD_N; i++)
        fn(cmd_table[i].name, &cmd_stats[i], arg);
    fn("unknown", &cmd_stats_unknown, arg);
}

int64_t cmd_stats_user_asserts(void)
{
    return cmd_user_asserts;
}

/* The counter of top's reply an operation goes to. */
static stats_top_kind_t cmd_top_kind(const cmd_def_t *def)
{
    if (def->fn == cmd_find_cmd)
        return STATS_TOP_QUERIES;
    if (def->fn == cmd_get_more)
        return STATS_TOP_GETMORE;
    if (def->fn == cmd_insert)
        return STATS_TOP_INSERT;
    if (def->fn == cmd_update)
        return STATS_TOP_UPDATE;
    if (def->fn == cmd_delete)
        return STATS_TOP_REMOVE;
    return STATS_TOP_COMMANDS;
}

/* The namespace a command works on ("db.coll"), or false for a command on
 * no collection (top and mongod's AutoStatsTracker leave those out). */
static bool cmd_namespace(const wire_request_t *req, const cmd_outcome_t *out, char *ns,
                          size_t size)
{
    if (!out->coll || !*out->coll)
        return false;
    /* no snprintf: this runs for every command */
    size_t dl = strlen(req->db), cl = strlen(out->coll);
    if (dl + 1 + cl + 1 > size)
        return false;
    memcpy(ns, req->db, dl);
    ns[dl] = '.';
    memcpy(ns + dl + 1, out->coll, cl + 1);
    return true;
}

/* mongod's planSummary: "COLLSCAN", "IDHACK", "IXSCAN { k: 1 }", "EOF";
 * "" when the command ran no query. */
static void cmd_plan_summary(const cmd_outcome_t *out, char *buf, size_t size)
{
    bson_t key;
    if (out->plan_key_len && bson_init_static(&key, out->plan_key, out->plan_key_len)) {
        char *k = shellfmt_doc(&key);
        snprintf(buf, size, "%s %s", out->plan_stage, k ? k : "{}");
        bson_free(k);
    } else {
        snprintf(buf, size, "%s", out->plan_stage);
    }
}

/* Commands that carry a password or a SASL message: logged by name only. */
static bool cmd_carries_secret(const wire_request_t *req)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, &req->cmd) || !bson_iter_next(&it))
        return false;
    const char *name = bson_iter_key(&it);
    return !strcmp(name, "createUser") || !strcmp(name, "updateUser") ||
           !strncmp(name, "sasl", 4) || !strcmp(name, "hello") || !strcasecmp(name, "isMaster");
}

/* One "Slow query" line (id 51803) as mongod writes it. */
static void cmd_log_slow(const cmd_client_t *client, const wire_request_t *req,
                         const cmd_outcome_t *out, const bson_t *reply, int64_t ms)
{
    char ns[512], ctx[32];
    if (!cmd_namespace(req, out, ns, sizeof ns))
        snprintf(ns, sizeof ns, "%s.$cmd", req->db);
    snprintf(ctx, sizeof ctx, "conn%lld", (long long)client->id);
    log_attr_t attrs[16];
    size_t n = 0;
    attrs[n++] = LOG_STR("type", "command");
    attrs[n++] = LOG_STR("ns", ns);
    if (req->cmd.len <= CMD_SLOW_LOG_MAX_BYTES && !cmd_carries_secret(req))
        attrs[n++] = LOG_DOC("command", &req->cmd);
    char plan[160];
    cmd_plan_summary(out, plan, sizeof plan);
    if (plan[0]) {
        attrs[n++] = LOG_STR("planSummary", plan);
        attrs[n++] = LOG_INT("keysExamined", out->keys_examined);
        attrs[n++] = LOG_INT("docsExamined", out->docs_examined);
    }
    if (out->def && (out->def->fn == cmd_find_cmd || out->def->fn == cmd_get_more ||
                     out->def->fn == cmd_aggregate))
        attrs[n++] = LOG_INT("nreturned", out->nreturned);
    if (!out->ok) {
        attrs[n++] = LOG_INT("ok", 0);
        attrs[n++] = LOG_INT("errCode", out->code);
        attrs[n++] = LOG_STR("errName", dberr_codename(out->code));
    }
    attrs[n++] = LOG_INT("reslen", reply->len);
    /* atomdb's own: time parked waiting for a document lock or a lease */
    attrs[n++] = LOG_INT("atomdbWaitMillis", (int64_t)(client->op_wait_ns / 1000000));
    attrs[n++] = LOG_INT("durationMillis", ms);
    log_event_n(LOG_INFO, "COMMAND", &(log_line_opts_t){.id = 51803, .ctx = ctx}, "Slow query",
                attrs, n);
    stats_docs.slow_ops++;
    stats_slow_op_t op = {.at_ms = server_now_ms(), .millis = ms,
                          .wait_millis = (int64_t)(client->op_wait_ns / 1000000)};
    snprintf(op.ns, sizeof op.ns, "%s", ns);
    bson_iter_t it;
    if (bson_iter_init(&it, &req->cmd) && bson_iter_next(&it))
        snprintf(op.command, sizeof op.command, "%s", bson_iter_key(&it));
    snprintf(op.plan, sizeof op.plan, "%s", plan);
    stats_slow_remember(&op);
}

/* Counts a finished command: its command's counters and histogram, top's
 * namespace totals, user asserts. */
static void cmd_record(const wire_request_t *req, const cmd_outcome_t *out, uint64_t ns_taken)
{
    stats_cmd_record(out->def ? &cmd_stats[out->def - cmd_table] : &cmd_stats_unknown, out->ok,
                     ns_taken);
    if (!out->ok)
        cmd_user_asserts++;
    stats_docs.keys_examined += out->keys_examined;
    stats_docs.docs_examined += out->docs_examined;
    stats_docs.returned += out->nreturned;
    char ns[512];
    if (out->def && cmd_namespace(req, out, ns, sizeof ns))
        stats_top_record(ns, cmd_top_kind(out->def), out->def->is_write,
                         (int64_t)(ns_taken / 1000));
}

static cmd_status_t cmd_run_timed(cmd_client_t *client, const wire_request_t *req, bson_t *reply)
{
    uint64_t t0 = uv_hrtime();
    if (!client->rerun) {
        client->op_start_hr = t0;
        client->op_wait_ns = 0;
    } else if (client->op_parked_hr) {
        client->op_wait_ns += t0 - client->op_parked_hr;
    }
    client->op_parked_hr = 0;
    cmd_outcome_t out; /* cmd_run_one fills the rest (cmd_outcome_take) before a reply */
    out.def = NULL;
    out.coll = NULL;
    cmd_status_t st = cmd_run_one(client, req, reply, &out);
    uint64_t t1 = uv_hrtime();
    if (st == CMD_PARKED) {
        client->op_parked_hr = t1;
        client->op_def = out.def;
        return st;
    }
    uint64_t taken = t1 - client->op_start_hr;
    cmd_record(req, &out, taken);
    int64_t ms = (int64_t)(taken / 1000000);
    if (stats_slow_should_log(ms))
        cmd_log_slow(client, req, &out, reply, ms);
    return st;
}

void cmd_finish_parked(cmd_client_t *client, bool ok)
{
    if (!client->op_start_hr)
        return;
    uint64_t now = uv_hrtime();
    if (client->op_parked_hr)
        client->op_wait_ns += now - client->op_parked_hr;
    client->op_parked_hr = 0;
    stats_cmd_record(client->op_def ? &cmd_stats[(const cmd_def_t *)client->op_def - cmd_table]
                                    : &cmd_stats_unknown,
                     ok, now - client->op_start_hr);
}

cmd_status_t cmd_run(cmd_client_t *client, const wire_request_t *req, bson_t *reply)
{
    return op_run(client, req, reply, cmd_run_timed);
}

/* ---- helpers shared by the handlers ---- */

void cmd_ctx_index(cmd_ctx_t *ctx)
{
    bson_iter_t it;
    ctx->indexed = false;
    ctx->nfields = 0;
    ctx->first_bits = 0;
    if (!bson_iter_init(&it, ctx->cmd))
        return;
    while (bson_iter_next(&it)) {
        if (ctx->nfields == CMD_FIELDS_MAX)
            return;
        cmd_field_t *f = &ctx->fields[ctx->nfields++];
        f->key = bson_iter_key(&it);
        f->it = it;
        ctx->first_bits |= (uint64_t)1 << ((unsigned char)f->key[0] & 63);
    }
    ctx->indexed = true;
}

bool cmd_find(const cmd_ctx_t *ctx, const char *key, bson_iter_t *out)
{
    if (!ctx->indexed)
        return bson_iter_init_find(out, ctx->cmd, key);
    if (!(ctx->first_bits & ((uint64_t)1 << ((unsigned char)key[0] & 63))))
        return false; /* most optional arguments are absent: no key starts so */
    for (unsigned i = 0; i < ctx->nfields; i++) {
        if (ctx->fields[i].key[0] == key[0] && strcmp(ctx->fields[i].key, key) == 0) {
            *out = ctx->fields[i].it;
            return true;
        }
    }
    return false;
}

bool cmd_collection_name(const cmd_ctx_t *ctx, const char **out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_UTF8(&ctx->arg))
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "collection name has invalid type %s",
                         shellfmt_type_name(bson_iter_type(&ctx->arg)));
    uint32_t len;
    *out = bson_iter_utf8(&ctx->arg, &len);
    if (strlen(*out) != len)
        return dberr_set(err, DBERR_INVALID_NAMESPACE,
                         "Invalid collection name: collection names must not contain null "
                         "characters");
    return true;
}

bool cmd_target(const cmd_ctx_t *ctx, cmd_target_t *t, dberr_t *err)
{
    if (!cmd_collection_name(ctx, &t->coll, err))
        return false;
    snprintf(t->ns, sizeof t->ns, "%s.%s", ctx->db, t->coll);
    t->c = catalog_get(server.catalog, ctx->db, t->coll);
    return true;
}

bool cmd_missing_field(dberr_t *err, const char *field_fmt, ...)
{
    char field[512]; /* as long as any errmsg */
    va_list ap;
    va_start(ap, field_fmt);
    vsnprintf(field, sizeof field, field_fmt, ap);
    va_end(ap);
    return dberr_set(err, DBERR_FAILED_TO_PARSE, "BSON field '%s' is missing but a required field",
                     field);
}

bool cmd_wrong_type(dberr_t *err, const bson_iter_t *it, const char *expected,
                    const char *field_fmt, ...)
{
    char field[512]; /* as long as any errmsg */
    va_list ap;
    va_start(ap, field_fmt);
    vsnprintf(field, sizeof field, field_fmt, ap);
    va_end(ap);
    return dberr_set(err, DBERR_TYPE_MISMATCH,
                     "BSON field '%s' is the wrong type '%s', expected %s", field,
                     shellfmt_type_name(bson_iter_type(it)), expected);
}

bool cmd_required(const cmd_ctx_t *ctx, const char *key, bson_type_t type, bson_iter_t *it,
                  dberr_t *err)
{
    if (!cmd_find(ctx, key, it))
        return cmd_missing_field(err, "%s.%s", ctx->name, key);
    if (bson_iter_type(it) != type)
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "BSON field '%s.%s' is the wrong type '%s', expected type '%s'",
                         ctx->name, key, shellfmt_type_name(bson_iter_type(it)),
                         shellfmt_type_name(type));
    return true;
}

bool cmd_opt_int64(const cmd_ctx_t *ctx, const char *key, int64_t *out, dberr_t *err)
{
    bson_iter_t it;
    if (!cmd_find(ctx, key, &it) || BSON_ITER_HOLDS_NULL(&it))
        return true;
    if (!BSON_ITER_HOLDS_NUMBER(&it))
        return cmd_wrong_type(err, &it, "types '[long, int, decimal, double]'", "%s.%s", ctx->name,
                              key);
    *out = bson_iter_as_int64(&it);
    return true;
}

bool cmd_opt_bool(const cmd_ctx_t *ctx, const char *key, bool *out, dberr_t *err)
{
    bson_iter_t it;
    if (!cmd_find(ctx, key, &it) || BSON_ITER_HOLDS_NULL(&it))
        return true;
    if (!BSON_ITER_HOLDS_BOOL(&it) && !BSON_ITER_HOLDS_NUMBER(&it))
        return cmd_wrong_type(err, &it, "types '[bool, long, int, decimal, double]'", "%s.%s",
                              ctx->name, key);
    *out = bson_iter_as_bool(&it);
    return true;
}

bool cmd_opt_doc(const cmd_ctx_t *ctx, const char *key, bson_t *out, bool *present, dberr_t *err)
{
    bson_iter_t it;
    *present = false;
    if (!cmd_find(ctx, key, &it) || BSON_ITER_HOLDS_NULL(&it))
        return true;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return cmd_wrong_type(err, &it, "type 'object'", "%s.%s", ctx->name, key);
    *present = cmd_iter_doc(&it, out);
    return true;
}

/* Gives matcher `m` (NULL: none was compiled) the command's `let`
 * variables; returns it. */
static matcher_t *cmd_matcher_let(const cmd_ctx_t *ctx, matcher_t *m)
{
    bson_iter_t it;
    bson_t let;
    if (m && cmd_find(ctx, "let", &it) && BSON_ITER_HOLDS_DOCUMENT(&it) && cmd_iter_doc(&it, &let))
        matcher_set_let(m, &let);
    return m;
}

struct matcher *cmd_matcher_new(const cmd_ctx_t *ctx, const bson_t *filter, dberr_t *err)
{
    return cmd_matcher_let(ctx, matcher_new(filter, err));
}

struct matcher *cmd_matcher_new_near(const cmd_ctx_t *ctx, const bson_t *filter, dberr_t *err)
{
    return cmd_matcher_let(ctx, matcher_new_near(filter, err));
}

void cmd_append_id_index(bson_t *out)
{
    bson_t idx, key;
    bson_append_document_begin(out, "idIndex", -1, &idx);
    BSON_APPEND_INT32(&idx, "v", 2);
    bson_append_document_begin(&idx, "key", -1, &key);
    BSON_APPEND_INT32(&key, "_id", 1);
    bson_append_document_end(&idx, &key);
    BSON_APPEND_UTF8(&idx, "name", "_id_");
    bson_append_document_end(out, &idx);
}

void cmd_append_create_options(bson_t *out, const bson_t *cmd)
{
    bson_t options;
    if (bsonview_field(cmd, "options", &options))
        bson_concat(out, &options);
    if (!bson_has_field(out, "viewOn"))
        cmd_append_id_index(out);
}

const char *cmd_index_key(uint32_t i, char *buf, size_t size)
{
    const char *key;
    bson_uint32_to_string(i, &key, buf, size);
    return key;
}

const char *cmd_array_key(cmd_array_t *a)
{
    return cmd_index_key(a->n++, a->key, sizeof a->key);
}
