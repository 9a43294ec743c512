/* catalog: every database and its collections, with MongoDB's rules for
 * database and collection names. Collections are created implicitly by the
 * first write, or explicitly by `create`. */
#ifndef ATOMDB_CATALOG_H
#define ATOMDB_CATALOG_H

#include <bson/bson.h>
#include <stdbool.h>

#include "store/collection.h"
#include "util/dberr.h"

typedef struct catalog catalog_t;

/* Creates an empty catalog. */
catalog_t *catalog_new(void);
/* Frees every database and collection (accepts NULL). */
void catalog_destroy(catalog_t *cat);

/* Drops every database (no observer events: used to start recovery over). */
void catalog_clear(catalog_t *cat);

/* Checks a database name as mongod does (InvalidNamespace 73). */
bool catalog_valid_db_name(const char *db, dberr_t *err);
/* Checks a collection name within `db` (InvalidNamespace 73). */
bool catalog_valid_coll_name(const char *db, const char *coll, dberr_t *err);

/* The collection, or NULL when it does not exist. Borrowed until dropped. */
collection_t *catalog_get(const catalog_t *cat, const char *db, const char *coll);

/* Views the document of db.coll whose _id is id into doc (borrowed until
 * the next write to the collection). False when there is none. */
bool catalog_view_id(const catalog_t *cat, const char *db, const char *coll,
                     const bson_value_t *id, bson_t *doc);

/* The collection, created (names validated) when missing. NULL with err. */
collection_t *catalog_get_or_create(catalog_t *cat, const char *db, const char *coll,
                                    dberr_t *err);

/* Creates a collection with `options`; NamespaceExists 48 when present. */
collection_t *catalog_create(catalog_t *cat, const char *db, const char *coll,
                             const bson_t *options, dberr_t *err);
/* The same, with the collection's UUID (recovery: the log's create or the
 * snapshot's entry names it); NULL `uuid` draws a new one. */
collection_t *catalog_create_uuid(catalog_t *cat, const char *db, const char *coll,
                                  const bson_t *options, const uint8_t *uuid, dberr_t *err);

/* Drops a collection; false when it did not exist. */
bool catalog_drop(catalog_t *cat, const char *db, const char *coll);

/* Renames `db`.`coll` to `to_db`.`to_coll` (another database too): the
 * same collection, documents and indexes, under its new name. Fails with
 * NamespaceNotFound 26 (no source), NamespaceExists 48 (a target, unless
 * `drop_target` drops it first), IllegalOperation 20 (the same name) or
 * InvalidNamespace 73. Reported to the observer as {drop} of the target
 * then {rename: coll, toDb, toColl} on `db`. */
bool catalog_rename(catalog_t *cat, const char *db, const char *coll, const char *to_db,
                    const char *to_coll, bool drop_target, dberr_t *err);

/* Drops every temporary collection an interrupted $out left behind
 * ("tmp.agg_out.*": a crash between its slices), as mongod does at
 * start-up. Returns how many. */
size_t catalog_drop_temporary(catalog_t *cat);

/* Drops a database and all its collections; false when it did not exist. */
bool catalog_drop_db(catalog_t *cat, const char *db);

/* Calls `fn` for every database name in order. */
void catalog_foreach_db(const catalog_t *cat, void (*fn)(const char *db, void *ctx), void *ctx);

/* Calls `fn` for every collection of `db` in name order. */
void catalog_foreach_coll(const catalog_t *cat, const char *db,
                          void (*fn)(collection_t *c, void *ctx), void *ctx);

/* Calls `fn` for every collection of every database. */
void catalog_foreach_all(const catalog_t *cat, void (*fn)(collection_t *c, void *ctx), void *ctx);

#endif
