/* op: runs long commands on fibers, resumes suspended ones from a libuv
 * idle handle (one slice each per loop turn, after the loop has polled
 * the sockets), and keeps the table behind currentOp and killOp (whose
 * command handlers are here too). */
#include "cmd/op.h"

#include <string.h>
#include <time.h>
#include <uv.h>

#include "cmd/access.h"
#include "cmd/cmd-private.h"
#include "cmd/server.h"
#include "doc/matcher.h"
#include "store/reaper.h"
#include "txn/session.h"
#include "util/shellfmt.h"
#include "util/dlist.h"
#include "util/fiber.h"
#include "util/log.h"
#include "util/namelist.h"

typedef struct op {
    int64_t opid;
    cmd_client_t *client;
    const wire_request_t *req;
    cmd_status_t (*run)(cmd_client_t *client, const wire_request_t *req, bson_t *reply);
    fiber_t *fiber;
    bson_t *reply;         /* filled by the fiber (heap: bson_t is over-aligned) */
    cmd_status_t status;
    bool suspended;        /* has yielded and not finished: the caller gets CMD_PARKED */
    struct op *prev, *next; /* the table, oldest first */
} op_t;

static op_t *op_head, *op_tail;
/* Every connection that has sent a request, oldest first: currentOp lists
 * the requests parked on a lock and, with $all, the idle connections. */
static cmd_client_t *op_clients_head, *op_clients_tail;
static size_t op_len;
static int64_t op_next_id = 1;
static uv_idle_t op_idle;
static bool op_idle_ready;
static op_t *op_cursor; /* the next suspended op to resume (round robin) */
static bool op_reaper_hooked; /* reaper_set_wake(op_schedule) done */
/* One op that finished without yielding, kept with its (emptied) reply
 * buffer for the next request: the common request costs no malloc/free
 * for its op and reply. */
static op_t *op_spare;

/* Commands that may touch many documents. */
static bool op_is_long(const char *name)
{
    static const char *const names[] = {"find",   "getMore", "aggregate",     "count",
                                        "distinct", "update", "delete",       "findAndModify",
                                        "findandmodify", "explain", "insert",
                                        "commitTransaction", "createIndexes"};
    return namelist_has(names, NAMELIST_COUNT(names), name);
}

/* True when the request names a session (lsid) that a statement running
 * in slices holds: the request must wait for it, so it runs on a fiber
 * (txncmds.c waits for the session's checkout). */
static bool op_session_in_use(const wire_request_t *req)
{
    bson_iter_t it;
    uint8_t id[16];
    dberr_t err;
    if (!bson_iter_init_find(&it, &req->cmd, "lsid") || !session_parse_lsid(&it, id, &err))
        return false;
    const session_t *s = session_find(id);
    return s && s->checkout;
}

static void op_link(op_t *o)
{
    DLIST_APPEND_TAILED(op_head, op_tail, o, prev, next);
    op_len++;
}

static void op_unlink(op_t *o)
{
    if (op_cursor == o)
        op_cursor = o->next;
    DLIST_UNLINK_TAILED(op_head, op_tail, o, prev, next);
    op_len--;
}

static void op_client_list(cmd_client_t *c)
{
    if (c->op_listed)
        return;
    c->op_listed = true;
    DLIST_APPEND_TAILED(op_clients_head, op_clients_tail, c, op_prev, op_next);
}

static void op_client_unlist(cmd_client_t *c)
{
    if (!c->op_listed)
        return;
    c->op_listed = false;
    DLIST_UNLINK_TAILED(op_clients_head, op_clients_tail, c, op_prev, op_next);
}

static void op_body(void *arg)
{
    op_t *o = arg;
    o->status = o->run(o->client, o->req, o->reply);
}

static void op_on_idle(uv_idle_t *h);

/* Slices run after a yield, and the longest (wall clock), for serverStatus. */
static uint64_t op_slices, op_slice_max_ns, op_slices_over_ms;
/* Requests that started since the last slice of a suspended operation, and
 * the slice such an operation gets while they keep coming (setParameter
 * atomdbBusyYieldPeriodMicros): a report yields more often while others
 * wait, and runs in full slices when it is alone. */
static uint64_t op_started_since_slice;
static int64_t op_busy_slice_us = 200;
/* While requests keep arriving, a suspended operation's slice is also at
 * most this share (1/N) of the loop time the others took since its last
 * slice, but never under OP_MIN_SLICE_US, so it keeps moving: under load a
 * report gets about a ninth of the loop, alone it gets all of it (1/4 left
 * the mixed bench's counter a median 78% of its solo rate, 1/8 88%). */
#define OP_BUSY_SHARE 8
#define OP_MIN_SLICE_US 20
static uint64_t op_last_slice_end_ns;

void op_set_busy_slice_us(int64_t us)
{
    op_busy_slice_us = us;
}

int64_t op_busy_slice(void)
{
    return op_busy_slice_us;
}

static void op_note_slice(uint64_t ns)
{
    op_slices++;
    if (ns > op_slice_max_ns)
        op_slice_max_ns = ns;
    if (ns > 1000000)
        op_slices_over_ms++;
}

static void op_schedule(void)
{
    if (!op_idle_ready) {
        uv_idle_init(server.loop, &op_idle);
        uv_unref((uv_handle_t *)&op_idle);
        op_idle_ready = true;
    }
    if (!uv_is_active((uv_handle_t *)&op_idle))
        uv_idle_start(&op_idle, op_on_idle);
}

/* A zeroed op with an empty reply buffer: the spare one, or a new one. */
static op_t *op_take(void)
{
    op_t *o = op_spare;
    if (!o) {
        o = bson_malloc0(sizeof *o);
        o->reply = bson_sized_new(256); /* a write's reply, $clusterTime included, fits */
        return o;
    }
    op_spare = NULL;
    bson_t *reply = o->reply;
    memset(o, 0, sizeof *o);
    o->reply = reply;
    return o;
}

/* Frees `o` (unlinked, fiber destroyed), or keeps it as the spare when
 * its reply was small (a large reply's buffer is not held on to). */
static void op_release(op_t *o)
{
    if (!op_spare && o->reply && o->reply->len <= 4096) {
        bson_reinit(o->reply);
        op_spare = o;
        return;
    }
    bson_destroy(o->reply);
    bson_free(o);
}

static void op_free(op_t *o)
{
    op_unlink(o);
    fiber_destroy(o->fiber);
    if (o->client && o->client->op == o)
        o->client->op = NULL;
    op_release(o);
}

/* A suspended op finished: deliver what a direct run would have returned. */
static void op_finish_suspended(op_t *o)
{
    cmd_client_t *client = o->client;
    cmd_status_t st = o->status;
    bson_t *reply = o->reply;
    o->reply = NULL;
    client->op = NULL;
    op_free(o);
    if (st != CMD_PARKED) /* parked on a lock: the lock's wake-up reruns it */
        client->send_parked_reply(client, reply);
    bson_destroy(reply);
}

/* Runs one slice of suspended op `o`. */
static void op_step(op_t *o)
{
    uint64_t t0 = uv_hrtime();
    bool done = fiber_resume(o->fiber);
    op_last_slice_end_ns = uv_hrtime();
    op_note_slice(op_last_slice_end_ns - t0);
    if (done)
        op_finish_suspended(o);
}

/* The next slice of a suspended operation: full while it is alone; while
 * other requests started since its last slice, the busy slice, cut to an
 * eighth of the time the loop spent on them. */
static int64_t op_slice_now(void)
{
    if (!op_started_since_slice)
        return fiber_slice_us();
    int64_t us = op_busy_slice_us;
    if (op_last_slice_end_ns) {
        int64_t others_us = (int64_t)((uv_hrtime() - op_last_slice_end_ns) / 1000u);
        int64_t share = others_us / OP_BUSY_SHARE;
        if (share < OP_MIN_SLICE_US)
            share = OP_MIN_SLICE_US;
        if (share < us)
            us = share;
    }
    return us;
}

static void op_on_idle(uv_idle_t *h)
{
    /* what drops detached is freed a slice at a time, as long operations */
    bool reaping = reaper_pending() &&
                   reaper_step((uint64_t)(op_started_since_slice ? op_busy_slice_us
                                                                 : fiber_slice_us()) *
                               1000u);
    /* one slice for the next suspended op; the loop polls the sockets
     * before the next idle callback */
    op_t *o = op_cursor ? op_cursor : op_head;
    while (o && !o->suspended)
        o = o->next;
    if (!o) {
        for (o = op_head; o && !o->suspended; o = o->next)
            ;
    }
    if (!o) {
        if (!reaping)
            uv_idle_stop(h);
        op_started_since_slice = 0;
        return;
    }
    op_cursor = o->next;
    fiber_set_slice(o->fiber, op_slice_now());
    op_started_since_slice = 0;
    op_step(o);
}

cmd_status_t op_run(cmd_client_t *client, const wire_request_t *req, bson_t *reply,
                    cmd_status_t (*run)(cmd_client_t *client, const wire_request_t *req,
                                        bson_t *reply))
{
    bson_iter_t it;
    op_started_since_slice++;
    if (!op_reaper_hooked) {
        reaper_set_wake(op_schedule);
        op_reaper_hooked = true;
        if (reaper_pending()) /* drops replayed by recovery */
            op_schedule();
    }
    if (!fiber_current() && !client->op) {
        /* one opid per request, kept across its parks and reruns */
        op_client_list(client);
        if (!client->rerun) {
            client->op_id = op_next_id++;
            client->op_killed = false;
        }
        client->op_req = req;
        client->op_wait = CMD_WAIT_NONE; /* a park sets it again */
    }
    if (fiber_current() || client->op || !bson_iter_init(&it, &req->cmd) || !bson_iter_next(&it) ||
        (!op_is_long(bson_iter_key(&it)) && !op_session_in_use(req)))
        return run(client, req, reply);
    op_t *o = op_take();
    o->fiber = fiber_new(op_body, o);
    if (!o->fiber) {
        op_release(o);
        return run(client, req, reply);
    }
    o->opid = client->op_id;
    o->client = client;
    o->req = req;
    o->run = run;
    op_link(o);
    client->op = o;
    if (fiber_resume(o->fiber)) {
        cmd_status_t st = o->status;
        bson_concat(reply, o->reply);
        op_free(o);
        return st;
    }
    o->suspended = true;
    op_schedule();
    return CMD_PARKED;
}

void op_client_closed(cmd_client_t *client)
{
    op_client_unlist(client);
    client->op_wait = CMD_WAIT_NONE;
    op_t *o = client->op;
    if (!o)
        return;
    if (o->fiber == fiber_current()) {
        fiber_kill(o->fiber, 279, "operation was interrupted because a client disconnected");
        return;
    }
    fiber_kill(o->fiber, 279, "operation was interrupted because a client disconnected");
    while (!fiber_resume(o->fiber))
        ;
    op_finish_suspended(o);
}

void op_set_max_time(int64_t ms)
{
    fiber_t *f = fiber_current();
    if (f && ms > 0)
        fiber_set_deadline(f, fiber_started_ns(f) + (uint64_t)ms * 1000000u);
}

/* The connection fields every currentOp entry starts with. */
static void op_append_conn(bson_t *d, const cmd_client_t *client)
{
    char desc[32];
    BSON_APPEND_UTF8(d, "type", "op");
    BSON_APPEND_UTF8(d, "host", "localhost");
    snprintf(desc, sizeof desc, "conn%lld", (long long)client->id);
    BSON_APPEND_UTF8(d, "desc", desc);
    BSON_APPEND_INT64(d, "connectionId", client->id);
    BSON_APPEND_UTF8(d, "client", client->remote);
    if (client->metadata) {
        bson_iter_t a;
        BSON_APPEND_DOCUMENT(d, "clientMetadata", client->metadata);
        if (bson_iter_init(&a, client->metadata) &&
            bson_iter_find_descendant(&a, "application.name", &a) && BSON_ITER_HOLDS_UTF8(&a))
            BSON_APPEND_UTF8(d, "appName", bson_iter_utf8(&a, NULL));
    }
}

/* One entry: the request `req` of `client`, running on fiber `o` (NULL
 * when parked on a lock: then waitingForLock and waitingFor say on what). */
static void op_append_one(bson_t *inprog, uint32_t i, const cmd_client_t *client,
                          const wire_request_t *req, const op_t *o)
{
    char key[16];
    snprintf(key, sizeof key, "%u", i);
    bson_t d;
    bson_append_document_begin(inprog, key, -1, &d);
    op_append_conn(&d, client);
    BSON_APPEND_BOOL(&d, "active", true);
    BSON_APPEND_INT64(&d, "opid", o ? o->opid : client->op_id);
    uint64_t since = o ? fiber_started_ns(o->fiber) : client->op_start_hr;
    uint64_t now = uv_hrtime(), us = now > since ? (now - since) / 1000 : 0;
    BSON_APPEND_INT64(&d, "secs_running", (int64_t)(us / 1000000));
    BSON_APPEND_INT64(&d, "microsecs_running", (int64_t)us);
    bson_iter_t it;
    const char *name = "?", *coll = "$cmd";
    if (bson_iter_init(&it, &req->cmd) && bson_iter_next(&it)) {
        name = bson_iter_key(&it);
        if (BSON_ITER_HOLDS_UTF8(&it))
            coll = bson_iter_utf8(&it, NULL);
    }
    const char *type = "command";
    if (!strcmp(name, "find"))
        type = "query";
    else if (!strcmp(name, "getMore"))
        type = "getmore";
    else if (!strcmp(name, "update"))
        type = "update";
    else if (!strcmp(name, "delete"))
        type = "remove";
    else if (!strcmp(name, "insert"))
        type = "insert";
    BSON_APPEND_UTF8(&d, "op", type);
    char ns[512];
    snprintf(ns, sizeof ns, "%s.%s", req->db, coll);
    BSON_APPEND_UTF8(&d, "ns", ns);
    BSON_APPEND_DOCUMENT(&d, "command", &req->cmd);
    BSON_APPEND_INT64(&d, "numYields", o ? (int64_t)fiber_yields(o->fiber) : 0);
    BSON_APPEND_BOOL(&d, "waitingForLock", !o);
    if (!o) {
        /* atomdb's own: what the request is parked on, and since when */
        bson_t w;
        bson_append_document_begin(&d, "waitingFor", -1, &w);
        if (client->op_wait == CMD_WAIT_LEASE) {
            BSON_APPEND_UTF8(&w, "type", "lease");
            BSON_APPEND_UTF8(&w, "name", client->op_wait_on);
        } else {
            BSON_APPEND_UTF8(&w, "type", "documentLock");
            BSON_APPEND_UTF8(&w, "ns", client->op_wait_on);
        }
        BSON_APPEND_INT64(&w, "micros",
                          now > client->op_wait_hr ? (int64_t)((now - client->op_wait_hr) / 1000)
                                                   : 0);
        bson_append_document_end(&d, &w);
    }
    BSON_APPEND_BOOL(&d, "killPending", o ? fiber_killed(o->fiber) : client->op_killed);
    bson_append_document_end(inprog, &d);
}

static void op_iso_time(int64_t ms, char *out, size_t size);

/* An idle connection's entry (currentOp $all, idleConnections). */
static void op_append_idle(bson_t *inprog, uint32_t i, const cmd_client_t *client)
{
    char key[16], when[40];
    snprintf(key, sizeof key, "%u", i);
    bson_t d;
    bson_append_document_begin(inprog, key, -1, &d);
    op_append_conn(&d, client);
    BSON_APPEND_BOOL(&d, "active", false);
    op_iso_time(server_now_ms(), when, sizeof when);
    BSON_APPEND_UTF8(&d, "currentOpTime", when);
    bson_append_document_end(inprog, &d);
}

/* ISO-8601 UTC text of `ms` since the epoch, as mongod prints dates in
 * currentOp ("2026-01-02T03:04:05.678Z"). */
static void op_iso_time(int64_t ms, char *out, size_t size)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, size - n, ".%03dZ", (int)(ms % 1000));
}

/* True when a request of session `id` is running or parked: its
 * transaction is not idle (the request has its own entry). */
static bool op_session_busy(const uint8_t id[16])
{
    for (const cmd_client_t *c = op_clients_head; c; c = c->op_next) {
        const wire_request_t *req = c->op ? ((const op_t *)c->op)->req
                                    : c->op_wait != CMD_WAIT_NONE ? c->op_req : NULL;
        bson_iter_t it;
        uint8_t sid[16];
        dberr_t err;
        if (req && bson_iter_init_find(&it, &req->cmd, "lsid") &&
            session_parse_lsid(&it, sid, &err) && memcmp(sid, id, 16) == 0)
            return true;
    }
    return false;
}

typedef struct op_idle_txns {
    bson_t *inprog;
    uint32_t *i;
    const cmd_client_t *owner_of; /* only this user's sessions, or NULL */
} op_idle_txns_t;

/* One idle transaction's entry, in mongod's idleSession shape; its opid
 * reaches it with killOp. */
static void op_append_idle_txn(const session_t *cs, void *arg)
{
    op_idle_txns_t *a = arg;
    if (cs->state != SESSION_TXN_IN_PROGRESS || !cs->txn || op_session_busy(cs->id))
        return;
    if (a->owner_of && cs->owner != access_owner(a->owner_of))
        return;
    session_t *s = session_find(cs->id);
    if (!s->txn_opid)
        s->txn_opid = op_next_id++;
    char key[16], when[40];
    snprintf(key, sizeof key, "%u", (*a->i)++);
    int64_t now = server_now_ms(), started = txn_started_ms(s->txn);
    int64_t open_us = now > started ? (now - started) * 1000 : 0;
    int64_t active_us = (int64_t)(s->txn_active_ns / 1000);
    if (active_us > open_us)
        active_us = open_us;
    bson_t d, lsid, txn, params, rc;
    bson_append_document_begin(a->inprog, key, -1, &d);
    BSON_APPEND_UTF8(&d, "type", "idleSession");
    BSON_APPEND_UTF8(&d, "host", "localhost");
    BSON_APPEND_UTF8(&d, "desc", "inactive transaction");
    BSON_APPEND_BOOL(&d, "active", false);
    BSON_APPEND_INT64(&d, "opid", s->txn_opid);
    op_iso_time(now, when, sizeof when);
    BSON_APPEND_UTF8(&d, "currentOpTime", when);
    bson_append_document_begin(&d, "lsid", -1, &lsid);
    bson_append_binary(&lsid, "id", 2, BSON_SUBTYPE_UUID, s->id, 16);
    bson_append_document_end(&d, &lsid);
    bson_append_document_begin(&d, "transaction", -1, &txn);
    bson_append_document_begin(&txn, "parameters", -1, &params);
    BSON_APPEND_INT64(&params, "txnNumber", s->txn_number);
    BSON_APPEND_BOOL(&params, "autocommit", false);
    bson_append_document_begin(&params, "readConcern", -1, &rc);
    if (s->txn_read_concern[0])
        BSON_APPEND_UTF8(&rc, "level", s->txn_read_concern);
    bson_append_document_end(&params, &rc);
    bson_append_document_end(&txn, &params);
    op_iso_time(started, when, sizeof when);
    BSON_APPEND_UTF8(&txn, "startWallClockTime", when);
    BSON_APPEND_INT64(&txn, "timeOpenMicros", open_us);
    BSON_APPEND_INT64(&txn, "timeActiveMicros", active_us);
    BSON_APPEND_INT64(&txn, "timeInactiveMicros", open_us - active_us);
    BSON_APPEND_DATE_TIME(&txn, "expiryTime", started + (int64_t)server.txn_lifetime_s * 1000);
    bson_append_document_end(&d, &txn);
    BSON_APPEND_BOOL(&d, "waitingForLock", false);
    bson_append_document_end(a->inprog, &d);
}

void op_append_current(bson_t *inprog, unsigned what, const cmd_client_t *owner_of)
{
    bool idle = what & OP_LIST_IDLE_CONNECTIONS;
    uint32_t i = 0;
    for (const cmd_client_t *c = op_clients_head; c; c = c->op_next) {
        if (owner_of && access_owner(c) != access_owner(owner_of))
            continue;
        const op_t *o = c->op;
        if (o)
            op_append_one(inprog, i++, c, o->req, o);
        else if (c->op_wait != CMD_WAIT_NONE && c->op_req)
            op_append_one(inprog, i++, c, c->op_req, NULL);
        else if (idle)
            op_append_idle(inprog, i++, c);
    }
    if (what & OP_LIST_IDLE_SESSIONS) {
        op_idle_txns_t a = {inprog, &i, owner_of};
        session_foreach(op_append_idle_txn, &a);
    }
}

/* killOp of an idle transaction's opid: the transaction is aborted. */
typedef struct op_txn_kill {
    int64_t opid;
    bool found;
    uint8_t id[16];
} op_txn_kill_t;

static void op_find_txn(const session_t *s, void *arg)
{
    op_txn_kill_t *k = arg;
    if (!k->found && s->state == SESSION_TXN_IN_PROGRESS && s->txn_opid == k->opid) {
        k->found = true;
        memcpy(k->id, s->id, 16);
    }
}

bool op_kill(int64_t opid)
{
    for (op_t *o = op_head; o; o = o->next)
        if (o->opid == opid) {
            fiber_kill(o->fiber, DBERR_INTERRUPTED, "operation was interrupted");
            return true;
        }
    /* a request parked on a document lock or a lease */
    for (cmd_client_t *c = op_clients_head; c; c = c->op_next)
        if (c->op_id == opid && !c->op && c->op_wait != CMD_WAIT_NONE) {
            if (c->op_wait == CMD_WAIT_LEASE)
                return cmd_lease_wait_kill(c);
            cmd_lock_wait_kill(c);
            return true;
        }
    /* an idle transaction (currentOp lists it with this opid) */
    op_txn_kill_t k = {.opid = opid};
    session_foreach(op_find_txn, &k);
    session_t *s = k.found ? session_find(k.id) : NULL;
    if (s) {
        session_abort_txn(s, "it was killed by killOp");
        return true;
    }
    return false;
}

void op_append_status(bson_t *out)
{
    BSON_APPEND_INT64(out, "running", (int64_t)op_len);
    BSON_APPEND_INT64(out, "suspended", (int64_t)fiber_suspended());
    BSON_APPEND_INT64(out, "slices", (int64_t)op_slices);
    BSON_APPEND_INT64(out, "slicesOver1ms", (int64_t)op_slices_over_ms);
    BSON_APPEND_INT64(out, "longestSliceMicros", (int64_t)(op_slice_max_ns / 1000));
    BSON_APPEND_INT64(out, "yieldPeriodMicros", fiber_slice_us());
    BSON_APPEND_INT64(out, "busyYieldPeriodMicros", op_busy_slice_us);
    BSON_APPEND_INT64(out, "droppedEntriesToFree", (int64_t)reaper_pending());
}

/* ---- currentOp, killOp ---- */

/* The fields of a currentOp command that are not a filter on the ops. */
static bool op_not_filter(const char *k)
{
    return !strcmp(k, "currentOp") || !strcmp(k, "$all") || !strcmp(k, "$ownOps") ||
           cmd_is_generic_arg(k);
}

bool cmd_current_op(cmd_ctx_t *ctx, dberr_t *err)
{
    bool all = false, own = false;
    bson_iter_t it;
    if (cmd_find(ctx, "$all", &it))
        all = bson_iter_as_bool(&it);
    if (cmd_find(ctx, "$ownOps", &it))
        own = bson_iter_as_bool(&it);
    bson_t filter = BSON_INITIALIZER;
    bson_iter_init(&it, ctx->cmd);
    while (bson_iter_next(&it))
        if (!op_not_filter(bson_iter_key(&it)))
            bson_append_value(&filter, bson_iter_key(&it), -1, bson_iter_value(&it));
    matcher_t *m = matcher_new(&filter, err);
    bson_destroy(&filter);
    if (!m)
        return false;
    bson_t ops = BSON_INITIALIZER, arr;
    /* idle transactions always, as mongod (they hold locks); idle
     * connections with $all */
    op_append_current(&ops, OP_LIST_IDLE_SESSIONS | (all ? OP_LIST_IDLE_CONNECTIONS : 0),
                      own ? ctx->client : NULL);
    bson_append_array_begin(ctx->reply, "inprog", -1, &arr);
    uint32_t n = 0;
    char key[16];
    if (bson_iter_init(&it, &ops))
        while (bson_iter_next(&it)) {
            bson_t d;
            if (!cmd_iter_doc(&it, &d) || !matcher_matches(m, &d, NULL))
                continue;
            bson_append_document(&arr, cmd_index_key(n++, key, sizeof key), -1, &d);
        }
    bson_append_array_end(ctx->reply, &arr);
    bson_destroy(&ops);
    bool ok = !matcher_take_error(m, err);
    matcher_destroy(m);
    return ok;
}

bool cmd_kill_op(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    if (!cmd_find(ctx, "op", &it))
        return cmd_missing_field(err, "killOp.op");
    if (!BSON_ITER_HOLDS_NUMBER(&it))
        return cmd_wrong_type(err, &it, "types '[long, int]'", "killOp.op");
    int64_t opid = bson_iter_as_int64(&it);
    if (op_kill(opid))
        log_info("COMMAND", "going to kill op: %lld", (long long)opid);
    BSON_APPEND_UTF8(ctx->reply, "info", "attempting to kill op");
    return true;
}
