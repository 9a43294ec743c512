/* collection-private: the collection struct and what collection.c and
 * indexbuild.c (index builds in slices) share. Store layer only. */
#ifndef ATOMDB_COLLECTION_PRIVATE_H
#define ATOMDB_COLLECTION_PRIVATE_H

#include "store/capped.h"
#include "store/collection.h"

typedef struct indexbuild indexbuild_t;

struct collection {
    char *db;
    char *name;
    char *ns;
    bson_t options;
    uint8_t uuid[16];
    index_t *indexes[COLLECTION_MAX_INDEXES]; /* [0] is _id_, which owns the records */
    int nindexes;
    size_t count;
    size_t data_size;
    uint64_t id;          /* mvcc collection id */
    matcher_t *validator; /* compiled options.validator, or NULL */
    bool quiet;           /* a stand-in: its changes are not reported */
    bool validator_compiled;
    collation_t *collation; /* parsed options.collation (the default), or NULL */
    bool collation_parsed;
    capped_t *capped;     /* bounds and insertion order of a capped collection, or NULL */
    bool dropped;         /* detached from the catalog: a suspended build stops */
    indexbuild_t *builds; /* index builds in progress (store/indexbuild.c) */
};

/* The _id of `doc`; false when it has none. */
bool collection_doc_id(const bson_t *doc, bson_value_t *id);

/* Puts `n` on the first record of `c` whose _id key comes after `cursor`
 * (a scan that yielded goes on there, whatever others changed meanwhile);
 * false when none does. */
bool collection_seek_after(const collection_t *c, const buf_t *cursor, btree_pos_t *n);

/* True when `v` is or holds a string: its index key depends on the
 * collation, so a bound on it needs the query's collation to be the
 * index's (collection-query.c). */
bool collection_value_has_string(const bson_value_t *v);
/* Puts r under each of its keys in ix, or with r NULL takes them out. */
void collection_index_put(index_t *ix, const index_keys_t *keys, const bson_value_t *id,
                          record_t *r);
/* Frees an index no scan can still read; its entries go through the
 * reaper (store/reaper.h). */
void collection_index_free(index_t *ix);
/* Reports an index change {op: coll, spec|name} to the observer. */
void collection_emit_ddl(const collection_t *c, const char *op, const bson_t *spec,
                         const char *name);

/* The write path keeps the indexes being built current for the records
 * their scan has passed: `r` (doc `doc`) went in, or `old` went out. A key
 * a unique build cannot take fails that build, never the write (as
 * mongod's hybrid builds). No effect without builds. */
void indexbuild_note_insert(collection_t *c, const bson_t *doc, record_t *r);
void indexbuild_note_remove(collection_t *c, const bson_t *old_doc, record_t *old);
/* Stops every build of `c` (dropped) with IndexBuildAborted (276). */
void indexbuild_abort_all(collection_t *c, const char *why);
/* True while index `name` of `c` is being built. */
bool indexbuild_running(const collection_t *c, const char *name);
/* Stops the build of index `name`; false when none runs. */
bool indexbuild_abort(collection_t *c, const char *name);

#endif
