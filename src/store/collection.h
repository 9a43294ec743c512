/* collection: the documents of one namespace and their indexes. Every
 * change goes through here so each index stays in step with the records;
 * a write that would break a unique index changes nothing. Also the query
 * planner: picks an index for a filter and sort, and says which plan ran. */
#ifndef ATOMDB_COLLECTION_H
#define ATOMDB_COLLECTION_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "doc/matcher.h"
#include "doc/sortspec.h"
#include "store/index.h"
#include "store/wildcard.h"
#include "store/record.h"
#include "util/dberr.h"

typedef struct collection collection_t;

/* Indexes a collection may have, _id_ included. */
#define COLLECTION_MAX_INDEXES 64

/* Creates an empty collection `db`.`name` with its _id index. `options` is
 * what `create` was given (kept for listCollections), or NULL. */
collection_t *collection_new(const char *db, const char *name, const bson_t *options);
/* Frees the collection and drops its references to records (accepts NULL). */
void collection_destroy(collection_t *c);

/* setParameter notablescan: while on, a query with a non-empty filter that
 * no index serves fails with NoQueryExecutionPlans (291) instead of
 * scanning (collections of admin, local, config and system.* excepted). */
void collection_set_notablescan(bool on);
bool collection_notablescan(void);

/* Replaces the collection's options (collMod); reported to the observer as
 * {collMod: name, options}. */
void collection_set_options(collection_t *c, const bson_t *options);

/* Stops reporting this collection's changes to the observer (stand-ins
 * that exist only inside a transaction). */
void collection_set_quiet(collection_t *c);

/* The collection's (or view's) default collation, from options.collation
 * (create's `collation`, kept resolved): borrowed until the options change;
 * NULL for the simple collation. */
typedef struct collation collation_t;
collation_t *collection_collation(collection_t *c);

/* True when the collection is a view ({viewOn, pipeline} in its options). */
bool collection_is_view(const collection_t *c);
/* True once `c` was dropped (detached from the catalog): a long operation
 * that held it across a yield checks this (the memory stays valid until
 * it ends, util/fiber.h). */
bool collection_dropped(const collection_t *c);

/* Checks `doc` against the collection's validator, if any (options
 * validator / validationLevel / validationAction). `old_doc` is the version
 * being replaced, or NULL for an insert (validationLevel "moderate" skips
 * documents that were already invalid). Fails with
 * DocumentValidationFailure (121) and errInfo as mongod. */
bool collection_validate(collection_t *c, const bson_t *doc, const bson_t *old_doc, dberr_t *err);

/* Calls `fn` for every document in _id order (borrowed for the call);
 * `fn` must not change the collection. Stops when it returns false. */
void collection_foreach(const collection_t *c, bool (*fn)(const bson_t *doc, void *ctx),
                        void *ctx);

/* The database the collection belongs to. */
const char *collection_db(const collection_t *c);

/* "db.name", the collection name, its creation options and uuid. */
const char *collection_ns(const collection_t *c);
const char *collection_name(const collection_t *c);
const bson_t *collection_options(const collection_t *c);
const uint8_t *collection_uuid(const collection_t *c);
/* Gives the collection the UUID it had before a restart (from the log or
 * a snapshot); a new collection gets a random one. */
void collection_set_uuid(collection_t *c, const uint8_t *uuid);

/* Number of documents and their total BSON bytes. */
size_t collection_count(const collection_t *c);
size_t collection_data_size(const collection_t *c);

/* The document with this _id (borrowed until the next write), or NULL. */
record_t *collection_find_id(const collection_t *c, const bson_value_t *id);

/* True when the document with _id `id` was inserted, replaced or deleted
 * after mvcc snapshot `snapshot` (which must be open): a transaction
 * reading at that snapshot may not write it (first committer wins). */
bool collection_changed_since(const collection_t *c, const bson_value_t *id, uint64_t snapshot);

/* Gives the collection a new database and name (catalog_rename). */
void collection_rename(collection_t *c, const char *db, const char *name);

/* The collection's mvcc id (changes in the mvcc window carry it). */
uint64_t collection_id(const collection_t *c);

/* Inserts `doc` (which must carry _id). Fails with DuplicateKey 11000
 * (keyPattern/keyValue in err's extra fields) and nothing changed. */
bool collection_insert(collection_t *c, const bson_t *doc, dberr_t *err);

/* Replaces `old` (a record of this collection) by `doc`, same _id. On a
 * unique-index violation nothing changes. */
bool collection_replace(collection_t *c, record_t *old, const bson_t *doc, dberr_t *err);

/* Stores `doc` (which must carry _id) under its _id: replaces the document
 * with that _id key, or inserts `doc` when there is none — one _id lookup
 * where collection_find_id then collection_replace take two or three.
 * Fails as collection_insert / collection_replace do. */
bool collection_put(collection_t *c, const bson_t *doc, dberr_t *err);

/* Removes `old` from the collection and every index. */
void collection_remove(collection_t *c, record_t *old);

/* How a query ran, for explain. */
typedef struct collection_plan {
    char stage[16];        /* "IDHACK", "IXSCAN" or "COLLSCAN" */
    const index_t *index;  /* for IXSCAN */
    int direction;         /* 1 forward, -1 backward */
    bool sorted_by_index;  /* the sort needed no in-memory sort */
    size_t keys_examined;
    size_t docs_examined;
    const char *reason;    /* why this plan was chosen (static text), for explain */
    const fts_query_t *text; /* TEXT_MATCH: the filter's $text, bound (the matcher's) */
    char wildcard_path[WILDCARD_PATH_MAX]; /* IXSCAN of a wildcard index: the path scanned */
} collection_plan_t;

/* What to fetch. */
typedef struct collection_query_opts {
    const matcher_t *matcher;   /* required */
    const sortspec_t *sort;     /* or NULL */
    const bson_t *hint;         /* {key pattern}, {$hint: "name"}, or NULL */
    const char *hint_name;      /* index name hint, or NULL */
    int64_t skip;               /* >= 0 */
    int64_t limit;              /* 0 = no limit */
    uint64_t snapshot;          /* read as of this mvcc snapshot; 0 = the latest */
    /* A sort done in memory (no index gives it) may hold at most this many
     * bytes of documents (the top skip+limit with a limit), else the query
     * fails with QueryExceededMemoryLimitNoDiskUseAllowed 292 (find's cap,
     * internalQueryMaxBlockingSortMemoryUsageBytes); 0 = no cap. */
    int64_t sort_max_bytes;
    bool allow_disk_use;        /* only changes the message: atomdb cannot spill */
    /* A $near wants only its nearest this many matches (the caller orders
     * by distance, then skips and limits); 0: every match. */
    int64_t near_want;
} collection_query_opts_t;

/* The check behind sort_max_bytes for the records of `out` after `first`,
 * already sorted in memory (view.c's sorts use it too). */
bool collection_sort_memory_check(const recvec_t *out, size_t first,
                                  const collection_query_opts_t *o, dberr_t *err);

/* Appends references to the matching records to `out`, sorted, skipped
 * and limited. False with BadValue 2 for a hint naming no index. A filter
 * with $text runs on the collection's text index (plan TEXT_MATCH; no text
 * index: IndexNotFound 27), its query bound to the index's spec. */
bool collection_query(collection_t *c, const collection_query_opts_t *opts, recvec_t *out,
                      collection_plan_t *plan, dberr_t *err);

/* Builds and adds an index from `spec`. *created is false when an
 * identical index already exists. Fails with IndexOptionsConflict 85 /
 * IndexKeySpecsConflict 86 / DuplicateKey 11000 when existing documents
 * break a new unique index. */
bool collection_create_index(collection_t *c, const bson_t *spec, bool *created, dberr_t *err);

/* Drops the index named `name` (IndexNotFound 27; _id_ is InvalidOptions 72). */
bool collection_drop_index(collection_t *c, const char *name, dberr_t *err);

/* Hides or unhides the index named `name` (collMod index.hidden): a hidden
 * index is kept up to date but never planned or hinted. Reported to the
 * observer as {collMod: coll, index: {name, hidden}}, as mongod's oplog
 * has it. False when no such index exists. */
bool collection_set_index_hidden(collection_t *c, const char *name, bool hidden);
/* The checks of collection_drop_index without the drop. */
bool collection_can_drop_index(const collection_t *c, const char *name, dberr_t *err);
/* Drops the index with key pattern `key`. */
bool collection_drop_index_by_key(collection_t *c, const bson_t *key, dberr_t *err);
/* Drops every index but _id_. */
void collection_drop_all_indexes(collection_t *c);

/* Number of indexes and the i-th (0 is _id_). Borrowed. */
int collection_nindexes(const collection_t *c);
index_t *collection_index(const collection_t *c, int i);

/* ---- capped collections (store/capped.h) ---- */

/* True when the collection is capped (options capped: true). */
bool collection_is_capped(const collection_t *c);
/* Its bounds: bytes (size) and documents (max, 0: none); 0 when not capped. */
int64_t collection_capped_size(const collection_t *c);
int64_t collection_capped_max(const collection_t *c);
/* The first record of a capped collection after natural position `after`
 * (0: from the start), its position in *pos; NULL at the end or when the
 * collection is not capped. Borrowed until the next write. */
record_t *collection_natural_next(const collection_t *c, uint64_t after, uint64_t *pos);
/* True while natural position `pos` still holds a document (a tailable
 * cursor whose position was removed has lost it). */
bool collection_natural_holds(const collection_t *c, uint64_t pos);
/* Removes the oldest documents until the collection is within its bounds
 * (convertToCapped; inserts do it themselves). */
void collection_capped_trim_now(collection_t *c);
/* While off, inserts into capped collections remove nothing: journal
 * replay, where the log holds the removals that followed each insert. */
void collection_set_capped_trim(bool on);

#endif
