/* lease: the lock table — holders with fencing tokens and leases on the
 * monotonic clock, FIFO queues of parked acquires, one timer for every
 * deadline, and the last token per name stored in config.atomdb.leases.
 * Wake-ups are queued while the table changes and delivered from a
 * zero-delay timer, outside every command: a wake callback sends a parked
 * reply, which may run that connection's next request, which may call
 * back in here. */
#include "lease/lease.h"

#include <inttypes.h>
#include <string.h>

#include "journal/journal.h"
#include "store/collection.h"
#include "store/record.h"
#include "util/dlist.h"
#include "util/log.h"
#include "util/omap.h"
#include "util/vec.h"

typedef struct lease_lock lease_lock_t;
typedef struct lease_waiter lease_waiter_t;

/* A parked acquire: a copy of its request. */
struct lease_waiter {
    lease_waiter_t *prev, *next; /* in its lock's queue, or in the wake queue */
    const char *name;            /* the lock it waits for (in text) */
    const char *owner;           /* (in text) */
    int64_t lease_ms;
    int64_t deadline;            /* lease_now_ms() clock */
    uint8_t lsid[LEASE_LSID_MAX];
    uint32_t lsid_len;
    int64_t conn_id;
    bool release_on_disconnect;
    bool sync;
    lease_wake_fn wake;
    void *ctx;
    lease_grant_t grant;         /* the outcome, set when it leaves its queue */
    char text[];                 /* name and owner: one allocation, freed by bson_free */
};

/* One lock name. Kept in memory while held or waited for; the token
 * also lives in config.atomdb.leases. */
struct lease_lock {
    char *name;
    int64_t token;               /* last token issued, 0 when never */
    bool held;                   /* has a holder (its lease may have run out) */
    char *owner;
    int64_t expires;             /* lease end, lease_now_ms() clock */
    uint8_t lsid[LEASE_LSID_MAX];
    uint32_t lsid_len;
    int64_t conn_id;
    bool release_on_disconnect;
    lease_waiter_t *head, *tail; /* parked acquires, oldest first */
    size_t nwaiting;
    bool contended;              /* linked in lease.contended (nwaiting > 0) */
    lease_lock_t *cprev, *cnext;
};

/* The module state (loop thread only). */
static struct {
    uv_loop_t *loop;
    catalog_t *cat;
    omap_t *locks;               /* name -> lease_lock_t */
    lease_lock_t *contended;     /* locks with waiters: the timer's work list */
    uv_timer_t timer;            /* deadlines: lease ends, waits that run out */
    uv_timer_t deliver;          /* zero-delay: delivers queued outcomes */
    bool timer_ready;            /* both timers initialised and not closed */
    int64_t armed_at;            /* deadline the timer is set for, 0 when idle */
    lease_waiter_t *wake_head, *wake_tail; /* outcomes not yet delivered */
    size_t nwaiters;             /* parked, over every lock */
    size_t nrod_held;            /* held with release_on_disconnect */
} lease;

int64_t lease_now_ms(void)
{
    return (int64_t)(uv_hrtime() / 1000000u);
}

bool lease_valid_name(const char *name, uint32_t len, dberr_t *err)
{
    if (!name || len == 0)
        return dberr_set(err, DBERR_BAD_VALUE, "lock name must not be empty");
    if (len > LEASE_NAME_MAX)
        return dberr_set(err, DBERR_BAD_VALUE, "lock name is longer than %d bytes", LEASE_NAME_MAX);
    if (memchr(name, '\0', len))
        return dberr_set(err, DBERR_BAD_VALUE, "lock name must not contain a NUL byte");
    return true;
}

/* ---- stored tokens ---- */

/* The token stored for `name`, 0 when none. */
static int64_t lease_stored_token(const char *name)
{
    if (!lease.cat)
        return 0;
    bson_value_t id = {.value_type = BSON_TYPE_UTF8};
    id.value.v_utf8.str = (char *)name;
    id.value.v_utf8.len = (uint32_t)strlen(name);
    bson_t doc;
    bson_iter_t it;
    if (!catalog_view_id(lease.cat, LEASE_DB, LEASE_COLL, &id, &doc) ||
        !bson_iter_init_find(&it, &doc, "token") || !BSON_ITER_HOLDS_NUMBER(&it))
        return 0;
    int64_t t = bson_iter_as_int64(&it);
    return t > 0 ? t : 0;
}

/* Writes {_id: name, token} through the store, so the journal logs it. */
static bool lease_store_token(const char *name, int64_t token, dberr_t *err)
{
    bool ok = false;
    bson_t doc = BSON_INITIALIZER;
    if (!lease.cat) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "the lock service is not started");
        goto cleanup;
    }
    collection_t *c = catalog_get_or_create(lease.cat, LEASE_DB, LEASE_COLL, err);
    if (!c)
        goto cleanup;
    BSON_APPEND_UTF8(&doc, "_id", name);
    BSON_APPEND_INT64(&doc, "token", token);
    bson_value_t id = {.value_type = BSON_TYPE_UTF8};
    id.value.v_utf8.str = (char *)name;
    id.value.v_utf8.len = (uint32_t)strlen(name);
    record_t *r = collection_find_id(c, &id);
    ok = r ? collection_replace(c, r, &doc, err) : collection_insert(c, &doc, err);
cleanup:
    bson_destroy(&doc);
    return ok;
}

/* ---- the table ---- */

static lease_lock_t *lease_find(const char *name)
{
    return lease.locks ? omap_get(lease.locks, name, strlen(name)) : NULL;
}

static lease_lock_t *lease_find_or_add(const char *name)
{
    if (!lease.locks)
        lease.locks = omap_new();
    lease_lock_t *l = lease_find(name);
    if (l)
        return l;
    l = bson_malloc0(sizeof *l);
    l->name = bson_strdup(name);
    l->token = lease_stored_token(name);
    omap_insert(lease.locks, name, strlen(name), l);
    return l;
}

/* A parked copy of `req`, waiting until `now` + its wait. */
static lease_waiter_t *lease_waiter_new(const lease_request_t *req, int64_t now,
                                        lease_wake_fn wake, void *ctx)
{
    size_t name_size = strlen(req->name) + 1, owner_size = strlen(req->owner) + 1;
    lease_waiter_t *w = bson_malloc0(sizeof *w + name_size + owner_size);
    w->name = memcpy(w->text, req->name, name_size);
    w->owner = memcpy(w->text + name_size, req->owner, owner_size);
    w->lease_ms = req->lease_ms;
    w->deadline = req->wait_ms > INT64_MAX - now ? INT64_MAX - 1 : now + req->wait_ms;
    w->lsid_len = req->lsid ? req->lsid_len : 0;
    if (w->lsid_len)
        memcpy(w->lsid, req->lsid, w->lsid_len);
    w->conn_id = req->conn_id;
    w->release_on_disconnect = req->release_on_disconnect;
    w->sync = req->sync;
    w->wake = wake;
    w->ctx = ctx;
    return w;
}

/* Frees the waiters from `w` on along their next links. */
static void lease_waiters_free(lease_waiter_t *w)
{
    for (lease_waiter_t *next; w; w = next) {
        next = w->next;
        bson_free(w);
    }
}

/* Clears the holder (release or expiry). */
static void lease_unhold(lease_lock_t *l)
{
    if (!l->held)
        return;
    if (l->release_on_disconnect)
        lease.nrod_held--;
    l->held = false;
    bson_free(l->owner);
    l->owner = NULL;
    l->lsid_len = 0;
    l->conn_id = 0;
    l->release_on_disconnect = false;
}

/* Makes `owner` the holder (the token is already set). */
static void lease_hold(lease_lock_t *l, const char *owner, int64_t now, int64_t lease_ms,
                       const uint8_t *lsid, uint32_t lsid_len, int64_t conn_id, bool rod)
{
    lease_unhold(l);
    l->held = true;
    l->owner = bson_strdup(owner);
    l->expires = now + lease_ms;
    l->lsid_len = lsid && lsid_len <= LEASE_LSID_MAX ? lsid_len : 0;
    if (l->lsid_len)
        memcpy(l->lsid, lsid, l->lsid_len);
    l->conn_id = conn_id;
    l->release_on_disconnect = rod;
    if (rod)
        lease.nrod_held++;
}

/* Issues the next token for `l` and stores it (not yet sealed). */
static bool lease_next_token(lease_lock_t *l, int64_t *token, dberr_t *err)
{
    int64_t stored = lease_stored_token(l->name);
    int64_t next = (stored > l->token ? stored : l->token) + 1;
    if (!lease_store_token(l->name, next, err))
        return false;
    l->token = next;
    *token = next;
    return true;
}

static void lease_contended_link(lease_lock_t *l)
{
    if (l->contended)
        return;
    l->contended = true;
    l->cprev = NULL;
    l->cnext = lease.contended;
    if (lease.contended)
        lease.contended->cprev = l;
    lease.contended = l;
}

static void lease_contended_unlink(lease_lock_t *l)
{
    if (!l->contended)
        return;
    DLIST_UNLINK(lease.contended, l, cprev, cnext);
    l->contended = false;
}

/* Unlinks `w` from its lock's queue. */
static void lease_queue_remove(lease_lock_t *l, lease_waiter_t *w)
{
    DLIST_UNLINK_TAILED(l->head, l->tail, w, prev, next);
    l->nwaiting--;
    lease.nwaiters--;
    if (!l->head)
        lease_contended_unlink(l);
}

static void lease_queue_append(lease_lock_t *l, lease_waiter_t *w)
{
    DLIST_APPEND_TAILED(l->head, l->tail, w, prev, next);
    l->nwaiting++;
    lease.nwaiters++;
    lease_contended_link(l);
}

/* Queues `w`'s outcome for delivery. */
static void lease_wake_push(lease_waiter_t *w)
{
    DLIST_APPEND_TAILED(lease.wake_head, lease.wake_tail, w, prev, next);
}

/* Delivers queued outcomes, one at a time. Runs from its own timer, so no
 * command is on the stack: a callback may run further requests, which may
 * queue further outcomes (delivered by this same loop). */
static void lease_on_deliver(uv_timer_t *t)
{
    while (lease.wake_head) {
        lease_waiter_t *w = lease.wake_head;
        DLIST_UNLINK_TAILED(lease.wake_head, lease.wake_tail, w, prev, next);
        lease_grant_t g = w->grant;
        lease_wake_fn fn = w->wake;
        void *ctx = w->ctx;
        bson_free(w);
        fn(ctx, &g);
    }
}

/* Schedules delivery of the queued outcomes (next loop iteration). */
static void lease_wake_flush(void)
{
    if (lease.wake_head && lease.timer_ready && !uv_is_active((uv_handle_t *)&lease.deliver))
        uv_timer_start(&lease.deliver, lease_on_deliver, 0, 0);
}

/* Frees lock `p` (a lease_lock_t), its holder's name and its parked
 * waiters: the locks map's value destructor. */
static void lease_lock_free(void *p)
{
    lease_lock_t *l = p;
    lease_waiters_free(l->head);
    bson_free(l->owner);
    bson_free(l->name);
    bson_free(l);
}

/* Frees `l` when nothing holds or waits for it (its token is stored). */
static void lease_gc(lease_lock_t *l)
{
    if (!l || l->held || l->head)
        return;
    omap_remove(lease.locks, l->name, strlen(l->name));
    lease_lock_free(l);
}

static lease_stats_t lease_stats;

/* Brings `l` up to `now`: an expired lease ends, waiters past their
 * deadline are refused, and a free lock goes to the oldest waiter. Each
 * grant's token write is sealed into its own log record (this runs
 * outside the waiter's command). Outcomes are queued, not delivered. */
static void lease_settle(lease_lock_t *l, int64_t now)
{
    if (l->held && now >= l->expires) {
        lease_stats.expired++;
        log_info("LEASE", "lock '%s' token %" PRId64 " held by '%s': lease ran out", l->name,
                 l->token, l->owner);
        lease_unhold(l);
    }
    for (lease_waiter_t *w = l->head, *next; w; w = next) {
        next = w->next;
        if (w->deadline <= now) {
            lease_queue_remove(l, w);
            memset(&w->grant, 0, sizeof w->grant);
            w->grant.sync = w->sync;
            lease_wake_push(w);
        }
    }
    while (!l->held && l->head) {
        lease_waiter_t *w = l->head;
        lease_queue_remove(l, w);
        memset(&w->grant, 0, sizeof w->grant);
        w->grant.sync = w->sync;
        dberr_t err = {0};
        int64_t token;
        if (!lease_next_token(l, &token, &err)) {
            log_error("LEASE", "lock '%s': cannot store the next token: %s", l->name, err.msg);
            lease_wake_push(w);
            continue;
        }
        lease_hold(l, w->owner, now, w->lease_ms, w->lsid, w->lsid_len, w->conn_id,
                   w->release_on_disconnect);
        w->grant.acquired = true;
        w->grant.token = token;
        w->grant.expires = l->expires;
        w->grant.lsn = journal_seal();
        log_debug("LEASE", "lock '%s' token %" PRId64 " granted to waiting '%s'", l->name, token,
                  l->owner);
        lease_wake_push(w);
    }
}

/* The earliest deadline of a contended lock, INT64_MAX when none. */
static int64_t lease_next_deadline(const lease_lock_t *l)
{
    int64_t d = INT64_MAX;
    if (l->held && l->head)
        d = l->expires;
    for (const lease_waiter_t *w = l->head; w; w = w->next)
        if (w->deadline < d)
            d = w->deadline;
    return d;
}

static void lease_on_timer(uv_timer_t *t);

/* Makes the timer fire no later than `deadline`. */
static void lease_arm(int64_t deadline)
{
    if (!lease.timer_ready || deadline == INT64_MAX)
        return;
    if (lease.armed_at && lease.armed_at <= deadline && uv_is_active((uv_handle_t *)&lease.timer))
        return;
    int64_t now = lease_now_ms();
    uint64_t in = deadline > now ? (uint64_t)(deadline - now) : 0;
    lease.armed_at = deadline;
    uv_timer_start(&lease.timer, lease_on_timer, in, 0);
}

/* Settles every contended lock, delivers outcomes, re-arms. */
static void lease_on_timer(uv_timer_t *t)
{
    lease.armed_at = 0;
    int64_t now = lease_now_ms();
    int64_t next = INT64_MAX;
    for (lease_lock_t *l = lease.contended, *n; l; l = n) {
        n = l->cnext;
        lease_settle(l, now);
        int64_t d = lease_next_deadline(l);
        if (d < next)
            next = d;
        if (!l->head)
            lease_gc(l);
    }
    /* a timer that fires a little early (loop time lags hrtime) retries */
    if (next != INT64_MAX)
        lease_arm(next <= now ? now + 1 : next);
    lease_wake_flush();
}

void lease_init(uv_loop_t *loop, catalog_t *cat)
{
    lease.loop = loop;
    lease.cat = cat;
    if (!lease.locks)
        lease.locks = omap_new();
    if (!lease.timer_ready) {
        uv_timer_init(loop, &lease.timer);
        uv_timer_init(loop, &lease.deliver);
        lease.timer_ready = true;
    }
}

void lease_stop(void)
{
    if (!lease.timer_ready)
        return;
    uv_timer_stop(&lease.timer);
    uv_timer_stop(&lease.deliver);
    if (!uv_is_closing((uv_handle_t *)&lease.timer))
        uv_close((uv_handle_t *)&lease.timer, NULL);
    if (!uv_is_closing((uv_handle_t *)&lease.deliver))
        uv_close((uv_handle_t *)&lease.deliver, NULL);
    lease.timer_ready = false;
    lease.armed_at = 0;
}

void lease_destroy(void)
{
    lease_stop();
    lease_waiters_free(lease.wake_head);
    omap_destroy(lease.locks, lease_lock_free);
    memset(&lease, 0, sizeof lease);
}

/* ---- operations ---- */

lease_status_t lease_acquire(const lease_request_t *req, lease_wake_fn wake, void *ctx,
                             lease_grant_t *out, dberr_t *err)
{
    memset(out, 0, sizeof *out);
    out->sync = req->sync;
    if (!lease_valid_name(req->name, req->name ? (uint32_t)strlen(req->name) : 0, err))
        return LEASE_FAILED;
    if (!req->owner || !*req->owner || strlen(req->owner) > LEASE_OWNER_MAX) {
        dberr_set(err, DBERR_BAD_VALUE, "owner must be a string of 1 to %d bytes", LEASE_OWNER_MAX);
        return LEASE_FAILED;
    }
    if (req->lease_ms <= 0 || req->wait_ms < 0 || req->lsid_len > LEASE_LSID_MAX) {
        dberr_set(err, DBERR_BAD_VALUE, "leaseMs must be positive and waitMs not negative");
        return LEASE_FAILED;
    }
    if (!lease.cat) {
        dberr_set(err, DBERR_INTERNAL_ERROR, "the lock service is not started");
        return LEASE_FAILED;
    }
    int64_t now = lease_now_ms();
    lease_lock_t *l = lease_find_or_add(req->name);
    lease_status_t st = LEASE_FAILED;
    lease_settle(l, now);
    if (l->held && strcmp(l->owner, req->owner) == 0) {
        /* the holder asks again (a retry after a lost reply): same token,
         * fresh lease */
        lease_hold(l, req->owner, now, req->lease_ms, req->lsid, req->lsid_len, req->conn_id,
                   req->release_on_disconnect);
        out->acquired = true;
        out->token = l->token;
        out->expires = l->expires;
        st = LEASE_GRANTED;
    } else if (!l->held && !l->head) {
        int64_t token;
        if (!lease_next_token(l, &token, err))
            goto done;
        lease_hold(l, req->owner, now, req->lease_ms, req->lsid, req->lsid_len, req->conn_id,
                   req->release_on_disconnect);
        out->acquired = true;
        out->token = token;
        out->expires = l->expires;
        st = LEASE_GRANTED;
        log_debug("LEASE", "lock '%s' token %" PRId64 " granted to '%s'", l->name, token, l->owner);
    } else if (req->wait_ms == 0) {
        st = LEASE_BUSY;
    } else {
        lease_waiter_t *w = lease_waiter_new(req, now, wake, ctx);
        lease_queue_append(l, w);
        lease_arm(lease_next_deadline(l));
        st = LEASE_PARKED;
    }
done:
    if (l->head)
        lease_arm(lease_next_deadline(l));
    else
        lease_gc(l);
    lease_wake_flush();
    return st;
}

/* Finds the live holder of `token` under `name`, or fails with
 * StaleFencingToken saying why. `what` names the operation. */
static lease_lock_t *lease_current(const char *name, int64_t token, const char *what,
                                   int64_t now, dberr_t *err)
{
    lease_lock_t *l = lease_find(name);
    int64_t current = l ? l->token : lease_stored_token(name);
    if (token < current) {
        dberr_set(err, DBERR_STALE_FENCING_TOKEN,
                  "%s refused: token %" PRId64 " of lock '%s' is stale; the current token is "
                  "%" PRId64,
                  what, token, name, current);
        return NULL;
    }
    if (token > current) {
        dberr_set(err, DBERR_STALE_FENCING_TOKEN,
                  "%s refused: token %" PRId64 " was never issued for lock '%s' (the last is "
                  "%" PRId64 ")",
                  what, token, name, current);
        return NULL;
    }
    if (!l || !l->held) {
        dberr_set(err, DBERR_STALE_FENCING_TOKEN,
                  "%s refused: token %" PRId64 " of lock '%s' was released", what, token, name);
        return NULL;
    }
    if (now >= l->expires) {
        dberr_set(err, DBERR_STALE_FENCING_TOKEN,
                  "%s refused: the lease of token %" PRId64 " of lock '%s' ran out %" PRId64
                  " ms ago",
                  what, token, name, now - l->expires);
        return NULL;
    }
    return l;
}

bool lease_renew(const char *name, int64_t token, int64_t lease_ms, const uint8_t *lsid,
                 uint32_t lsid_len, int64_t *expires, dberr_t *err)
{
    if (lease_ms <= 0)
        return dberr_set(err, DBERR_BAD_VALUE, "leaseMs must be positive");
    int64_t now = lease_now_ms();
    lease_lock_t *l = lease_current(name, token, "renewLock", now, err);
    if (!l)
        return false;
    l->expires = now + lease_ms;
    if (lsid && lsid_len && lsid_len <= LEASE_LSID_MAX) {
        memcpy(l->lsid, lsid, lsid_len);
        l->lsid_len = lsid_len;
    }
    *expires = l->expires;
    /* a later lease end needs no re-arm: an early timer just recomputes */
    return true;
}

/* Releases `l`'s holder and passes the lock on; delivers outcomes. */
static void lease_release_lock(lease_lock_t *l, int64_t now)
{
    lease_unhold(l);
    lease_settle(l, now);
    if (l->head)
        lease_arm(lease_next_deadline(l));
    else
        lease_gc(l);
}

bool lease_release(const char *name, int64_t token, dberr_t *err)
{
    int64_t now = lease_now_ms();
    lease_lock_t *l = lease_current(name, token, "releaseLock", now, err);
    if (!l)
        return false;
    log_debug("LEASE", "lock '%s' token %" PRId64 " released by '%s'", name, token, l->owner);
    lease_release_lock(l, now);
    lease_wake_flush();
    return true;
}

bool lease_check_fence(const char *name, int64_t token, dberr_t *err)
{
    if (lease_current(name, token, "fenced write", lease_now_ms(), err))
        return true;
    lease_stats.fenced_refused++;
    return false;
}

const lease_stats_t *lease_get_stats(void)
{
    return &lease_stats;
}

/* Fills `out` from `l` as of `now`, without changing it. */
static void lease_fill_info(const lease_lock_t *l, int64_t now, lease_info_t *out)
{
    memset(out, 0, sizeof *out);
    out->name = l->name;
    out->token = l->token;
    out->waiting = l->nwaiting;
    for (const lease_waiter_t *w = l->head; w && out->nqueue < LEASE_INFO_QUEUE; w = w->next) {
        out->queue_deadline[out->nqueue] = w->deadline;
        out->queue[out->nqueue++] = w->owner;
    }
    out->held = l->held && now < l->expires;
    if (out->held) {
        out->owner = l->owner;
        out->expires = l->expires;
        out->conn_id = l->conn_id;
        out->release_on_disconnect = l->release_on_disconnect;
        out->lsid = l->lsid_len ? l->lsid : NULL;
        out->lsid_len = l->lsid_len;
    }
}

void lease_get_info(const char *name, lease_info_t *out)
{
    lease_lock_t *l = lease_find(name);
    if (l) {
        lease_fill_info(l, lease_now_ms(), out);
        return;
    }
    memset(out, 0, sizeof *out);
    out->name = name;
    out->token = lease_stored_token(name);
}

void lease_foreach(void (*fn)(const lease_info_t *info, void *arg), void *arg)
{
    if (!lease.locks)
        return;
    int64_t now = lease_now_ms();
    for (omap_node_t *n = omap_seek(lease.locks, NULL, 0); n; n = omap_next(n)) {
        const lease_lock_t *l = omap_node_value(n);
        lease_info_t info;
        lease_fill_info(l, now, &info);
        if (info.held || info.waiting)
            fn(&info, arg);
    }
}

/* Collects the locks `match` selects (the table may change while they
 * are released), then releases each. */
static void lease_release_matching(bool (*match)(const lease_lock_t *l, const void *arg),
                                   const void *arg, const char *why)
{
    if (!lease.locks)
        return;
    size_t n = 0, cap = 0;
    char **names = NULL;
    for (omap_node_t *node = omap_seek(lease.locks, NULL, 0); node; node = omap_next(node)) {
        const lease_lock_t *l = omap_node_value(node);
        if (!l->held || !match(l, arg))
            continue;
        VEC_RESERVE_ONE(names, n, cap, 8);
        names[n++] = bson_strdup(l->name);
    }
    int64_t now = lease_now_ms();
    for (size_t i = 0; i < n; i++) {
        lease_lock_t *l = lease_find(names[i]);
        if (l && l->held && match(l, arg)) {
            log_info("LEASE", "lock '%s' token %" PRId64 " held by '%s' released: %s", l->name,
                     l->token, l->owner, why);
            lease_release_lock(l, now);
        }
        bson_free(names[i]);
    }
    bson_free(names);
    lease_wake_flush();
}

static bool lease_match_conn(const lease_lock_t *l, const void *arg)
{
    return l->release_on_disconnect && l->conn_id == *(const int64_t *)arg;
}

typedef struct lease_lsid_arg {
    const uint8_t *lsid;
    uint32_t len;
} lease_lsid_arg_t;

static bool lease_match_lsid(const lease_lock_t *l, const void *arg)
{
    const lease_lsid_arg_t *a = arg;
    return l->lsid_len == a->len && memcmp(l->lsid, a->lsid, a->len) == 0;
}

void lease_connection_closed(int64_t conn_id)
{
    if (lease.nwaiters) {
        for (lease_lock_t *l = lease.contended, *n; l; l = n) {
            n = l->cnext;
            for (lease_waiter_t *w = l->head, *wn; w; w = wn) {
                wn = w->next;
                if (w->conn_id == conn_id) {
                    lease_queue_remove(l, w);
                    bson_free(w);
                }
            }
            if (!l->head)
                lease_gc(l);
        }
    }
    /* outcomes not yet delivered to this connection go nowhere; a lock
     * granted to it is released, since no one learned its token */
    int64_t now = lease_now_ms();
    for (lease_waiter_t *w = lease.wake_head, *n; w; w = n) {
        n = w->next;
        if (w->conn_id != conn_id)
            continue;
        DLIST_UNLINK_TAILED(lease.wake_head, lease.wake_tail, w, prev, next);
        if (w->grant.acquired) {
            lease_lock_t *l = lease_find(w->name);
            if (l && l->held && l->token == w->grant.token) {
                log_info("LEASE", "lock '%s' token %" PRId64 " released: granted to a closed "
                                  "connection", l->name, l->token);
                lease_release_lock(l, now);
            }
        }
        bson_free(w);
    }
    lease_wake_flush();
    if (lease.nrod_held)
        lease_release_matching(lease_match_conn, &conn_id, "its connection closed");
}

bool lease_cancel_wait(int64_t conn_id)
{
    for (lease_lock_t *l = lease.nwaiters ? lease.contended : NULL; l; l = l->cnext)
        for (lease_waiter_t *w = l->head; w; w = w->next)
            if (w->conn_id == conn_id) {
                lease_queue_remove(l, w);
                bson_free(w);
                if (!l->head)
                    lease_gc(l);
                return true;
            }
    return false;
}

void lease_session_ended(const uint8_t *lsid, uint32_t lsid_len)
{
    if (!lsid || lsid_len == 0 || lsid_len > LEASE_LSID_MAX)
        return;
    lease_lsid_arg_t a = {lsid, lsid_len};
    lease_release_matching(lease_match_lsid, &a, "its session ended");
}
