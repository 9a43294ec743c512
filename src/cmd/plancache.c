/* plancache: compiled filters and update documents kept between requests
 * (see plancache.h). Two hash tables (util/hash.h) of at most
 * PLANCACHE_SLOTS entries, keyed by the exact BSON bytes; when one is full
 * the oldest entry makes room. Keys over PLANCACHE_MAX_KEY bytes are not
 * cached. */
#include "cmd/plancache.h"

#include <string.h>

#include "util/hash.h"

#define PLANCACHE_SLOTS 256
#define PLANCACHE_MAX_KEY 1024

typedef struct plancache_entry {
    uint8_t *key; /* owned copy of the BSON bytes */
    uint32_t len;
    void *obj; /* matcher_t * or updater_t *; NULL while taken */
    UT_hash_handle hh;
} plancache_entry_t;

/* One cache: its entries (in insertion order) and how to free an object. */
typedef struct plancache_table {
    plancache_entry_t *entries;
    void (*destroy)(void *);
    plancache_entry_t *taken; /* the entry of the last take, for its put */
} plancache_table_t;

static void plancache_entry_free(plancache_table_t *t, plancache_entry_t *e)
{
    HASH_DEL(t->entries, e);
    if (t->taken == e)
        t->taken = NULL;
    if (e->obj)
        t->destroy(e->obj);
    bson_free(e->key);
    bson_free(e);
}

/* The cached object for the key, taken out of its entry, or NULL. */
static void *plancache_take(plancache_table_t *t, const uint8_t *key, uint32_t len)
{
    plancache_entry_t *e;
    if (len > PLANCACHE_MAX_KEY)
        return NULL;
    HASH_FIND(hh, t->entries, key, len, e);
    if (!e || !e->obj)
        return NULL;
    void *obj = e->obj;
    e->obj = NULL;
    t->taken = e;
    return obj;
}

/* Stores `obj` under the key; false when it was not stored (the caller
 * destroys it). */
static bool plancache_put(plancache_table_t *t, const uint8_t *key, uint32_t len, void *obj)
{
    plancache_entry_t *e;
    if (len > PLANCACHE_MAX_KEY)
        return false;
    e = t->taken;
    if (!e || e->len != len || memcmp(e->key, key, len) != 0)
        HASH_FIND(hh, t->entries, key, len, e);
    t->taken = NULL;
    if (e) {
        if (e->obj)
            return false; /* another request already put the same one back */
        e->obj = obj;
        return true;
    }
    if (HASH_COUNT(t->entries) >= PLANCACHE_SLOTS)
        plancache_entry_free(t, t->entries); /* the oldest */
    e = bson_malloc0(sizeof *e);
    e->key = bson_malloc(len);
    memcpy(e->key, key, len);
    e->len = len;
    e->obj = obj;
    HASH_ADD_KEYPTR(hh, t->entries, e->key, e->len, e);
    return true;
}

static void plancache_destroy_matcher(void *m)
{
    matcher_destroy(m);
}

static void plancache_destroy_updater(void *u)
{
    updater_destroy(u);
}

static void plancache_destroy_projection(void *p)
{
    projection_destroy(p);
}

static plancache_table_t plancache_matchers = {NULL, plancache_destroy_matcher, NULL};
static plancache_table_t plancache_find_matchers = {NULL, plancache_destroy_matcher, NULL};
static plancache_table_t plancache_updaters = {NULL, plancache_destroy_updater, NULL};
static plancache_table_t plancache_projections = {NULL, plancache_destroy_projection, NULL};

matcher_t *plancache_take_matcher(const bson_t *filter)
{
    return plancache_take(&plancache_matchers, bson_get_data(filter), filter->len);
}

/* Puts `m` back into `t` unless it is single-use. */
static void plancache_put_matcher_in(plancache_table_t *t, const bson_t *filter, matcher_t *m)
{
    if (!m)
        return;
    /* a pending error or $expr (let, $$NOW) makes it single-use */
    if (matcher_has_expr(m) || matcher_collation(m) || matcher_take_error(m, NULL) ||
        !plancache_put(t, bson_get_data(filter), filter->len, m))
        matcher_destroy(m);
}

void plancache_put_matcher(const bson_t *filter, matcher_t *m)
{
    plancache_put_matcher_in(&plancache_matchers, filter, m);
}

matcher_t *plancache_take_find_matcher(const bson_t *filter)
{
    return plancache_take(&plancache_find_matchers, bson_get_data(filter), filter->len);
}

void plancache_put_find_matcher(const bson_t *filter, matcher_t *m)
{
    plancache_put_matcher_in(&plancache_find_matchers, filter, m);
}

projection_t *plancache_take_projection(const bson_t *spec)
{
    return plancache_take(&plancache_projections, bson_get_data(spec), spec->len);
}

void plancache_put_projection(const bson_t *spec, projection_t *p)
{
    if (!p)
        return;
    /* a text score holds the request's matcher */
    if (projection_uses_text_score(p) ||
        !plancache_put(&plancache_projections, bson_get_data(spec), spec->len, p))
        projection_destroy(p);
}

updater_t *plancache_take_updater(const bson_iter_t *spec)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return NULL;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(spec, &len, &data);
    return plancache_take(&plancache_updaters, data, len);
}

void plancache_put_updater(const bson_iter_t *spec, updater_t *u)
{
    if (!u)
        return;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec) || updater_kind(u) != UPDATER_OPERATORS) {
        updater_destroy(u);
        return;
    }
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(spec, &len, &data);
    if (!plancache_put(&plancache_updaters, data, len, u))
        updater_destroy(u);
}

void plancache_clear(void)
{
    plancache_table_t *tables[] = {&plancache_matchers, &plancache_find_matchers,
                                   &plancache_updaters, &plancache_projections};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        plancache_entry_t *e, *tmp;
        HASH_ITER(hh, tables[i]->entries, e, tmp)
        {
            plancache_entry_free(tables[i], e);
        }
    }
}
