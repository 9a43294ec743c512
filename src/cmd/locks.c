/* locks: the lease-lock commands (acquireLock, renewLock, releaseLock,
 * lockInfo, listLocks), the `fence: {lock, token}` check every write
 * command passes, and the hooks that release locks when a connection
 * closes or a session ends. The lock table is src/lease; see docs/locks.md. */
#include "cmd/cmd-private.h"
#include "cmd/access.h"

#include <math.h>
#include <string.h>

#include "journal/journal.h"
#include "lease/lease.h"
#include "util/log.h"
#include "util/omap.h"

/* Longest lease and wait accepted, in ms (mongod's maxTimeMS range). */
#define LOCKS_MAX_MS 2147483647LL

/* The lock name the command's first element holds. */
static bool locks_name(const cmd_ctx_t *ctx, const char **out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_UTF8(&ctx->arg))
        return cmd_wrong_type(err, &ctx->arg, "type 'string'", "%s", ctx->name);
    uint32_t len;
    const char *name = bson_iter_utf8(&ctx->arg, &len);
    if (!lease_valid_name(name, len, err))
        return false;
    *out = name;
    return true;
}

/* A whole number under `it` (int, long, or a double without fraction)
 * within [min, max]; `field` names it in errors ("acquireLock.leaseMs"). */
static bool locks_int(const bson_iter_t *it, const char *field, int64_t min, int64_t max,
                      int64_t *out, dberr_t *err)
{
    int64_t v;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
        v = bson_iter_int32(it);
        break;
    case BSON_TYPE_INT64:
        v = bson_iter_int64(it);
        break;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (!isfinite(d) || d != floor(d) || d < -9.2e18 || d > 9.2e18)
            return dberr_set(err, DBERR_BAD_VALUE, "BSON field '%s' must be a whole number, got %g",
                             field, d);
        v = (int64_t)d;
        break;
    }
    default:
        return cmd_wrong_type(err, it, "types '[long, int, double]'", "%s", field);
    }
    if (v < min || v > max)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "BSON field '%s' value %lld is out of range [%lld, %lld]", field,
                         (long long)v, (long long)min, (long long)max);
    *out = v;
    return true;
}

/* A whole-number argument of the command; required ones fail with
 * FailedToParse when missing, optional ones keep *out. */
static bool locks_int_arg(const cmd_ctx_t *ctx, const char *key, bool required, int64_t min,
                          int64_t max, int64_t *out, dberr_t *err)
{
    bson_iter_t it;
    char field[128];
    snprintf(field, sizeof field, "%s.%s", ctx->name, key);
    if (!cmd_find(ctx, key, &it) || BSON_ITER_HOLDS_NULL(&it)) {
        if (required)
            return cmd_missing_field(err, "%s", field);
        return true;
    }
    return locks_int(&it, field, min, max, out, err);
}

/* The session id bytes of the command's lsid ({id: UUID}), if any. */
static bool locks_lsid_of(const bson_value_t *v, const uint8_t **data, uint32_t *len)
{
    if (v->value_type == BSON_TYPE_BINARY) {
        *data = v->value.v_binary.data;
        *len = v->value.v_binary.data_len;
        return *len > 0 && *len <= LEASE_LSID_MAX;
    }
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return false;
    bson_t doc;
    bson_iter_t id;
    if (!bson_init_static(&doc, v->value.v_doc.data, v->value.v_doc.data_len) ||
        !bson_iter_init_find(&id, &doc, "id") || !BSON_ITER_HOLDS_BINARY(&id))
        return false;
    bson_subtype_t sub;
    bson_iter_binary(&id, &sub, len, data);
    return *len > 0 && *len <= LEASE_LSID_MAX;
}

static void locks_lsid(const cmd_ctx_t *ctx, const uint8_t **data, uint32_t *len)
{
    bson_iter_t it;
    *data = NULL;
    *len = 0;
    if (cmd_find(ctx, "lsid", &it) && !locks_lsid_of(bson_iter_value(&it), data, len)) {
        *data = NULL;
        *len = 0;
    }
}

/* Milliseconds on the lease clock → a wall-clock date. */
static int64_t locks_wall(int64_t lease_ms_clock)
{
    return server_now_ms() + (lease_ms_clock - lease_now_ms());
}

static void locks_append_grant(bson_t *reply, const lease_grant_t *g)
{
    BSON_APPEND_BOOL(reply, "acquired", g->acquired);
    if (g->acquired) {
        BSON_APPEND_INT64(reply, "token", g->token);
        BSON_APPEND_DATE_TIME(reply, "expiresAt", locks_wall(g->expires));
    }
}

/* A parked acquireLock ended: answer it once its token is durable. */
/* ---- under --auth: a lock belongs to the user who took it ---- */

/* The user holding a lock name's current token (omap value). */
typedef struct locks_holder {
    int64_t token;
    uint64_t user; /* access_owner() of the connection that took it */
} locks_holder_t;

static omap_t *locks_holders; /* lock name -> locks_holder_t */

static void locks_note_holder(const char *name, int64_t token, uint64_t user)
{
    if (!server.auth)
        return;
    if (!locks_holders)
        locks_holders = omap_new();
    size_t n = strlen(name);
    locks_holder_t *h = omap_get(locks_holders, name, n);
    if (!h) {
        h = bson_malloc0(sizeof *h);
        omap_insert(locks_holders, name, n, h);
    }
    h->token = token;
    h->user = user;
}

/* Unauthorized 13 when `token` of lock `name` was taken by another user. */
static bool locks_check_holder(cmd_ctx_t *ctx, const char *name, int64_t token, dberr_t *err)
{
    if (!server.auth || !locks_holders)
        return true;
    locks_holder_t *h = omap_get(locks_holders, name, strlen(name));
    if (h && h->token == token && h->user != access_owner(ctx->client))
        return dberr_set(err, DBERR_UNAUTHORIZED,
                         "lock '%s' with token %lld was taken by another user", name,
                         (long long)token);
    return true;
}

static void locks_on_wake(void *arg, const lease_grant_t *g)
{
    cmd_client_t *client = arg;
    cmd_auth_t *a = client->auth;
    client->op_wait = CMD_WAIT_NONE;
    if (a && a->lock_pending) {
        if (g->acquired)
            locks_note_holder(a->lock_pending, g->token, access_owner(client));
        bson_free(a->lock_pending);
        a->lock_pending = NULL;
    }
    bson_t reply = BSON_INITIALIZER;
    locks_append_grant(&reply, g);
    BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
    cmd_append_cluster_time(&reply);
    /* the network layer holds a parked reply until this record is durable,
     * as it does for a reply from cmd_run */
    client->wait_lsn = g->acquired ? g->lsn : 0;
    client->wait_sync = journal_mode() == JOURNAL_FSYNC || g->sync;
    cmd_finish_parked(client, true);
    client->send_parked_reply(client, &reply);
    bson_destroy(&reply);
}

bool cmd_lease_wait_kill(cmd_client_t *client)
{
    if (client->op_wait != CMD_WAIT_LEASE || !lease_cancel_wait(client->id))
        return false;
    client->op_wait = CMD_WAIT_NONE;
    if (client->auth && client->auth->lock_pending) {
        bson_free(client->auth->lock_pending);
        client->auth->lock_pending = NULL;
    }
    dberr_t err;
    dberr_set(&err, DBERR_INTERRUPTED, "operation was interrupted");
    bson_t reply = BSON_INITIALIZER;
    cmd_error_reply(&reply, &err);
    cmd_append_cluster_time(&reply);
    client->wait_lsn = 0;
    cmd_finish_parked(client, false);
    client->send_parked_reply(client, &reply);
    bson_destroy(&reply);
    return true;
}

bool cmd_acquire_lock(cmd_ctx_t *ctx, dberr_t *err)
{
    lease_request_t req = {0};
    bson_iter_t it;
    if (!locks_name(ctx, &req.name, err))
        return false;
    if (!cmd_required(ctx, "owner", BSON_TYPE_UTF8, &it, err))
        return false;
    uint32_t olen;
    req.owner = bson_iter_utf8(&it, &olen);
    if (olen == 0 || olen > LEASE_OWNER_MAX || memchr(req.owner, '\0', olen))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "acquireLock.owner must be 1 to %d bytes without NUL", LEASE_OWNER_MAX);
    if (!locks_int_arg(ctx, "leaseMs", true, 1, LOCKS_MAX_MS, &req.lease_ms, err) ||
        !locks_int_arg(ctx, "waitMs", false, 0, LOCKS_MAX_MS, &req.wait_ms, err) ||
        !cmd_opt_bool(ctx, "releaseOnDisconnect", &req.release_on_disconnect, err))
        return false;
    if (ctx->max_time_ms > 0 && req.wait_ms > ctx->max_time_ms)
        req.wait_ms = ctx->max_time_ms; /* maxTimeMS caps the wait */
    if (server.stopping)
        req.wait_ms = 0;
    if (!journal_writable(err))
        return false;
    locks_lsid(ctx, &req.lsid, &req.lsid_len);
    req.conn_id = ctx->client->id;
    req.sync = ctx->wait_sync;

    lease_grant_t g;
    switch (lease_acquire(&req, locks_on_wake, ctx->client, &g, err)) {
    case LEASE_GRANTED:
    case LEASE_BUSY:
        if (g.acquired)
            locks_note_holder(req.name, g.token, access_owner(ctx->client));
        locks_append_grant(ctx->reply, &g);
        return true;
    case LEASE_PARKED:
        if (server.auth) {
            cmd_auth_t *a = access_auth(ctx->client);
            bson_free(a->lock_pending);
            a->lock_pending = bson_strdup(req.name);
        }
        ctx->client->op_wait = CMD_WAIT_LEASE; /* currentOp shows it waiting */
        ctx->client->op_wait_hr = uv_hrtime();
        snprintf(ctx->client->op_wait_on, sizeof ctx->client->op_wait_on, "%s", req.name);
        ctx->parked = true;
        return true;
    case LEASE_FAILED:
        break;
    }
    return false;
}

bool cmd_renew_lock(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *name = NULL;
    int64_t token = 0, lease_ms = 0, expires;
    const uint8_t *lsid;
    uint32_t lsid_len;
    if (!locks_name(ctx, &name, err) ||
        !locks_int_arg(ctx, "token", true, 0, INT64_MAX, &token, err) ||
        !locks_int_arg(ctx, "leaseMs", true, 1, LOCKS_MAX_MS, &lease_ms, err))
        return false;
    locks_lsid(ctx, &lsid, &lsid_len);
    if (!locks_check_holder(ctx, name, token, err) ||
        !lease_renew(name, token, lease_ms, lsid, lsid_len, &expires, err))
        return false;
    BSON_APPEND_INT64(ctx->reply, "token", token);
    BSON_APPEND_DATE_TIME(ctx->reply, "expiresAt", locks_wall(expires));
    return true;
}

bool cmd_release_lock(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *name = NULL;
    int64_t token = 0;
    if (!locks_name(ctx, &name, err) ||
        !locks_int_arg(ctx, "token", true, 0, INT64_MAX, &token, err))
        return false;
    if (!locks_check_holder(ctx, name, token, err) || !lease_release(name, token, err))
        return false;
    BSON_APPEND_BOOL(ctx->reply, "released", true);
    return true;
}

/* Appends one lock's description (lockInfo's reply, a listLocks entry). */
static void locks_append_info(bson_t *out, const lease_info_t *info)
{
    BSON_APPEND_UTF8(out, "lock", info->name);
    BSON_APPEND_BOOL(out, "held", info->held);
    if (info->held) {
        BSON_APPEND_UTF8(out, "owner", info->owner);
        BSON_APPEND_INT64(out, "token", info->token);
        BSON_APPEND_DATE_TIME(out, "expiresAt", locks_wall(info->expires));
        int64_t left = info->expires - lease_now_ms();
        BSON_APPEND_INT64(out, "remainingMs", left > 0 ? left : 0);
        BSON_APPEND_INT64(out, "connectionId", info->conn_id);
        BSON_APPEND_BOOL(out, "releaseOnDisconnect", info->release_on_disconnect);
        if (info->lsid) {
            bson_t lsid;
            bson_append_document_begin(out, "lsid", -1, &lsid);
            bson_append_binary(&lsid, "id", -1, info->lsid_len == 16 ? BSON_SUBTYPE_UUID
                                                                      : BSON_SUBTYPE_BINARY,
                               info->lsid, info->lsid_len);
            bson_append_document_end(out, &lsid);
        }
    } else {
        BSON_APPEND_NULL(out, "owner");
        BSON_APPEND_INT64(out, "token", info->token);
    }
    BSON_APPEND_INT64(out, "waiting", (int64_t)info->waiting);
}

bool cmd_lock_info(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *name = NULL;
    if (!locks_name(ctx, &name, err))
        return false;
    lease_info_t info;
    lease_get_info(name, &info);
    locks_append_info(ctx->reply, &info);
    return true;
}

static void locks_list_one(const lease_info_t *info, void *arg)
{
    cmd_array_t *locks = arg;
    bson_t doc;
    bson_append_document_begin(locks->arr, cmd_array_key(locks), -1, &doc);
    locks_append_info(&doc, info);
    bson_append_document_end(locks->arr, &doc);
}

bool cmd_list_locks(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_t arr;
    bson_append_array_begin(ctx->reply, "locks", -1, &arr);
    cmd_array_t locks = {.arr = &arr};
    lease_foreach(locks_list_one, &locks);
    bson_append_array_end(ctx->reply, &arr);
    return true;
}

bool cmd_check_fence(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it, f;
    if (!cmd_find(ctx, "fence", &it) || BSON_ITER_HOLDS_NULL(&it))
        return true;
    bson_t fence;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !cmd_iter_doc(&it, &fence))
        return cmd_wrong_type(err, &it, "type 'object'", "%s.fence", ctx->name);
    const char *lock = NULL;
    uint32_t lock_len = 0;
    bool has_token = false;
    int64_t token = 0;
    char field[128];
    if (!bson_iter_init(&f, &fence))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "BSON field '%s.fence' is not valid BSON",
                         ctx->name);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        snprintf(field, sizeof field, "%s.fence.%s", ctx->name, k);
        if (strcmp(k, "lock") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return cmd_wrong_type(err, &f, "type 'string'", "%s", field);
            lock = bson_iter_utf8(&f, &lock_len);
        } else if (strcmp(k, "token") == 0) {
            if (!locks_int(&f, field, 0, INT64_MAX, &token, err))
                return false;
            has_token = true;
        } else {
            return dberr_set(err, 40415, "BSON field '%s' is an unknown field.", field);
        }
    }
    if (!lock)
        return cmd_missing_field(err, "%s.fence.lock", ctx->name);
    if (!has_token)
        return cmd_missing_field(err, "%s.fence.token", ctx->name);
    if (!lease_valid_name(lock, lock_len, err))
        return false;
    char name[LEASE_NAME_MAX + 1];
    snprintf(name, sizeof name, "%.*s", (int)lock_len, lock);
    return locks_check_holder(ctx, name, token, err) && lease_check_fence(lock, token, err);
}

void cmd_locks_client_closed(cmd_client_t *client)
{
    lease_connection_closed(client->id);
}

void cmd_locks_session_ended(const bson_value_t *lsid)
{
    const uint8_t *data;
    uint32_t len;
    if (lsid && locks_lsid_of(lsid, &data, &len))
        lease_session_ended(data, len);
}
