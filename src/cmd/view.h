/* view: what a command reads and writes through — the store itself, or,
 * inside a transaction, the transaction's snapshot and write set on top of
 * it. Also where document locks are taken: a statement locks every
 * document it will change before it changes any, and reports
 * VIEW_BLOCKED when one is held by another transaction, so the command can
 * wait and run again from its start. */
#ifndef ATOMDB_VIEW_H
#define ATOMDB_VIEW_H

#include <bson/bson.h>
#include <stdbool.h>

#include "doc/pipeline.h"
#include "store/collection.h"
#include "txn/txn.h"
#include "util/buf.h"
#include "util/dberr.h"

/* err->code for "a lock is held: park and run again" (never sent). */
#define VIEW_BLOCKED_CODE (-7)

typedef struct view {
    txn_t *txn;          /* NULL: outside any transaction */
    const char *db;
    buf_t blocked_key;            /* the lock waited for, after VIEW_BLOCKED_CODE (also the
                                   * key every view_lock builds) */
    uint8_t blocked_key_room[64]; /* blocked_key's first bytes: no malloc per lock */
    txn_t *blocked_by;   /* its holder */
    bool bypass_validation; /* bypassDocumentValidation */
    int depth;           /* nesting of MongoDB views being resolved (and of $lookup reads) */
    uint64_t snapshot;   /* outside a transaction: read as of this open mvcc snapshot
                          * (0: the latest); an aggregate that joins sets it */
    /* what the command's queries did, for the slow-operation log */
    int64_t keys_examined, docs_examined, nreturned;
    int64_t source_collscans; /* view_source reads that scanned a whole collection */
    char plan_stage[16];   /* the last query's stage ("" when none): "COLLSCAN", "IXSCAN", "EOF" */
    uint8_t plan_key[96];  /* ... for IXSCAN, its index's key pattern (BSON) when it fits */
    uint32_t plan_key_len; /* 0: none */
} view_t;

void view_init(view_t *v, const char *db, txn_t *txn);
void view_destroy(view_t *v);

/* Runs a query on `c` (may be NULL: no such collection) named `coll`.
 * When `c` is a MongoDB view its pipeline runs over its source first.
 * Outside a transaction it reads the latest data; inside one, its
 * snapshot plus its own changes (the targets of a write too: view_lock
 * then refuses a target changed since the snapshot). A serializable
 * transaction remembers the read for its commit check. `for_write` says
 * the results are a write's targets. */
bool view_query(view_t *v, collection_t *c, const char *coll, const collection_query_opts_t *o,
                bool for_write, recvec_t *out, collection_plan_t *plan, dberr_t *err);

/* Fills `src` with the pipeline source that reads through `v` (what
 * $lookup, $unionWith and $graphLookup read: the collection's indexes, a
 * MongoDB view's pipeline, the transaction's snapshot and write set or
 * v->snapshot). `src` borrows `v`. A $lookup that reaches a view whose
 * pipeline reads the view again fails after 20 levels (165). */
void view_source(view_t *v, pipeline_source_t *src);

/* Locks document `doc` (by its _id) of `c` before it is changed. False
 * with err->code VIEW_BLOCKED_CODE when another transaction holds it.
 * Inside a transaction, also false with WriteConflict (112, labelled
 * TransientTransactionError) when a commit since the transaction's
 * snapshot inserted, changed or deleted that document (snapshot
 * isolation's first-committer-wins rule). */
bool view_lock(view_t *v, collection_t *c, const bson_t *doc, dberr_t *err);

/* Changes, through the transaction's write set when there is one. */
bool view_insert(view_t *v, collection_t *c, const bson_t *doc, dberr_t *err);
bool view_replace(view_t *v, collection_t *c, record_t *old, const bson_t *doc, dberr_t *err);
void view_remove(view_t *v, collection_t *c, record_t *old);

#endif
