/* ttl: the TTL monitor's pass. Every collection with a TTL index is scanned
 * in _id order on the pass's own fiber, a slice at a time; each document is
 * checked when the scan reaches it and, once expired, removed through
 * collection_remove (journaled, seen by change streams). */
#include "store/ttl.h"

#include <bson/bson.h>

#include "store/collection-private.h"
#include "util/buf.h"
#include "util/fiber.h"
#include "util/log.h"

typedef struct ttl_pass {
    fiber_t *fiber;
    collection_t **colls; /* the collections when the pass began (borrowed) */
    size_t ncolls, cap;
    int64_t now_ms;
    size_t deleted;
    buf_t cursor; /* keystring of the _id the scan reached */
} ttl_pass_t;

static ttl_pass_t *ttl_pass;

static bool ttl_has_index(const collection_t *c)
{
    for (int i = 1; i < c->nindexes; i++)
        if (c->indexes[i]->expire_after_s >= 0 && c->indexes[i]->nfields == 1)
            return true;
    return false;
}

/* True when a TTL index of `c` finds a date in `doc` (or in the array
 * there) at or before `now_ms` minus its expireAfterSeconds. */
static bool ttl_expired(const collection_t *c, const bson_t *doc, int64_t now_ms)
{
    for (int i = 1; i < c->nindexes; i++) {
        const index_t *ix = c->indexes[i];
        if (ix->expire_after_s < 0 || ix->nfields != 1)
            continue;
        int64_t cutoff = now_ms - ix->expire_after_s * 1000;
        bson_iter_t it, found, el;
        if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, ix->paths[0], &found))
            continue;
        if (BSON_ITER_HOLDS_DATE_TIME(&found) && bson_iter_date_time(&found) <= cutoff)
            return true;
        if (BSON_ITER_HOLDS_ARRAY(&found) && bson_iter_recurse(&found, &el))
            while (bson_iter_next(&el))
                if (BSON_ITER_HOLDS_DATE_TIME(&el) && bson_iter_date_time(&el) <= cutoff)
                    return true;
    }
    return false;
}

/* Removes the expired documents of `c`. Between slices others may update,
 * delete or drop: the scan goes on after its cursor, and stops once `c` is
 * dropped or has no TTL index left. False when the pass was interrupted. */
static bool ttl_reap(ttl_pass_t *p, collection_t *c, dberr_t *err)
{
    if (!ttl_has_index(c))
        return true;
    btree_pos_t n;
    bool more = btree_seek(c->indexes[0]->map, NULL, 0, &n);
    while (more) {
        size_t klen;
        const uint8_t *key = btree_pos_key(&n, &klen);
        record_t *r = btree_pos_value(&n);
        bson_t doc;
        p->cursor.len = 0;
        buf_append(&p->cursor, key, klen);
        record_view(r, &doc);
        bool removed = false;
        if (ttl_expired(c, &doc, p->now_ms)) {
            collection_remove(c, r);
            p->deleted++;
            removed = true;
        }
        uint64_t yields = fiber_yields(fiber_current());
        if (!fiber_check(err))
            return false;
        if (!removed && fiber_yields(fiber_current()) == yields) {
            more = btree_next(&n);
            continue;
        }
        if (collection_dropped(c) || !ttl_has_index(c))
            return true;
        /* `n` was removed, or others ran: go on after the cursor */
        more = collection_seek_after(c, &p->cursor, &n);
    }
    return true;
}

static void ttl_pass_body(void *arg)
{
    ttl_pass_t *p = arg;
    dberr_t err = {0};
    for (size_t i = 0; i < p->ncolls; i++)
        if (!collection_dropped(p->colls[i]) && !ttl_reap(p, p->colls[i], &err))
            break;
}

static void ttl_pass_collect(collection_t *c, void *ctx)
{
    ttl_pass_t *p = ctx;
    if (p->ncolls == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->colls = bson_realloc(p->colls, p->cap * sizeof *p->colls);
    }
    p->colls[p->ncolls++] = c;
}

static void ttl_pass_free(ttl_pass_t *p)
{
    if (p->deleted)
        log_debug("INDEX", "TTL monitor deleted %zu documents", p->deleted);
    fiber_destroy(p->fiber);
    bson_free(p->colls);
    buf_destroy(&p->cursor);
    bson_free(p);
}

bool ttl_pass_start(catalog_t *cat, int64_t now_ms)
{
    if (ttl_pass)
        return false;
    ttl_pass_t *p = bson_malloc0(sizeof *p);
    p->now_ms = now_ms;
    buf_init(&p->cursor);
    catalog_foreach_all(cat, ttl_pass_collect, p);
    p->fiber = fiber_new(ttl_pass_body, p);
    if (!p->fiber) { /* no stack to be had: the pass runs whole, as before */
        ttl_pass_body(p);
        ttl_pass_free(p);
        return true;
    }
    ttl_pass = p;
    ttl_pass_step();
    return true;
}

bool ttl_pass_running(void)
{
    return ttl_pass != NULL;
}

bool ttl_pass_step(void)
{
    if (!ttl_pass)
        return false;
    if (!fiber_resume(ttl_pass->fiber))
        return true;
    ttl_pass_free(ttl_pass);
    ttl_pass = NULL;
    return false;
}

void ttl_pass_stop(void)
{
    if (!ttl_pass)
        return;
    fiber_kill(ttl_pass->fiber, 11600 /* InterruptedAtShutdown */, "interrupted at shutdown");
    while (ttl_pass_step())
        ;
}
