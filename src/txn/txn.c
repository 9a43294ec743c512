/* txn: write sets in an ordered map keyed like the locks, an undo log for
 * savepoints, and an all-or-nothing commit. */
#include "txn/txn.h"

#include <string.h>

#include "doc/matcher.h"
#include "store/collection.h"
#include "store/mvcc.h"
#include "store/observer.h"
#include "txn/lockmgr.h"
#include "util/fiber.h"
#include "util/omap.h"
#include "util/vec.h"

/* An undo entry: the change as it was before a put. */
typedef struct txn_undo {
    buf_t key;
    bool had;            /* a change existed */
    record_t *doc;       /* its doc (a reference) */
    bool existed;
    record_t *after;     /* the doc the put recorded (a reference), NULL: deleted */
    bool replacing;      /* the put was a replacement (change streams' "replace") */
} txn_undo_t;

/* A read the serializable check revisits at commit. */
typedef struct txn_read {
    char *db;
    char *coll;
    uint64_t coll_id;    /* 0: the collection did not exist */
    matcher_t *matcher;  /* a reference */
} txn_read_t;

static txn_stats_t txn_stats;

struct txn {
    uint64_t age;
    bool committed;      /* txn_commit succeeded */
    txn_isolation_t isolation;
    txn_read_t *reads;
    size_t nreads, capreads;
    int64_t started_ms;
    uint64_t snapshot;
    omap_t *writes;      /* lock key → txn_change_t* */
    txn_change_t **order; /* changes in first-touch order, for commit */
    size_t norder, caporder;
    buf_t *locks;        /* keys held */
    size_t nlocks, caplocks;
    txn_undo_t *undo;
    size_t nundo, capundo;
    txn_t *waiting_for;
    lock_waiter_t *waiter;
    void *owner;
    collection_t **scratch;  /* stand-ins for collections created by commit */
    size_t nscratch;
};

txn_t *txn_new(uint64_t age, int64_t now_ms)
{
    txn_t *t = bson_malloc0(sizeof *t);
    txn_stats.started++;
    t->age = age;
    t->started_ms = now_ms;
    t->snapshot = mvcc_snapshot_open();
    t->writes = omap_new();
    return t;
}

static void txn_change_free(txn_change_t *ch)
{
    bson_free(ch->db);
    bson_free(ch->coll);
    bson_value_destroy(&ch->id);
    record_unref(ch->doc);
    bson_free(ch);
}

static void txn_clear_undo(txn_t *t)
{
    for (size_t i = 0; i < t->nundo; i++) {
        buf_destroy(&t->undo[i].key);
        record_unref(t->undo[i].doc);
        record_unref(t->undo[i].after);
    }
    t->nundo = 0;
}

void txn_destroy(txn_t *t)
{
    if (!t)
        return;
    lock_waiter_t *w = t->waiter;
    if (w) { /* parked on a lock: wake it to find its transaction gone */
        lockmgr_cancel(w);
        w->txn = NULL;
        w->wake(w, false);
    }
    lockmgr_release_all(t);
    mvcc_snapshot_close(t->snapshot);
    if (t->committed)
        txn_stats.committed++;
    else
        txn_stats.aborted++;
    for (size_t i = 0; i < t->norder; i++)
        txn_change_free(t->order[i]);
    bson_free(t->order);
    omap_destroy(t->writes, NULL);
    for (size_t i = 0; i < t->nlocks; i++)
        buf_destroy(&t->locks[i]);
    bson_free(t->locks);
    txn_clear_undo(t);
    bson_free(t->undo);
    for (size_t i = 0; i < t->nscratch; i++)
        collection_destroy(t->scratch[i]);
    bson_free(t->scratch);
    for (size_t i = 0; i < t->nreads; i++) {
        bson_free(t->reads[i].db);
        bson_free(t->reads[i].coll);
        matcher_destroy(t->reads[i].matcher);
    }
    bson_free(t->reads);
    bson_free(t);
}

void txn_renew_snapshot(txn_t *t)
{
    if (t->norder > 0)
        return; /* it has written: its snapshot is part of what it did */
    mvcc_snapshot_close(t->snapshot);
    t->snapshot = mvcc_snapshot_open();
    for (size_t i = 0; i < t->nreads; i++) {
        bson_free(t->reads[i].db);
        bson_free(t->reads[i].coll);
        matcher_destroy(t->reads[i].matcher);
    }
    t->nreads = 0;
}

const txn_stats_t *txn_get_stats(void)
{
    return &txn_stats;
}

void txn_count_write_conflict(void)
{
    txn_stats.write_conflicts++;
}

static struct {
    bool skip_write_check;
    bool skip_read_validation;
} txn_faults;

bool txn_inject_fault(const char *point, bool on)
{
#ifdef ATOMDB_FAULT_INJECTION
    if (!strcmp(point, "txnSkipWriteConflictCheck")) {
        txn_faults.skip_write_check = on;
        return true;
    }
    if (!strcmp(point, "txnSkipReadValidation")) {
        txn_faults.skip_read_validation = on;
        return true;
    }
#endif
    return false;
}

bool txn_fault_skip_write_check(void)
{
    return txn_faults.skip_write_check;
}

bool txn_parse_isolation(const char *name, txn_isolation_t *out)
{
    if (!strcmp(name, "snapshot"))
        *out = TXN_SNAPSHOT;
    else if (!strcmp(name, "serializable"))
        *out = TXN_SERIALIZABLE;
    else
        return false;
    return true;
}

const char *txn_isolation_name(txn_isolation_t level)
{
    return level == TXN_SERIALIZABLE ? "serializable" : "snapshot";
}

void txn_set_isolation(txn_t *t, txn_isolation_t level)
{
    t->isolation = level;
}

txn_isolation_t txn_isolation(const txn_t *t)
{
    return t->isolation;
}

void txn_note_read(txn_t *t, const char *db, const char *coll, uint64_t coll_id, matcher_t *m)
{
    if (t->isolation != TXN_SERIALIZABLE)
        return;
    for (size_t i = 0; i < t->nreads; i++) {
        txn_read_t *r = &t->reads[i];
        if (r->matcher == m && r->coll_id == coll_id && !strcmp(r->coll, coll) &&
            !strcmp(r->db, db))
            return; /* the same statement run again after a lock wait */
    }
    VEC_RESERVE_ONE(t->reads, t->nreads, t->capreads, 8);
    t->reads[t->nreads++] =
        (txn_read_t){bson_strdup(db), bson_strdup(coll), coll_id, matcher_ref(m)};
}

/* True when the version `r` (may be NULL) matches the read. */
static bool txn_read_matches(const txn_read_t *rd, record_t *r)
{
    if (!r)
        return false;
    bson_t doc;
    record_view(r, &doc);
    bool hit = matcher_matches(rd->matcher, &doc, NULL);
    matcher_take_error(rd->matcher, NULL);
    return hit;
}

bool txn_validate_reads(const txn_t *t, catalog_t *cat, dberr_t *err)
{
    if (t->isolation != TXN_SERIALIZABLE || t->nreads == 0 || txn_faults.skip_read_validation)
        return true;
    size_t n;
    const mvcc_change_t *ch = mvcc_changes_after(t->snapshot, &n);
    for (size_t i = 0; i < t->nreads; i++) {
        const txn_read_t *rd = &t->reads[i];
        collection_t *c = catalog_get(cat, rd->db, rd->coll);
        uint64_t now_id = c && !collection_is_view(c) ? collection_id(c) : 0;
        bool conflict = now_id != rd->coll_id;
        if (!fiber_alive(err)) /* commitTransaction's maxTimeMS, killOp */
            return false;
        for (size_t k = 0; !conflict && k < n; k++)
            conflict = ch[k].coll_id == rd->coll_id &&
                       (txn_read_matches(rd, ch[k].before) || txn_read_matches(rd, ch[k].after));
        if (conflict) {
            txn_stats.serialization_failures++;
            dberr_set(err, DBERR_WRITE_CONFLICT,
                      "Write conflict: since this transaction's snapshot, another commit changed "
                      "documents of %s.%s that the transaction read, so it cannot commit under "
                      "serializable isolation. Please retry your transaction.",
                      rd->db, rd->coll);
            err->labels |= DBERR_LABEL_TRANSIENT_TXN;
            return false;
        }
    }
    return true;
}

collection_t *txn_scratch_collection(txn_t *t, const char *db, const char *coll)
{
    for (size_t i = 0; i < t->nscratch; i++) {
        const char *ns = collection_ns(t->scratch[i]);
        size_t dl = strlen(db);
        if (strncmp(ns, db, dl) == 0 && ns[dl] == '.' && strcmp(ns + dl + 1, coll) == 0)
            return t->scratch[i];
    }
    t->scratch = bson_realloc(t->scratch, (t->nscratch + 1) * sizeof *t->scratch);
    t->scratch[t->nscratch] = collection_new(db, coll, NULL);
    collection_set_quiet(t->scratch[t->nscratch]);
    return t->scratch[t->nscratch++];
}

collection_t *txn_find_scratch(const txn_t *t, const char *db, const char *coll)
{
    for (size_t i = 0; i < t->nscratch; i++)
        if (!strcmp(collection_db(t->scratch[i]), db) &&
            !strcmp(collection_name(t->scratch[i]), coll))
            return t->scratch[i];
    return NULL;
}

uint64_t txn_snapshot(const txn_t *t)
{
    return t->snapshot;
}

int64_t txn_started_ms(const txn_t *t)
{
    return t->started_ms;
}

uint64_t txn_age(const txn_t *t)
{
    return t->age;
}

size_t txn_nchanges(const txn_t *t)
{
    return t->norder;
}

txn_change_t *txn_lookup(const txn_t *t, const char *db, const char *coll, const bson_value_t *id)
{
    buf_t key;
    buf_init(&key);
    lockmgr_key(db, coll, id, &key);
    txn_change_t *ch = omap_get(t->writes, key.data, key.len);
    buf_destroy(&key);
    return ch;
}

void txn_put(txn_t *t, const char *db, const char *coll, const bson_value_t *id, record_t *doc,
             bool existed)
{
    buf_t key;
    buf_init(&key);
    lockmgr_key(db, coll, id, &key);
    txn_change_t *ch = omap_get(t->writes, key.data, key.len);
    /* remember the previous state for savepoints */
    VEC_RESERVE_ONE(t->undo, t->nundo, t->capundo, 16);
    txn_undo_t *u = &t->undo[t->nundo++];
    buf_init(&u->key);
    buf_append(&u->key, key.data, key.len);
    u->had = ch != NULL;
    u->doc = ch && ch->doc ? record_ref(ch->doc) : NULL;
    u->existed = ch ? ch->existed : existed;
    u->after = doc ? record_ref(doc) : NULL;
    u->replacing = store_observer_replacing();
    if (!ch) {
        ch = bson_malloc0(sizeof *ch);
        ch->db = bson_strdup(db);
        ch->coll = bson_strdup(coll);
        bson_value_copy(id, &ch->id);
        ch->existed = existed;
        omap_insert(t->writes, key.data, key.len, ch);
        VEC_RESERVE_ONE(t->order, t->norder, t->caporder, 16);
        t->order[t->norder++] = ch;
    }
    record_t *old = ch->doc;
    ch->doc = doc ? record_ref(doc) : NULL;
    record_unref(old);
    buf_destroy(&key);
}

void txn_foreach(const txn_t *t, const char *db, const char *coll,
                 void (*fn)(txn_change_t *ch, void *ctx), void *ctx)
{
    for (size_t i = 0; i < t->norder; i++) {
        txn_change_t *ch = t->order[i];
        if (strcmp(ch->db, db) == 0 && strcmp(ch->coll, coll) == 0)
            fn(ch, ctx);
    }
}

size_t txn_savepoint(const txn_t *t)
{
    return t->nundo;
}

void txn_rollback_to(txn_t *t, size_t savepoint)
{
    while (t->nundo > savepoint) {
        txn_undo_t *u = &t->undo[--t->nundo];
        txn_change_t *ch = omap_get(t->writes, u->key.data, u->key.len);
        if (ch && u->had) {
            record_unref(ch->doc);
            ch->doc = u->doc;
            ch->existed = u->existed;
            u->doc = NULL;
        } else if (ch) {
            /* the change was created after the savepoint: drop it */
            omap_remove(t->writes, u->key.data, u->key.len);
            for (size_t i = 0; i < t->norder; i++) {
                if (t->order[i] == ch) {
                    memmove(&t->order[i], &t->order[i + 1],
                            (t->norder - i - 1) * sizeof *t->order);
                    t->norder--;
                    break;
                }
            }
            txn_change_free(ch);
        }
        record_unref(u->doc);
        record_unref(u->after);
        buf_destroy(&u->key);
    }
}

/* One applied change, for undoing a failed commit. */
typedef struct txn_applied {
    collection_t *c;
    record_t *before; /* a reference, or NULL (inserted) */
    bson_value_t id;
} txn_applied_t;

bool txn_commit(txn_t *t, catalog_t *cat, dberr_t *err)
{
    /* collections the transaction created come into existence first */
    for (size_t i = 0; i < t->nscratch; i++) {
        collection_t *sc = t->scratch[i];
        collection_t *c = catalog_get(cat, collection_db(sc), collection_name(sc));
        if (!c && !(c = catalog_create(cat, collection_db(sc), collection_name(sc),
                                       collection_options(sc), err)))
            return false;
        for (int k = 1; k < collection_nindexes(sc); k++) {
            bool created;
            if (!collection_create_index(c, &collection_index(sc, k)->spec, &created, err))
                return false;
        }
    }
    /* every put is applied in the transaction's order, so the log and
     * change streams see each operation (mongod: one event per operation,
     * not one per document); the end state is the write set's */
    txn_applied_t *done = bson_malloc0((t->nundo + 1) * sizeof *done);
    size_t ndone = 0;
    bool ok = true;
    for (size_t i = 0; i < t->nundo && ok; i++) {
        txn_undo_t *u = &t->undo[i];
        /* commitTransaction's maxTimeMS and killOp: the commit is one slice
         * (nothing may see half of it), but one that runs past its deadline
         * is undone below, whole, and fails with MaxTimeMSExpired */
        if (!fiber_alive(err)) {
            ok = false;
            break;
        }
        txn_change_t *ch = omap_get(t->writes, u->key.data, u->key.len);
        if (!ch)
            continue;
        collection_t *c = catalog_get_or_create(cat, ch->db, ch->coll, err);
        if (!c) {
            ok = false;
            break;
        }
        record_t *cur = collection_find_id(c, &ch->id);
        txn_applied_t *a = &done[ndone];
        a->c = c;
        a->before = cur ? record_ref(cur) : NULL;
        bson_value_copy(&ch->id, &a->id);
        if (u->after) {
            bson_t doc;
            record_view(u->after, &doc);
            store_observer_set_replacing(u->replacing);
            ok = cur ? collection_replace(c, cur, &doc, err) : collection_insert(c, &doc, err);
            store_observer_set_replacing(false);
        } else if (cur) {
            collection_remove(c, cur);
        }
        if (ok) {
            ndone++;
        } else {
            record_unref(a->before);
            bson_value_destroy(&a->id);
        }
    }
    /* on failure put back what was applied, newest first */
    while (!ok && ndone > 0) {
        txn_applied_t *a = &done[--ndone];
        record_t *cur = collection_find_id(a->c, &a->id);
        dberr_t ignore;
        if (a->before) {
            bson_t doc;
            record_view(a->before, &doc);
            if (cur)
                collection_replace(a->c, cur, &doc, &ignore);
            else
                collection_insert(a->c, &doc, &ignore);
        } else if (cur) {
            collection_remove(a->c, cur);
        }
    }
    for (size_t i = 0; i < ndone; i++) {
        record_unref(done[i].before);
        bson_value_destroy(&done[i].id);
    }
    bson_free(done);
    txn_clear_undo(t);
    t->committed = ok;
    return ok;
}

void txn_note_lock(txn_t *t, const buf_t *key)
{
    VEC_RESERVE_ONE(t->locks, t->nlocks, t->caplocks, 8);
    buf_init(&t->locks[t->nlocks]);
    buf_append(&t->locks[t->nlocks], key->data, key->len);
    t->nlocks++;
}

const buf_t *txn_locks(const txn_t *t, size_t *n)
{
    *n = t->nlocks;
    return t->locks;
}

void txn_set_waiting_for(txn_t *t, txn_t *holder)
{
    t->waiting_for = holder;
}

void txn_set_waiter(txn_t *t, lock_waiter_t *w)
{
    t->waiter = w;
}

txn_t *txn_waiting_for(const txn_t *t)
{
    return t->waiting_for;
}

txn_t *txn_deadlock_victim(txn_t *t, txn_t *holder)
{
    txn_t *youngest = t;
    int steps = 0;
    for (txn_t *x = holder; x && steps < 10000; x = x->waiting_for, steps++) {
        if (x->age > youngest->age)
            youngest = x;
        if (x == t) {
            txn_stats.deadlocks++;
            return youngest;
        }
    }
    return NULL;
}

void txn_set_owner(txn_t *t, void *owner)
{
    t->owner = owner;
}

void *txn_owner(const txn_t *t)
{
    return t->owner;
}
