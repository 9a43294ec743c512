/* catalog: databases → collections, both in ordered maps, plus name rules. */
#include "store/catalog.h"

#include <string.h>

#include "store/observer.h"
#include "store/reaper.h"
#include "util/omap.h"

/* One database: its collections by name. */
typedef struct catalog_db {
    char *name;
    omap_t *colls; /* name → collection_t* (owned) */
} catalog_db_t;

struct catalog {
    omap_t *dbs; /* name → catalog_db_t* (owned) */
};

static void catalog_free_coll(void *c)
{
    collection_destroy(c);
}

static void catalog_free_db(void *p)
{
    catalog_db_t *db = p;
    omap_destroy(db->colls, catalog_free_coll);
    bson_free(db->name);
    bson_free(db);
}

catalog_t *catalog_new(void)
{
    catalog_t *cat = bson_malloc0(sizeof *cat);
    cat->dbs = omap_new();
    return cat;
}

void catalog_destroy(catalog_t *cat)
{
    if (!cat)
        return;
    reaper_set_wake(NULL); /* the loop has stopped: free here */
    omap_destroy(cat->dbs, catalog_free_db);
    reaper_drain();
    bson_free(cat);
}

void catalog_clear(catalog_t *cat)
{
    omap_destroy(cat->dbs, catalog_free_db);
    reaper_drain();
    cat->dbs = omap_new();
}

bool catalog_valid_db_name(const char *db, dberr_t *err)
{
    size_t n = strlen(db);
    if (n == 0)
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid empty database name");
    if (n >= 64)
        return dberr_set(err, DBERR_INVALID_NAMESPACE,
                         "db name must be at most 63 characters, found: %zu", n);
    for (const char *p = db; *p; p++)
        if (strchr("/\\. \"$*<>:|?", *p))
            return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid database name: '%s'", db);
    return true;
}

bool catalog_valid_coll_name(const char *db, const char *coll, dberr_t *err)
{
    if (!catalog_valid_db_name(db, err))
        return false;
    size_t n = strlen(coll);
    if (n == 0)
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid namespace specified '%s.'", db);
    if (strchr(coll, '$'))
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid collection name: %s", coll);
    if (coll[0] == '.')
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid collection name: %s", coll);
    if (strlen(db) + 1 + n > 255)
        return dberr_set(err, DBERR_INVALID_NAMESPACE,
                         "Fully qualified namespace is too long. Namespace: %s.%s Max: 255", db,
                         coll);
    bool auth_coll = strcmp(db, "admin") == 0 &&
                     (strcmp(coll, "system.users") == 0 || strcmp(coll, "system.roles") == 0);
    if (strncmp(coll, "system.", 7) == 0 && strcmp(coll, "system.js") != 0 &&
        strcmp(coll, "system.views") != 0 && !auth_coll)
        return dberr_set(err, DBERR_INVALID_NAMESPACE, "Invalid system namespace: %s.%s", db,
                         coll);
    return true;
}

static catalog_db_t *catalog_db(const catalog_t *cat, const char *db)
{
    return omap_get(cat->dbs, db, strlen(db));
}

collection_t *catalog_get(const catalog_t *cat, const char *db, const char *coll)
{
    catalog_db_t *d = catalog_db(cat, db);
    return d ? omap_get(d->colls, coll, strlen(coll)) : NULL;
}

bool catalog_view_id(const catalog_t *cat, const char *db, const char *coll,
                     const bson_value_t *id, bson_t *doc)
{
    collection_t *c = catalog_get(cat, db, coll);
    record_t *r = c ? collection_find_id(c, id) : NULL;
    if (!r)
        return false;
    record_view(r, doc);
    return true;
}

/* The database `db`, added (empty) when missing. */
static catalog_db_t *catalog_db_add(catalog_t *cat, const char *db)
{
    catalog_db_t *d = catalog_db(cat, db);
    if (!d) {
        d = bson_malloc0(sizeof *d);
        d->name = bson_strdup(db);
        d->colls = omap_new();
        omap_insert(cat->dbs, db, strlen(db), d);
    }
    return d;
}

static collection_t *catalog_add(catalog_t *cat, const char *db, const char *coll,
                                 const bson_t *options, const uint8_t *uuid)
{
    catalog_db_t *d = catalog_db_add(cat, db);
    collection_t *c = collection_new(db, coll, options);
    if (uuid)
        collection_set_uuid(c, uuid);
    omap_insert(d->colls, coll, strlen(coll), c);
    const store_observer_t *obs = store_observer_get();
    if (obs && obs->ddl) {
        bson_t op = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&op, "create", coll);
        BSON_APPEND_DOCUMENT(&op, "options", collection_options(c));
        /* the log keeps the UUID, so it survives a restart (change
         * streams' collectionUUID, the oplog's ui) */
        bson_append_binary(&op, "ui", 2, BSON_SUBTYPE_UUID, collection_uuid(c), 16);
        obs->ddl(db, &op, obs->ctx);
        bson_destroy(&op);
    }
    return c;
}

/* Reports {key: value-or-1} on `db` to the observer. */
static void catalog_emit(const char *db, const char *key, const char *coll)
{
    const store_observer_t *obs = store_observer_get();
    if (!obs || !obs->ddl)
        return;
    bson_t op = BSON_INITIALIZER;
    if (coll)
        BSON_APPEND_UTF8(&op, key, coll);
    else
        BSON_APPEND_INT32(&op, key, 1);
    obs->ddl(db, &op, obs->ctx);
    bson_destroy(&op);
}

collection_t *catalog_get_or_create(catalog_t *cat, const char *db, const char *coll,
                                    dberr_t *err)
{
    collection_t *c = catalog_get(cat, db, coll);
    if (c)
        return c;
    if (!catalog_valid_coll_name(db, coll, err))
        return NULL;
    return catalog_add(cat, db, coll, NULL, NULL);
}

collection_t *catalog_create(catalog_t *cat, const char *db, const char *coll,
                             const bson_t *options, dberr_t *err)
{
    return catalog_create_uuid(cat, db, coll, options, NULL, err);
}

collection_t *catalog_create_uuid(catalog_t *cat, const char *db, const char *coll,
                                  const bson_t *options, const uint8_t *uuid, dberr_t *err)
{
    if (!catalog_valid_coll_name(db, coll, err))
        return NULL;
    if (catalog_get(cat, db, coll)) {
        dberr_set(err, DBERR_NAMESPACE_EXISTS, "Collection %s.%s already exists.", db, coll);
        return NULL;
    }
    return catalog_add(cat, db, coll, options, uuid);
}

bool catalog_drop(catalog_t *cat, const char *db, const char *coll)
{
    catalog_db_t *d = catalog_db(cat, db);
    if (!d)
        return false;
    collection_t *c = omap_remove(d->colls, coll, strlen(coll));
    if (!c)
        return false;
    catalog_emit(db, "drop", coll);
    collection_destroy(c);
    if (omap_count(d->colls) == 0)
        catalog_free_db(omap_remove(cat->dbs, db, strlen(db)));
    return true;
}

bool catalog_rename(catalog_t *cat, const char *db, const char *coll, const char *to_db,
                    const char *to_coll, bool drop_target, dberr_t *err)
{
    if (!catalog_valid_coll_name(to_db, to_coll, err))
        return false;
    catalog_db_t *d = catalog_db(cat, db);
    collection_t *c = d ? omap_get(d->colls, coll, strlen(coll)) : NULL;
    if (!c)
        return dberr_set(err, DBERR_NAMESPACE_NOT_FOUND, "Source collection %s.%s does not exist",
                         db, coll);
    if (!strcmp(db, to_db) && !strcmp(coll, to_coll))
        return dberr_set(err, DBERR_ILLEGAL_OPERATION, "Can't rename a collection to itself");
    collection_t *target = catalog_get(cat, to_db, to_coll);
    if (target && !drop_target)
        return dberr_set(err, DBERR_NAMESPACE_EXISTS, "target namespace exists");
    uint8_t target_uuid[16];
    if (target) {
        memcpy(target_uuid, collection_uuid(target), 16);
        catalog_drop(cat, to_db, to_coll);
    }
    d = catalog_db(cat, db); /* dropping the target may have freed a database */
    omap_remove(d->colls, coll, strlen(coll));
    collection_rename(c, to_db, to_coll);
    omap_insert(catalog_db_add(cat, to_db)->colls, to_coll, strlen(to_coll), c);
    const store_observer_t *obs = store_observer_get();
    if (obs && obs->ddl) {
        bson_t op = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&op, "rename", coll);
        BSON_APPEND_UTF8(&op, "toDb", to_db);
        BSON_APPEND_UTF8(&op, "toColl", to_coll);
        if (target) /* change streams' operationDescription.dropTarget */
            bson_append_binary(&op, "dropTarget", -1, BSON_SUBTYPE_UUID, target_uuid, 16);
        obs->ddl(db, &op, obs->ctx);
        bson_destroy(&op);
    }
    if (omap_count(d->colls) == 0)
        catalog_free_db(omap_remove(cat->dbs, db, strlen(db)));
    return true;
}

typedef struct catalog_temp {
    char *db;
    char *coll;
} catalog_temp_t;

size_t catalog_drop_temporary(catalog_t *cat)
{
    static const char prefix[] = "tmp.agg_out.";
    catalog_temp_t *found = NULL;
    size_t n = 0;
    for (omap_node_t *d = omap_seek(cat->dbs, NULL, 0); d; d = omap_next(d)) {
        catalog_db_t *db = omap_node_value(d);
        for (omap_node_t *c = omap_seek(db->colls, NULL, 0); c; c = omap_next(c)) {
            const char *name = collection_name(omap_node_value(c));
            if (strncmp(name, prefix, sizeof prefix - 1) != 0)
                continue;
            found = bson_realloc(found, (n + 1) * sizeof *found);
            found[n].db = bson_strdup(db->name);
            found[n].coll = bson_strdup(name);
            n++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        catalog_drop(cat, found[i].db, found[i].coll);
        bson_free(found[i].db);
        bson_free(found[i].coll);
    }
    bson_free(found);
    return n;
}

bool catalog_drop_db(catalog_t *cat, const char *db)
{
    catalog_db_t *d = omap_remove(cat->dbs, db, strlen(db));
    if (!d)
        return false;
    const store_observer_t *obs = store_observer_get();
    if (obs && obs->ddl) {
        /* {dropDatabase: 1, colls: [...]}: change streams report a drop
         * for each collection before the dropDatabase */
        bson_t op = BSON_INITIALIZER, arr;
        char key[16];
        const char *k;
        uint32_t i = 0;
        BSON_APPEND_INT32(&op, "dropDatabase", 1);
        bson_append_array_begin(&op, "colls", -1, &arr);
        for (omap_node_t *n = omap_seek(d->colls, NULL, 0); n; n = omap_next(n)) {
            bson_uint32_to_string(i++, &k, key, sizeof key);
            bson_append_utf8(&arr, k, -1, collection_name(omap_node_value(n)), -1);
        }
        bson_append_array_end(&op, &arr);
        obs->ddl(db, &op, obs->ctx);
        bson_destroy(&op);
    }
    catalog_free_db(d);
    return true;
}

void catalog_foreach_db(const catalog_t *cat, void (*fn)(const char *db, void *ctx), void *ctx)
{
    for (omap_node_t *n = omap_seek(cat->dbs, NULL, 0); n; n = omap_next(n)) {
        catalog_db_t *d = omap_node_value(n);
        fn(d->name, ctx);
    }
}

void catalog_foreach_coll(const catalog_t *cat, const char *db,
                          void (*fn)(collection_t *c, void *ctx), void *ctx)
{
    catalog_db_t *d = catalog_db(cat, db);
    if (!d)
        return;
    omap_node_t *n = omap_seek(d->colls, NULL, 0);
    while (n) {
        omap_node_t *next = omap_next(n); /* fn may not drop, but be safe */
        fn(omap_node_value(n), ctx);
        n = next;
    }
}

void catalog_foreach_all(const catalog_t *cat, void (*fn)(collection_t *c, void *ctx), void *ctx)
{
    for (omap_node_t *n = omap_seek(cat->dbs, NULL, 0); n; n = omap_next(n)) {
        catalog_db_t *d = omap_node_value(n);
        for (omap_node_t *m = omap_seek(d->colls, NULL, 0); m; m = omap_next(m))
            fn(omap_node_value(m), ctx);
    }
}
