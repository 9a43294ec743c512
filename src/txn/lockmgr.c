/* lockmgr: the lock table — an ordered map from document key to entry
 * (holder and FIFO of waiters) — and each transaction's list of held keys. */
#include "txn/lockmgr.h"

#include <string.h>

#include "doc/keystring.h"
#include "txn/txn.h"
#include "util/dlist.h"
#include "util/omap.h"

/* One locked document. */
typedef struct lockmgr_entry {
    struct txn *holder;
    lock_waiter_t *head, *tail; /* waiters, oldest first */
    buf_t key;
} lockmgr_entry_t;

static omap_t *lockmgr_map;
static lockmgr_stats_t lockmgr_stats;

static omap_t *lockmgr_table(void)
{
    if (!lockmgr_map)
        lockmgr_map = omap_new();
    return lockmgr_map;
}

void lockmgr_key(const char *db, const char *coll, const bson_value_t *id, buf_t *out)
{
    out->len = 0;
    buf_append(out, db, strlen(db) + 1);
    buf_append(out, coll, strlen(coll) + 1);
    keystring_append(out, id, false);
}

bool lockmgr_any(void)
{
    return omap_count(lockmgr_table()) > 0;
}

bool lockmgr_acquire(const buf_t *key, struct txn *owner, struct txn **holder)
{
    lockmgr_entry_t *e = omap_get(lockmgr_table(), key->data, key->len);
    if (e && e->holder && e->holder != owner) {
        if (holder)
            *holder = e->holder;
        return false;
    }
    if (!owner)
        return true; /* a write outside any transaction only checks */
    if (!e) {
        e = bson_malloc0(sizeof *e);
        buf_init(&e->key);
        buf_append(&e->key, key->data, key->len);
        omap_insert(lockmgr_table(), key->data, key->len, e);
    }
    if (e->holder != owner) {
        e->holder = owner;
        txn_note_lock(owner, key);
    }
    return true;
}

struct txn *lockmgr_holder(const buf_t *key)
{
    lockmgr_entry_t *e = omap_get(lockmgr_table(), key->data, key->len);
    return e ? e->holder : NULL;
}

/* Ends w's wait apart from its queue links: its timeout timer and what
 * its transaction says it waits for. */
static void lockmgr_end_wait(lock_waiter_t *w)
{
    if (w->timer) {
        uv_timer_stop(w->timer);
        uv_close((uv_handle_t *)w->timer, (uv_close_cb)bson_free);
        w->timer = NULL;
    }
    if (w->txn) {
        txn_set_waiting_for(w->txn, NULL);
        txn_set_waiter(w->txn, NULL);
    }
}

static void lockmgr_unlink(lock_waiter_t *w)
{
    lockmgr_entry_t *e = w->entry;
    if (!e)
        return;
    lockmgr_stats.waiting--;
    lockmgr_stats.wait_ns += uv_hrtime() - w->since;
    DLIST_UNLINK_TAILED(e->head, e->tail, w, prev, next);
    w->entry = NULL;
    lockmgr_end_wait(w);
    /* an entry with no holder and no waiters goes away */
    if (!e->holder && !e->head) {
        omap_remove(lockmgr_table(), e->key.data, e->key.len);
        buf_destroy(&e->key);
        bson_free(e);
    }
}

static void lockmgr_on_timeout(uv_timer_t *t)
{
    lock_waiter_t *w = t->data;
    lockmgr_stats.timeouts++;
    lockmgr_unlink(w);
    w->wake(w, true);
}

void lockmgr_wait(lock_waiter_t *w, const buf_t *key, int64_t timeout_ms, uv_loop_t *loop)
{
    lockmgr_entry_t *e = omap_get(lockmgr_table(), key->data, key->len);
    if (!e) { /* released meanwhile: wake at once on the next turn */
        e = bson_malloc0(sizeof *e);
        buf_init(&e->key);
        buf_append(&e->key, key->data, key->len);
        omap_insert(lockmgr_table(), key->data, key->len, e);
        timeout_ms = 0;
    }
    w->entry = e;
    w->since = uv_hrtime();
    lockmgr_stats.waiting++;
    lockmgr_stats.waits++;
    DLIST_APPEND_TAILED(e->head, e->tail, w, prev, next);
    if (w->txn) {
        txn_set_waiting_for(w->txn, e->holder);
        txn_set_waiter(w->txn, w);
    }
    w->timer = NULL;
    if (timeout_ms >= 0) {
        w->timer = bson_malloc0(sizeof *w->timer);
        uv_timer_init(loop, w->timer);
        w->timer->data = w;
        uv_timer_start(w->timer, lockmgr_on_timeout, (uint64_t)timeout_ms, 0);
    }
}

void lockmgr_cancel(lock_waiter_t *w)
{
    lockmgr_unlink(w);
}

void lockmgr_release_all(struct txn *owner)
{
    size_t n;
    const buf_t *keys = txn_locks(owner, &n);
    for (size_t i = 0; i < n; i++) {
        lockmgr_entry_t *e = omap_get(lockmgr_table(), keys[i].data, keys[i].len);
        if (!e || e->holder != owner)
            continue;
        e->holder = NULL;
        /* wake every waiter: each runs its command again and either takes
         * the lock or waits anew, in arrival order */
        lock_waiter_t *w = e->head;
        if (!w) {
            omap_remove(lockmgr_table(), e->key.data, e->key.len);
            buf_destroy(&e->key);
            bson_free(e);
            continue;
        }
        /* detach the queue first: wake() may queue the waiter again */
        lock_waiter_t *list = e->head;
        e->head = e->tail = NULL;
        uint64_t now = uv_hrtime();
        for (lock_waiter_t *x = list; x; x = x->next) {
            x->entry = NULL;
            lockmgr_stats.waiting--;
            lockmgr_stats.wait_ns += now - x->since;
        }
        while (list) {
            lock_waiter_t *next = list->next;
            list->prev = list->next = NULL;
            lockmgr_end_wait(list);
            list->wake(list, false);
            list = next;
        }
        e = omap_get(lockmgr_table(), keys[i].data, keys[i].len);
        if (e && !e->holder && !e->head) {
            omap_remove(lockmgr_table(), e->key.data, e->key.len);
            buf_destroy(&e->key);
            bson_free(e);
        }
    }
}

size_t lockmgr_count(void)
{
    return lockmgr_map ? omap_count(lockmgr_map) : 0;
}

const lockmgr_stats_t *lockmgr_get_stats(void)
{
    return &lockmgr_stats;
}

void lockmgr_foreach(lockmgr_entry_fn fn, void *arg)
{
    struct txn *waiters[64];
    for (omap_node_t *n = omap_seek(lockmgr_table(), "", 0); n; n = omap_next(n)) {
        lockmgr_entry_t *e = omap_node_value(n);
        size_t nw = 0;
        for (lock_waiter_t *w = e->head; w && nw < sizeof waiters / sizeof waiters[0]; w = w->next)
            waiters[nw++] = w->txn;
        fn(&e->key, e->holder, waiters, nw, arg);
    }
}
