/* plancache: compiled filters and update documents kept between requests
 * (see plancache.h). Two direct-mapped tables of PLANCACHE_SLOTS entries,
 * indexed by an FNV-1a hash of the key bytes; a colliding key replaces the
 * older entry. Keys over PLANCACHE_MAX_KEY bytes are not cached. */
#include "cmd/plancache.h"

#include <string.h>

#define PLANCACHE_SLOTS 256
#define PLANCACHE_MAX_KEY 1024

typedef struct plancache_entry {
    uint8_t *key; /* owned copy of the BSON bytes; NULL when empty */
    uint32_t len;
    void *obj;    /* matcher_t * or updater_t *; NULL while taken */
} plancache_entry_t;

static plancache_entry_t plancache_matchers[PLANCACHE_SLOTS];
static plancache_entry_t plancache_updaters[PLANCACHE_SLOTS];

static uint32_t plancache_hash(const uint8_t *p, uint32_t len)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    return h % PLANCACHE_SLOTS;
}

/* The cached object for the key, taken out of its slot, or NULL. */
static void *plancache_take(plancache_entry_t *table, const uint8_t *key, uint32_t len)
{
    if (len > PLANCACHE_MAX_KEY)
        return NULL;
    plancache_entry_t *e = &table[plancache_hash(key, len)];
    if (!e->obj || e->len != len || memcmp(e->key, key, len) != 0)
        return NULL;
    void *obj = e->obj;
    e->obj = NULL;
    return obj;
}

/* Stores `obj` under the key; false when it was not stored (the caller
 * destroys it). An object already in the slot is handed to `destroy`. */
static bool plancache_put(plancache_entry_t *table, const uint8_t *key, uint32_t len, void *obj,
                          void (*destroy)(void *))
{
    if (len > PLANCACHE_MAX_KEY)
        return false;
    plancache_entry_t *e = &table[plancache_hash(key, len)];
    if (e->key && (e->len != len || memcmp(e->key, key, len) != 0)) {
        if (e->obj)
            destroy(e->obj);
        bson_free(e->key);
        e->key = NULL;
        e->obj = NULL;
    }
    if (e->obj) {
        return false; /* another request already put the same one back */
    }
    if (!e->key) {
        e->key = bson_malloc(len);
        memcpy(e->key, key, len);
        e->len = len;
    }
    e->obj = obj;
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

matcher_t *plancache_take_matcher(const bson_t *filter)
{
    return plancache_take(plancache_matchers, bson_get_data(filter), filter->len);
}

void plancache_put_matcher(const bson_t *filter, matcher_t *m)
{
    if (!m)
        return;
    /* a pending error or $expr (let, $$NOW) makes it single-use */
    if (matcher_has_expr(m) || matcher_take_error(m, NULL) ||
        !plancache_put(plancache_matchers, bson_get_data(filter), filter->len, m,
                       plancache_destroy_matcher))
        matcher_destroy(m);
}

updater_t *plancache_take_updater(const bson_iter_t *spec)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return NULL;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(spec, &len, &data);
    return plancache_take(plancache_updaters, data, len);
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
    if (!plancache_put(plancache_updaters, data, len, u, plancache_destroy_updater))
        updater_destroy(u);
}

void plancache_clear(void)
{
    for (int i = 0; i < PLANCACHE_SLOTS; i++) {
        if (plancache_matchers[i].obj)
            matcher_destroy(plancache_matchers[i].obj);
        if (plancache_updaters[i].obj)
            updater_destroy(plancache_updaters[i].obj);
        bson_free(plancache_matchers[i].key);
        bson_free(plancache_updaters[i].key);
    }
    memset(plancache_matchers, 0, sizeof plancache_matchers);
    memset(plancache_updaters, 0, sizeof plancache_updaters);
}
