/* crud: the write commands — insert, update (with upsert), delete and
 * findAndModify. Each statement runs to completion on the loop thread, so
 * a conditional update is a compare-and-set and $inc never loses an
 * increment; per-statement failures become writeErrors as in mongod. */
#include "cmd/cmd-private.h"
#include "cmd/plancache.h"
#include "cmd/view.h"
#include "store/observer.h"

#include <string.h>

#include "doc/collation.h"
#include "doc/matcher.h"
#include "doc/projection.h"
#include "doc/sortspec.h"
#include "doc/updater.h"
#include "store/catalog.h"
#include "txn/session.h"
#include "txn/txn.h"
#include "util/fiber.h"

/* The results a write command accumulates. */
typedef struct crud_result {
    int64_t n;
    int64_t n_modified;
    bson_t upserted;       /* [{index, _id}] */
    uint32_t n_upserted;
    bson_t write_errors;   /* [{index, code, errmsg, ...}] */
    uint32_t n_errors;
} crud_result_t;

static void crud_result_init(crud_result_t *r)
{
    memset(r, 0, sizeof *r);
    bson_init(&r->upserted);
    bson_init(&r->write_errors);
}

static void crud_result_destroy(crud_result_t *r)
{
    bson_destroy(&r->upserted);
    bson_destroy(&r->write_errors);
}

/* Where a batch outside any transaction stopped to wait for a lock: the
 * statements before `index` are applied and counted in `result`. */
typedef struct crud_resume {
    uint32_t index;
    crud_result_t result;
} crud_resume_t;

static void crud_resume_free(void *p)
{
    crud_resume_t *rs = p;
    crud_result_destroy(&rs->result);
    bson_free(rs);
}

/* Picks up a batch that waited for a lock: returns the first statement to
 * run and fills `r` with what the earlier ones did. */
static uint32_t crud_resume_take(cmd_ctx_t *ctx, crud_result_t *r)
{
    crud_resume_t *rs = ctx->client->resume;
    if (!rs)
        return 0;
    ctx->client->resume = NULL;
    crud_result_destroy(r);
    *r = rs->result;
    uint32_t index = rs->index;
    bson_free(rs);
    return index;
}

/* Saves a batch that must wait for a lock at statement `index` (outside a
 * transaction; inside one the whole command runs again). */
static void crud_resume_save(cmd_ctx_t *ctx, uint32_t index, crud_result_t *r)
{
    if (ctx->view->txn)
        return;
    crud_resume_t *rs = bson_malloc0(sizeof *rs);
    rs->index = index;
    rs->result = *r;
    crud_result_init(r);
    ctx->client->resume = rs;
    ctx->client->resume_free = crud_resume_free;
}

/* True when a statement's error ends the whole command rather than being
 * one of its writeErrors: a document is locked (the command parks), or a
 * transaction met a write conflict (the command fails with it, labelled
 * TransientTransactionError, and the transaction aborts — as mongod). */
static bool crud_interrupted(const dberr_t *e)
{
    /* as mongod: an interruption fails the whole command, not one statement */
    return e->code == DBERR_MAX_TIME_MS_EXPIRED || e->code == DBERR_INTERRUPTED ||
           e->code == 279 || e->code == DBERR_SHUTDOWN_IN_PROGRESS || e->code == 175;
}

static bool crud_stops_batch(const cmd_ctx_t *ctx, const dberr_t *e)
{
    return e->code == VIEW_BLOCKED_CODE ||
           (e->code == DBERR_WRITE_CONFLICT && ctx->view->txn != NULL) ||
           crud_interrupted(e);
}

/* A statement found a document locked, or a transaction's statement met a
 * write conflict: keep where the batch stopped (a lock outside a
 * transaction), release the results and fail with `blocked` so the
 * dispatcher parks the command or fails it. Returns false. */
static bool crud_park_batch(cmd_ctx_t *ctx, uint32_t index, crud_result_t *r,
                            const dberr_t *blocked, dberr_t *err)
{
    if (blocked->code == VIEW_BLOCKED_CODE)
        crud_resume_save(ctx, index, r);
    crud_result_destroy(r);
    *err = *blocked;
    return false;
}

static void crud_add_error(crud_result_t *r, uint32_t index, const dberr_t *err)
{
    char key[16];
    bson_t e;
    bson_append_document_begin(&r->write_errors, cmd_index_key(r->n_errors++, key, sizeof key),
                               -1, &e);
    BSON_APPEND_INT32(&e, "index", (int32_t)index);
    BSON_APPEND_INT32(&e, "code", err->code);
    if (err->extra_len) {
        bson_t extra;
        bson_iter_t it;
        if (bson_init_static(&extra, err->extra, err->extra_len) && bson_iter_init(&it, &extra))
            while (bson_iter_next(&it))
                bson_append_value(&e, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
    BSON_APPEND_UTF8(&e, "errmsg", err->msg);
    bson_append_document_end(&r->write_errors, &e);
}

static void crud_add_upserted(crud_result_t *r, uint32_t index, const bson_value_t *id)
{
    char key[16];
    bson_t u;
    bson_append_document_begin(&r->upserted, cmd_index_key(r->n_upserted++, key, sizeof key), -1,
                               &u);
    BSON_APPEND_INT32(&u, "index", (int32_t)index);
    bson_append_value(&u, "_id", -1, id);
    bson_append_document_end(&r->upserted, &u);
}

/* Appends n / nModified / upserted / writeErrors to the reply. */
static void crud_reply(cmd_ctx_t *ctx, crud_result_t *r, bool is_update)
{
    BSON_APPEND_INT32(ctx->reply, "n", (int32_t)r->n);
    if (is_update) {
        if (r->n_upserted)
            BSON_APPEND_ARRAY(ctx->reply, "upserted", &r->upserted);
        BSON_APPEND_INT32(ctx->reply, "nModified", (int32_t)r->n_modified);
    }
    if (r->n_errors)
        BSON_APPEND_ARRAY(ctx->reply, "writeErrors", &r->write_errors);
}

/* Runs statement `index` of a write batch (the array element under `item`),
 * counting what it did into `r`; `arg` is the command's own state. */
typedef bool (*crud_stmt_fn)(cmd_ctx_t *ctx, const bson_iter_t *item, uint32_t index,
                             crud_result_t *r, void *arg, dberr_t *err);

/* A retryable write batch (insert, update or delete with lsid +
 * txnNumber, outside a transaction) runs in slices like any other,
 * yielding between statements (each statement runs in one slice): before
 * it gives the loop back it records how many statements it has run and
 * their result in config.transactions (txn/session.h), in the same log
 * record as their writes, so a retry — after a crash, a kill or a
 * disconnect — runs only the rest and answers exactly what one
 * uninterrupted run would have. A statement's id is its index in the
 * batch, as mongod numbers them when the command carries no stmtIds. */
static bool crud_retry_sliced(const cmd_ctx_t *ctx)
{
    return ctx->txn_number >= 0 && !ctx->in_txn && ctx->session;
}

/* Records that the statements before `index` ran, with result `r`;
 * nothing when no statement ran since the last record (`*noted`). */
static bool crud_retry_note(cmd_ctx_t *ctx, uint32_t index, const crud_result_t *r,
                            uint32_t *noted, dberr_t *err)
{
    if (index <= *noted)
        return true;
    *noted = index;
    bson_t partial = BSON_INITIALIZER;
    BSON_APPEND_INT32(&partial, "n", (int32_t)r->n);
    if (r->n_modified)
        BSON_APPEND_INT32(&partial, "nModified", (int32_t)r->n_modified);
    if (r->n_upserted)
        BSON_APPEND_ARRAY(&partial, "upserted", &r->upserted);
    if (r->n_errors)
        BSON_APPEND_ARRAY(&partial, "writeErrors", &r->write_errors);
    bool ok = session_retry_progress_record(server.catalog, ctx->session->id, ctx->txn_number,
                                            index, &partial, err);
    bson_destroy(&partial);
    ctx->retry_progress = true;
    return ok;
}

/* Where an earlier run of this retryable batch stopped: the first
 * statement to run, with `r` holding what the earlier ones did. */
static uint32_t crud_retry_resume(cmd_ctx_t *ctx, crud_result_t *r)
{
    uint32_t done = 0;
    bson_t partial = BSON_INITIALIZER;
    bson_iter_t it;
    if (session_retry_progress(server.catalog, ctx->session->id, ctx->txn_number, &done,
                               &partial)) {
        if (bson_iter_init_find(&it, &partial, "n"))
            r->n = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, &partial, "nModified"))
            r->n_modified = bson_iter_as_int64(&it);
        bson_t ups;
        if (bson_iter_init_find(&it, &partial, "upserted") && cmd_iter_doc(&it, &ups)) {
            bson_concat(&r->upserted, &ups);
            r->n_upserted = bson_count_keys(&ups);
        }
        bson_t errs;
        if (bson_iter_init_find(&it, &partial, "writeErrors") && cmd_iter_doc(&it, &errs)) {
            bson_concat(&r->write_errors, &errs);
            r->n_errors = bson_count_keys(&errs);
        }
        ctx->retry_progress = true;
    }
    bson_destroy(&partial);
    return done;
}

/* The check between statements of a retryable batch: when the slice is
 * used up, records the progress and yields; otherwise only the kill and
 * deadline checks (fiber_check could yield with the progress unrecorded),
 * recording the progress when they stop the batch. */
static bool crud_retry_check(cmd_ctx_t *ctx, uint32_t index, const crud_result_t *r,
                             uint32_t *noted, dberr_t *e)
{
    if (fiber_due())
        return crud_retry_note(ctx, index, r, noted, e) && fiber_yield_now(e);
    if (fiber_alive(e))
        return true;
    dberr_t ignored;
    crud_retry_note(ctx, index, r, noted, &ignored);
    return false;
}

/* The one park-and-resume loop of insert, update and delete: resumes a
 * batch that waited for a lock where it stopped, runs each statement
 * (counting it in `opcounter`), parks the batch when a statement finds a
 * document locked, turns other failures into writeErrors (stopping at the
 * first when `ordered`), then appends the write result. */
static bool crud_run_batch(cmd_ctx_t *ctx, bson_iter_t *items, bool ordered, bool is_update,
                           int64_t *opcounter, crud_stmt_fn fn, void *arg, dberr_t *err)
{
    crud_result_t r;
    crud_result_init(&r);
    bool retry = crud_retry_sliced(ctx);
    uint32_t start = crud_resume_take(ctx, &r);
    if (retry && start == 0) {
        /* (a txnNumber with nothing stored has no progress to look up) */
        if (!ctx->retry_fresh)
            start = crud_retry_resume(ctx, &r);
    } else if (retry) { /* a parked batch run again: its progress is on record */
        ctx->retry_progress = true;
    }
    uint32_t noted = start; /* the statements before it are on record */
    for (uint32_t index = 0; bson_iter_next(items); index++) {
        if (index < start)
            continue;
        dberr_t e;
        dberr_clear(&e);
        /* between statements: other requests may run */
        if (retry ? !crud_retry_check(ctx, index, &r, &noted, &e) : !fiber_check(&e))
            return crud_park_batch(ctx, index, &r, &e, err);
        (*opcounter)++;
        if (retry) /* a statement is one step: no crash falls inside it */
            fiber_no_yield_begin();
        bool stmt_ok = fn(ctx, items, index, &r, arg, &e);
        if (retry)
            fiber_no_yield_end();
        if (stmt_ok)
            continue;
        if (crud_stops_batch(ctx, &e)) {
            dberr_t note_err;
            /* parked or failed: the statements before it are sealed now */
            if (retry && !crud_retry_note(ctx, index, &r, &noted, &note_err))
                e = note_err;
            return crud_park_batch(ctx, index, &r, &e, err);
        }
        crud_add_error(&r, index, &e);
        if (ordered)
            break;
    }
    crud_reply(ctx, &r, is_update);
    crud_result_destroy(&r);
    return true;
}

/* stmtId / stmtIds (the statement ids mongos gives a batch), checked as
 * mongod checks them. A retryable batch records its progress as the
 * number of statements run (crud_retry_note), which is right when the
 * statements are numbered by their index (mongod's default); other
 * numberings are refused there. */
static bool crud_stmt_ids(const cmd_ctx_t *ctx, uint32_t n, dberr_t *err)
{
    bson_iter_t it, el;
    bool has_one = cmd_find(ctx, "stmtId", &it);
    int64_t first = has_one && BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_int64(&it) : 0;
    if (has_one && !BSON_ITER_HOLDS_INT32(&it) && !BSON_ITER_HOLDS_INT64(&it))
        return cmd_wrong_type(err, &it, "type 'int'", "%s.stmtId", ctx->name);
    bool by_index = first == 0;
    if (cmd_find(ctx, "stmtIds", &it)) {
        if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &el))
            return cmd_wrong_type(err, &it, "type 'array'", "%s.stmtIds", ctx->name);
        uint32_t count = 0;
        while (bson_iter_next(&el)) {
            if (!BSON_ITER_HOLDS_INT32(&el) && !BSON_ITER_HOLDS_INT64(&el))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "BSON field '%s.stmtIds' holds a '%s', expected type 'int'",
                                 ctx->name, shellfmt_type_name(bson_iter_type(&el)));
            by_index = by_index && bson_iter_as_int64(&el) == (int64_t)count;
            count++;
        }
        if (count != n)
            return dberr_set(err, 16,
                             "Number of statement ids must match the number of batch entries. "
                             "Got %u statement ids but %u operations.",
                             count, n);
        if (has_one)
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "May not specify both stmtId and stmtIds in write command.");
    }
    if (!by_index && crud_retry_sliced(ctx))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "atomdb numbers the statements of a retryable write by their index in "
                         "the batch (0, 1, 2, ...); other stmtId/stmtIds are not supported");
    return true;
}

/* The array argument `key` (insert.documents, update.updates, ...), checked
 * against maxWriteBatchSize. */
static bool crud_batch(cmd_ctx_t *ctx, const char *key, bson_iter_t *items, bool *ordered,
                       dberr_t *err)
{
    bson_iter_t it;
    if (!cmd_required(ctx, key, BSON_TYPE_ARRAY, &it, err))
        return false;
    bson_t arr;
    cmd_iter_doc(&it, &arr);
    uint32_t n = bson_count_keys(&arr);
    if (n == 0 || n > WIRE_MAX_WRITE_BATCH_SIZE)
        return dberr_set(err, 16, "Write batch sizes must be between 1 and %d. Got %u operations.",
                         WIRE_MAX_WRITE_BATCH_SIZE, n);
    *ordered = true;
    if (!cmd_opt_bool(ctx, "ordered", ordered, err) || !crud_stmt_ids(ctx, n, err))
        return false;
    bson_iter_recurse(&it, items);
    return true;
}

static bool crud_collection(cmd_ctx_t *ctx, collection_t **out, dberr_t *err)
{
    const char *coll;
    if (!cmd_collection_name(ctx, &coll, err))
        return false;
    *out = catalog_get(server.catalog, ctx->db, coll);
    if (!*out && ctx->view->txn) {
        /* created when the transaction commits, invisible until then */
        if (!catalog_valid_coll_name(ctx->db, coll, err))
            return false;
        *out = txn_scratch_collection(ctx->view->txn, ctx->db, coll);
        return true;
    }
    if (!*out)
        *out = catalog_get_or_create(server.catalog, ctx->db, coll, err);
    if (*out && collection_is_view(*out))
        return dberr_set(err, 166, "Namespace %s.%s is a view, not a collection", ctx->db, coll);
    return *out != NULL;
}

/* Checks that the _id value at `it` can be stored: not an array, a regex
 * or undefined, and without '$'-prefixed fields when it is a document. */
static bool crud_check_id(const bson_iter_t *it, dberr_t *err)
{
    if (BSON_ITER_HOLDS_ARRAY(it))
        return dberr_set(err, DBERR_BAD_VALUE, "can't use an array for _id");
    if (BSON_ITER_HOLDS_REGEX(it))
        return dberr_set(err, DBERR_BAD_VALUE, "can't use a regex for _id");
    if (BSON_ITER_HOLDS_UNDEFINED(it))
        return dberr_set(err, DBERR_BAD_VALUE, "can't use a undefined for _id");
    bson_iter_t sub;
    if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub))
        while (bson_iter_next(&sub))
            if (bson_iter_key(&sub)[0] == '$')
                return dberr_set(err, DBERR_DOLLAR_PREFIXED_FIELD_NAME,
                                 "_id fields may not contain '$'-prefixed fields: %s is not "
                                 "valid for storage.",
                                 bson_iter_key(&sub));
    return true;
}

bool cmd_prepare_insert_doc(const bson_t *doc, bson_t *out, dberr_t *err)
{
    bson_iter_t it, id;
    bool has_id = false;
    if (!bson_iter_init(&it, doc))
        return dberr_set(err, DBERR_INVALID_BSON, "invalid document");
    /* only _id is checked: since MongoDB 5.0 other field names may start
     * with '$' or hold '.' */
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            continue;
        if (has_id)
            return dberr_set(err, DBERR_BAD_VALUE, "can't have multiple _id fields in one "
                                                   "document");
        if (!crud_check_id(&it, err))
            return false;
        id = it;
        has_id = true;
    }
    if (has_id) {
        bson_append_value(out, "_id", 3, bson_iter_value(&id));
    } else {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(out, "_id", &oid);
    }
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
    if (out->len > WIRE_MAX_BSON_OBJECT_SIZE)
        return dberr_set(err, DBERR_BAD_VALUE, "object to insert too large. size in bytes: %u, "
                                               "max size: %d",
                         out->len, WIRE_MAX_BSON_OBJECT_SIZE);
    return true;
}

/* One insert statement: a document, prepared (_id first), locked, inserted. */
static bool crud_insert_stmt(cmd_ctx_t *ctx, const bson_iter_t *item, uint32_t index,
                             crud_result_t *r, void *arg, dberr_t *err)
{
    collection_t *c = arg;
    bson_t doc, prepared = BSON_INITIALIZER;
    bool ok = false;
    /* dropped between two slices of the batch: the insert creates it
     * again, as it would have done had the batch come after the drop */
    if (collection_dropped(c) && !crud_collection(ctx, &c, err))
        return false;
    if (!BSON_ITER_HOLDS_DOCUMENT(item) || !cmd_iter_doc(item, &doc))
        dberr_set(err, DBERR_TYPE_MISMATCH, "documents to insert must be objects");
    else if (cmd_prepare_insert_doc(&doc, &prepared, err) &&
             view_lock(ctx->view, c, &prepared, err) &&
             view_insert(ctx->view, c, &prepared, err))
        ok = true;
    bson_destroy(&prepared);
    if (ok)
        r->n++;
    return ok;
}

/* insert and update: the batch under `key` run against the collection
 * (created when missing). */
static bool crud_write_command(cmd_ctx_t *ctx, const char *key, bool is_update,
                               int64_t *opcounter, crud_stmt_fn fn, dberr_t *err)
{
    collection_t *c;
    bson_iter_t items;
    bool ordered;
    if (!crud_batch(ctx, key, &items, &ordered, err) || !crud_collection(ctx, &c, err))
        return false;
    return crud_run_batch(ctx, &items, ordered, is_update, opcounter, fn, c, err);
}

bool cmd_insert(cmd_ctx_t *ctx, dberr_t *err)
{
    return crud_write_command(ctx, "documents", false, &server.ops.insert, crud_insert_stmt, err);
}

/* One parsed update statement. */
typedef struct crud_update_stmt {
    bson_t q;
    bson_iter_t u;
    bool upsert, multi;
    bson_t array_filters;
    bool has_array_filters;
    bson_t hint;
    bool has_hint;
    const char *hint_name;
    bson_t sort;
    bool has_sort;
    bson_iter_t collation; /* the statement's own (has_collation) */
    bool has_collation;
} crud_update_stmt_t;

/* The command's `let` document, or NULL. Borrowed from the command. */
static const bson_t *crud_let(const cmd_ctx_t *ctx)
{
    static __thread bson_t let;
    bson_iter_t it;
    if (cmd_find(ctx, "let", &it) && BSON_ITER_HOLDS_DOCUMENT(&it) && cmd_iter_doc(&it, &let))
        return &let;
    return NULL;
}

/* What an update statement or a findAndModify runs with: its collation and
 * sort, the targets found, and the matcher and updater, borrowed from the
 * plan cache when `cacheable` (no collation, arrayFilters or let) and put
 * back by crud_plan_release. */
typedef struct crud_plan {
    collation_t *coll;
    matcher_t *m;
    updater_t *u;
    sortspec_t *sort;
    recvec_t recs;
    bool cacheable;
} crud_plan_t;

/* Empties `pl`: crud_plan_release may run from here on. */
static inline void crud_plan_init(crud_plan_t *pl)
{
    *pl = (crud_plan_t){.cacheable = false}; /* until the collation is known */
    recvec_init(&pl->recs);
}

/* Resolves the collation (`collation`: the statement's field, or NULL) and
 * builds or borrows the matcher of filter `q`. */
static inline bool crud_plan_matcher(crud_plan_t *pl, const cmd_ctx_t *ctx, collection_t *c,
                              const bson_t *q, const bson_iter_t *collation,
                              bool has_array_filters, dberr_t *err)
{
    bson_iter_t let;
    if (!cmd_collation_resolve(c, collation, &pl->coll, err))
        return false;
    pl->cacheable = !has_array_filters && !cmd_find(ctx, "let", &let) && !pl->coll;
    pl->m = pl->cacheable ? plancache_take_matcher(q) : NULL;
    return pl->m || (pl->m = cmd_matcher_new(ctx, q, err));
}

/* Builds or borrows the updater of `spec` (`array_filters`: or NULL). */
static inline bool crud_plan_updater(crud_plan_t *pl, const cmd_ctx_t *ctx, const bson_iter_t *spec,
                              const bson_t *array_filters, dberr_t *err)
{
    pl->u = pl->cacheable ? plancache_take_updater(spec) : NULL;
    return pl->u || (pl->u = updater_new_let(spec, array_filters, crud_let(ctx), err));
}

/* Frees what `pl` holds; a borrowed matcher and updater go back to the
 * plan cache under `q` and `spec` (as given to crud_plan_matcher and
 * crud_plan_updater; `spec` is not read when there is no updater). */
static inline void crud_plan_release(crud_plan_t *pl, const bson_t *q, const bson_iter_t *spec)
{
    recvec_destroy(&pl->recs);
    if (pl->cacheable) {
        plancache_put_matcher(q, pl->m);
        plancache_put_updater(spec, pl->u);
    } else {
        matcher_destroy(pl->m);
        updater_destroy(pl->u);
    }
    sortspec_destroy(pl->sort);
    collation_destroy(pl->coll);
}

/* Builds the document an upsert inserts, into `out` (initialised). */
static bool crud_upsert_doc(const bson_t *filter, const updater_t *u, bson_t *out, dberr_t *err)
{
    bson_t seed = BSON_INITIALIZER, applied = BSON_INITIALIZER;
    bool ok = false;
    if (!matcher_upsert_seed(filter, &seed, err))
        goto cleanup;
    if (updater_kind(u) == UPDATER_REPLACEMENT) {
        /* the replacement, with the filter's _id when it names none */
        bson_t empty = BSON_INITIALIZER;
        bool changed;
        if (!updater_apply(u, &empty, true, -1, &applied, &changed, err))
            goto cleanup;
        bson_iter_t it;
        bson_t merged = BSON_INITIALIZER;
        if (!bson_iter_init_find(&it, &applied, "_id") && bson_iter_init_find(&it, &seed, "_id"))
            bson_append_value(&merged, "_id", 3, bson_iter_value(&it));
        bson_concat(&merged, &applied);
        bson_reinit(&applied);
        bson_concat(&applied, &merged);
        bson_destroy(&merged);
    } else {
        bool changed;
        if (!updater_apply(u, &seed, true, -1, &applied, &changed, err))
            goto cleanup;
    }
    ok = cmd_prepare_insert_doc(&applied, out, err);
cleanup:
    bson_destroy(&seed);
    bson_destroy(&applied);
    return ok;
}

/* Applies `u` to `old` in `c`. *modified tells whether the document changed. */
static bool crud_apply_one(view_t *view, collection_t *c, record_t *old, const matcher_t *m,
                           const updater_t *u, bool *modified, bson_t *new_doc, dberr_t *err)
{
    bson_t doc;
    int pos = -1;
    record_view(old, &doc);
    if (updater_is_positional(u)) /* the matched array index is for `$` only */
        matcher_matches(m, &doc, &pos);
    bool changed = false;
    if (!updater_apply(u, &doc, false, pos, new_doc, &changed, err))
        return false;
    *modified = changed;
    if (!changed)
        return true;
    if (new_doc->len > WIRE_MAX_BSON_OBJECT_SIZE)
        return dberr_set(err, 17419, "Resulting document after update is larger than %d",
                         WIRE_MAX_BSON_OBJECT_SIZE);
    /* change streams tell a replacement ("replace") from an update */
    store_observer_set_replacing(updater_kind(u) == UPDATER_REPLACEMENT);
    bool ok = view_replace(view, c, old, new_doc, err);
    store_observer_set_replacing(false);
    return ok;
}

/* Locks every target of a statement before it changes any of them. */
static bool crud_lock_all(view_t *view, collection_t *c, const recvec_t *recs, dberr_t *err)
{
    for (size_t i = 0; i < recs->len; i++) {
        if (!fiber_check(err)) /* nothing changed yet: a park reruns the statement */
            return false;
        bson_t doc;
        record_view(recs->items[i], &doc);
        if (!view_lock(view, c, &doc, err))
            return false;
    }
    return true;
}

/* For a multi-document statement that gave the loop back after it found
 * its targets: the current version of target `old` (re-checked against
 * the filter when another write changed it, as mongod does after a
 * yield), or NULL when it was deleted or no longer matches. Waits, slice
 * by slice, while a transaction holds the document's lock. False with
 * `err` when interrupted, when the wait passes the lock timeout, or when
 * the collection was dropped meanwhile. */
static bool crud_refetch(view_t *view, collection_t *c, record_t *old, const matcher_t *m,
                         record_t **out, dberr_t *err)
{
    *out = NULL;
    if (catalog_get(server.catalog, view->db, collection_name(c)) != c)
        return dberr_set(err, 175, "collection dropped: %s", collection_ns(c));
    bson_t doc;
    bson_iter_t it;
    record_view(old, &doc);
    if (!bson_iter_init_find(&it, &doc, "_id"))
        return true;
    bson_value_t id = *bson_iter_value(&it);
    uint64_t t0 = uv_hrtime();
    for (;;) {
        record_t *cur = collection_find_id(c, &id);
        if (!cur)
            return true;
        bson_t now;
        record_view(cur, &now);
        if (cur != old && !matcher_matches(m, &now, NULL))
            return true;
        if (view_lock(view, c, &now, err)) {
            *out = cur;
            return true;
        }
        if (err->code != VIEW_BLOCKED_CODE)
            return false;
        if (uv_hrtime() - t0 > (uint64_t)server.txn_lock_timeout_ms * 1000000u)
            return dberr_set(err, 24, "Unable to acquire lock on a document of %s within %d ms",
                             collection_ns(c), server.txn_lock_timeout_ms);
        dberr_clear(err);
        if (!fiber_yield_now(err))
            return false;
    }
}

static bool crud_parse_update_stmt(const bson_t *stmt, crud_update_stmt_t *s, dberr_t *err)
{
    bson_iter_t it;
    bool has_q = false, has_u = false;
    memset(s, 0, sizeof *s);
    if (!bson_iter_init(&it, stmt))
        return dberr_set(err, DBERR_INVALID_BSON, "invalid update statement");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "q") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !cmd_iter_doc(&it, &s->q))
                return cmd_wrong_type(err, &it, "type 'object'", "update.updates.q");
            has_q = true;
        } else if (strcmp(k, "u") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "Update argument must be either an object or an array");
            s->u = it;
            has_u = true;
        } else if (strcmp(k, "upsert") == 0) {
            s->upsert = bson_iter_as_bool(&it);
        } else if (strcmp(k, "multi") == 0) {
            s->multi = bson_iter_as_bool(&it);
        } else if (strcmp(k, "arrayFilters") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it) || !cmd_iter_doc(&it, &s->array_filters))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "arrayFilters must be an array");
            s->has_array_filters = true;
        } else if (strcmp(k, "hint") == 0) {
            if (BSON_ITER_HOLDS_UTF8(&it))
                s->hint_name = bson_iter_utf8(&it, NULL);
            else if (cmd_iter_doc(&it, &s->hint))
                s->has_hint = !bson_empty(&s->hint);
        } else if (strcmp(k, "collation") == 0) {
            s->collation = it;
            s->has_collation = true;
        } else if (strcmp(k, "c") == 0 || strcmp(k, "upsertSupplied") == 0) {
            /* accepted */
        } else {
            return dberr_set(err, 40415, "BSON field 'update.updates.%s' is an unknown field.", k);
        }
    }
    if (!has_q)
        return cmd_missing_field(err, "update.updates.q");
    if (!has_u)
        return cmd_missing_field(err, "update.updates.u");
    return true;
}

/* Runs one update statement; counts into `r`. */
static bool crud_update_one(const cmd_ctx_t *ctx, view_t *view, collection_t *c, uint32_t index,
                            const crud_update_stmt_t *s, crud_result_t *r, dberr_t *err)
{
    crud_plan_t pl;
    bool ok = false;
    crud_plan_init(&pl);
    if (!crud_plan_matcher(&pl, ctx, c, &s->q, s->has_collation ? &s->collation : NULL,
                           s->has_array_filters, err) ||
        !crud_plan_updater(&pl, ctx, &s->u, s->has_array_filters ? &s->array_filters : NULL,
                           err))
        goto cleanup;
    if (pl.coll) { /* the statement's strings compare by it */
        matcher_set_collation(pl.m, pl.coll);
        updater_set_collation(pl.u, pl.coll);
    }
    if (s->multi && updater_kind(pl.u) == UPDATER_REPLACEMENT) {
        dberr_set(err, DBERR_FAILED_TO_PARSE, "multi update is not supported for "
                                              "replacement-style update");
        goto cleanup;
    }
    if (s->has_sort && !(pl.sort = sortspec_new(&s->sort, err)))
        goto cleanup;
    if (!cmd_text_meta(pl.m, pl.sort, NULL, err))
        goto cleanup;
    if (pl.sort)
        sortspec_set_collation(pl.sort, pl.coll);
    collection_query_opts_t o = {0};
    o.matcher = pl.m;
    o.sort = pl.sort;
    o.limit = s->multi ? 0 : 1;
    o.hint = s->has_hint ? &s->hint : NULL;
    o.hint_name = s->hint_name;
    /* a single-document statement runs in one slice: find and write are one step */
    uint64_t y0 = fiber_yields(fiber_current());
    if (!s->multi)
        fiber_no_yield_begin();
    bool found = view_query(view, c, collection_name(c), &o, true, &pl.recs, NULL, err) &&
                 !matcher_take_error(pl.m, err);
    if (!s->multi)
        fiber_no_yield_end();
    if (!found)
        goto cleanup;
    if (pl.recs.len == 0 && s->upsert) {
        bson_t doc = BSON_INITIALIZER;
        bson_iter_t id;
        if (crud_upsert_doc(&s->q, pl.u, &doc, err) &&
            view_lock(view, c, &doc, err) && view_insert(view, c, &doc, err)) {
            bson_iter_init_find(&id, &doc, "_id");
            crud_add_upserted(r, index, bson_iter_value(&id));
            r->n++;
            ok = true;
        }
        bson_destroy(&doc);
        goto cleanup;
    }
    if (!crud_lock_all(view, c, &pl.recs, err))
        goto cleanup;
    for (size_t i = 0; i < pl.recs.len; i++) {
        record_t *target = pl.recs.items[i];
        if (!fiber_check(err))
            goto cleanup;
        /* (in a transaction every target is locked and as the snapshot
         * saw it, or the transaction's own version: nothing to re-read) */
        if (!view->txn && fiber_yields(fiber_current()) != y0) {
            if (!crud_refetch(view, c, pl.recs.items[i], pl.m, &target, err))
                goto cleanup;
            if (!target)
                continue;
        }
        bool modified = false;
        bson_t new_doc = BSON_INITIALIZER;
        bool one = crud_apply_one(view, c, target, pl.m, pl.u, &modified, &new_doc, err);
        bson_destroy(&new_doc);
        if (!one)
            goto cleanup;
        r->n++;
        if (modified)
            r->n_modified++;
    }
    ok = true;
cleanup:
    crud_plan_release(&pl, &s->q, &s->u);
    return ok;
}

/* One update statement: parsed, then run. */
static bool crud_update_stmt(cmd_ctx_t *ctx, const bson_iter_t *item, uint32_t index,
                             crud_result_t *r, void *arg, dberr_t *err)
{
    bson_t stmt;
    crud_update_stmt_t s;
    if (!BSON_ITER_HOLDS_DOCUMENT(item) || !cmd_iter_doc(item, &stmt))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "update statements must be objects");
    return crud_parse_update_stmt(&stmt, &s, err) &&
           crud_update_one(ctx, ctx->view, arg, index, &s, r, err);
}

bool cmd_update(cmd_ctx_t *ctx, dberr_t *err)
{
    /* mongod 7 parses the whole command (IDL) before running a statement:
     * `sort` (a MongoDB 8.0 statement field) fails the command at once */
    bson_iter_t ups, st;
    if (cmd_find(ctx, "updates", &ups) && BSON_ITER_HOLDS_ARRAY(&ups) &&
        bson_iter_recurse(&ups, &st)) {
        while (bson_iter_next(&st)) {
            bson_iter_t f;
            if (BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, &f) &&
                bson_iter_find(&f, "sort"))
                return dberr_set(err, 40415, "BSON field 'update.updates.sort' is an unknown "
                                             "field.");
        }
    }
    return crud_write_command(ctx, "updates", true, &server.ops.update, crud_update_stmt, err);
}

/* Runs one delete statement {q, limit}. */
static bool crud_delete_one(const cmd_ctx_t *ctx, view_t *view, collection_t *c,
                            const char *coll, const bson_t *stmt, crud_result_t *r, dberr_t *err)
{
    bson_iter_t it;
    bson_t q, hint;
    bson_iter_t coll_field;
    bool has_q = false, has_limit = false, has_hint = false, has_coll = false;
    const char *hint_name = NULL;
    int64_t limit = 0;
    bson_iter_init(&it, stmt);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "q") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !cmd_iter_doc(&it, &q))
                return cmd_wrong_type(err, &it, "type 'object'", "delete.deletes.q");
            has_q = true;
        } else if (strcmp(k, "limit") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it))
                return cmd_wrong_type(err, &it, "types '[long, int, decimal, double]'",
                                      "delete.deletes.limit");
            limit = bson_iter_as_int64(&it);
            has_limit = true;
        } else if (strcmp(k, "hint") == 0) {
            if (BSON_ITER_HOLDS_UTF8(&it))
                hint_name = bson_iter_utf8(&it, NULL);
            else if (cmd_iter_doc(&it, &hint))
                has_hint = !bson_empty(&hint);
        } else if (strcmp(k, "collation") == 0) {
            coll_field = it;
            has_coll = true;
        }
    }
    if (!has_q)
        return cmd_missing_field(err, "delete.deletes.q");
    if (!has_limit)
        return cmd_missing_field(err, "delete.deletes.limit");
    if (limit != 0 && limit != 1)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "The limit field in delete objects must be 0 or 1. Got %lld",
                         (long long)limit);
    collation_t *collation;
    if (!cmd_collation_resolve(c, has_coll ? &coll_field : NULL, &collation, err))
        return false;
    matcher_t *m = cmd_matcher_new(ctx, &q, err);
    if (m)
        matcher_set_collation(m, collation);
    collation_destroy(collation); /* the matcher holds its own reference */
    if (!m)
        return false;
    recvec_t recs;
    recvec_init(&recs);
    collection_query_opts_t o = {0};
    o.matcher = m;
    o.limit = limit;
    o.hint = has_hint ? &hint : NULL;
    o.hint_name = hint_name;
    uint64_t y0 = fiber_yields(fiber_current());
    if (limit == 1)
        fiber_no_yield_begin(); /* deleteOne: find and delete are one step */
    bool ok = view_query(view, c, coll, &o, true, &recs, NULL, err) &&
              !matcher_take_error(m, err) && (!c || crud_lock_all(view, c, &recs, err));
    if (limit == 1)
        fiber_no_yield_end();
    for (size_t i = 0; ok && i < recs.len; i++) {
        record_t *target = recs.items[i];
        if (!(ok = fiber_check(err)))
            break;
        if (!view->txn && fiber_yields(fiber_current()) != y0) {
            if (!(ok = crud_refetch(view, c, recs.items[i], m, &target, err)))
                break;
            if (!target)
                continue;
        }
        view_remove(view, c, target);
        r->n++;
    }
    recvec_destroy(&recs);
    matcher_destroy(m);
    return ok;
}

/* The collection a delete batch runs on (NULL when it does not exist). */
typedef struct crud_delete_target {
    collection_t *c;
    const char *coll;
} crud_delete_target_t;

/* One delete statement. */
static bool crud_delete_stmt(cmd_ctx_t *ctx, const bson_iter_t *item, uint32_t index,
                             crud_result_t *r, void *arg, dberr_t *err)
{
    crud_delete_target_t *t = arg;
    bson_t stmt;
    if (!BSON_ITER_HOLDS_DOCUMENT(item) || !cmd_iter_doc(item, &stmt))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "delete statements must be objects");
    if (!t->c && !ctx->view->txn)
        return true; /* nothing to delete in a collection that does not exist */
    return crud_delete_one(ctx, ctx->view, t->c, t->coll, &stmt, r, err);
}

bool cmd_delete(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t items;
    bool ordered;
    crud_delete_target_t t;
    if (!crud_batch(ctx, "deletes", &items, &ordered, err) ||
        !cmd_collection_name(ctx, &t.coll, err))
        return false;
    if (!catalog_valid_coll_name(ctx->db, t.coll, err))
        return false;
    t.c = catalog_get(server.catalog, ctx->db, t.coll);
    if (t.c && collection_is_view(t.c))
        return dberr_set(err, 166, "Namespace %s.%s is a view, not a collection", ctx->db, t.coll);
    return crud_run_batch(ctx, &items, ordered, false, &server.ops.delete_, crud_delete_stmt, &t,
                          err);
}

/* findAndModify's arguments. */
typedef struct crud_fam {
    bson_t query, sort, fields, array_filters, hint;
    bool has_sort, has_fields, has_array_filters, has_hint;
    const char *hint_name;
    bool remove, want_new, upsert, has_update;
    bson_iter_t update;
    bson_iter_t collation; /* the command's own (has_collation) */
    bool has_collation;
} crud_fam_t;

static bool crud_parse_fam(cmd_ctx_t *ctx, crud_fam_t *f, dberr_t *err)
{
    bool present;
    memset(f, 0, sizeof *f);
    if (!cmd_opt_doc(ctx, "query", &f->query, &present, err))
        return false;
    if (!present)
        bson_init(&f->query);
    if (!cmd_opt_doc(ctx, "sort", &f->sort, &f->has_sort, err))
        return false;
    if (!cmd_opt_doc(ctx, "fields", &f->fields, &f->has_fields, err))
        return false;
    if (!f->has_fields && !cmd_opt_doc(ctx, "projection", &f->fields, &f->has_fields, err))
        return false;
    if (!cmd_opt_bool(ctx, "remove", &f->remove, err) ||
        !cmd_opt_bool(ctx, "new", &f->want_new, err) ||
        !cmd_opt_bool(ctx, "upsert", &f->upsert, err))
        return false;
    bson_iter_t it;
    if (cmd_find(ctx, "update", &it) && !BSON_ITER_HOLDS_NULL(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "Update argument must be either an object or an array");
        f->update = it;
        f->has_update = true;
    }
    if (cmd_find(ctx, "arrayFilters", &it)) {
        if (!BSON_ITER_HOLDS_ARRAY(&it) || !cmd_iter_doc(&it, &f->array_filters))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "arrayFilters must be an array");
        f->has_array_filters = true;
    }
    if (cmd_find(ctx, "hint", &it)) {
        if (BSON_ITER_HOLDS_UTF8(&it))
            f->hint_name = bson_iter_utf8(&it, NULL);
        else if (cmd_iter_doc(&it, &f->hint))
            f->has_hint = !bson_empty(&f->hint);
    }
    f->has_collation = cmd_find(ctx, "collation", &f->collation);
    if (f->remove && f->has_update)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "Cannot specify both an update and "
                                                     "remove=true");
    if (!f->remove && !f->has_update)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Either an update or remove=true must be specified");
    if (f->remove && f->upsert)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "Cannot specify both upsert=true and "
                                                     "remove=true");
    if (f->remove && f->want_new)
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Cannot specify both new=true and remove=true; 'remove' always returns "
                         "the deleted document");
    if (f->has_array_filters && f->remove)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "Cannot specify arrayFilters and "
                                                     "remove=true");
    return true;
}

/* Appends `doc` (projected by `p` when set) as `value`. */
static bool crud_append_value(cmd_ctx_t *ctx, const bson_t *doc, projection_t *p,
                              const matcher_t *m, dberr_t *err)
{
    if (!doc) {
        BSON_APPEND_NULL(ctx->reply, "value");
        return true;
    }
    if (!p) {
        BSON_APPEND_DOCUMENT(ctx->reply, "value", doc);
        return true;
    }
    int pos = -1;
    if (projection_is_positional(p))
        matcher_matches(m, doc, &pos);
    bson_t out = BSON_INITIALIZER;
    bool ok = projection_apply(p, doc, pos, &out, err);
    if (ok)
        BSON_APPEND_DOCUMENT(ctx->reply, "value", &out);
    bson_destroy(&out);
    return ok;
}

bool cmd_find_and_modify(cmd_ctx_t *ctx, dberr_t *err)
{
    collection_t *c;
    crud_fam_t f;
    crud_plan_t pl;
    projection_t *p = NULL;
    bson_t new_doc = BSON_INITIALIZER;
    bool ok = false;
    crud_plan_init(&pl);
    if (!crud_parse_fam(ctx, &f, err) || !crud_collection(ctx, &c, err) ||
        !crud_plan_matcher(&pl, ctx, c, &f.query, f.has_collation ? &f.collation : NULL,
                           f.has_array_filters, err))
        goto cleanup;
    if (f.has_sort && !(pl.sort = sortspec_new(&f.sort, err)))
        goto cleanup;
    if (f.has_fields && !bson_empty(&f.fields) && !(p = projection_new(&f.fields, err)))
        goto cleanup;
    if (!cmd_text_meta(pl.m, pl.sort, p, err))
        goto cleanup;
    if (f.has_update &&
        !crud_plan_updater(&pl, ctx, &f.update, f.has_array_filters ? &f.array_filters : NULL,
                           err))
        goto cleanup;
    if (pl.coll) { /* the command's strings compare by it */
        matcher_set_collation(pl.m, pl.coll);
        if (pl.sort)
            sortspec_set_collation(pl.sort, pl.coll);
        if (p)
            projection_set_collation(p, pl.coll);
        if (pl.u)
            updater_set_collation(pl.u, pl.coll);
    }
    collection_query_opts_t o = {0};
    o.matcher = pl.m;
    o.sort = pl.sort;
    o.limit = 1;
    o.hint = f.has_hint ? &f.hint : NULL;
    o.hint_name = f.hint_name;
    fiber_no_yield_begin(); /* one document: find and write are one step */
    bool found = view_query(ctx->view, c, collection_name(c), &o, true, &pl.recs, NULL, err) &&
                 !matcher_take_error(pl.m, err);
    fiber_no_yield_end();
    if (!found)
        goto cleanup;
    bson_t le;
    if (pl.recs.len == 0) {
        if (f.upsert) {
            bson_iter_t id;
            if (!crud_upsert_doc(&f.query, pl.u, &new_doc, err) ||
                !view_lock(ctx->view, c, &new_doc, err) ||
                !view_insert(ctx->view, c, &new_doc, err))
                goto cleanup;
            bson_iter_init_find(&id, &new_doc, "_id");
            bson_append_document_begin(ctx->reply, "lastErrorObject", -1, &le);
            BSON_APPEND_INT32(&le, "n", 1);
            BSON_APPEND_BOOL(&le, "updatedExisting", false);
            bson_append_value(&le, "upserted", -1, bson_iter_value(&id));
            bson_append_document_end(ctx->reply, &le);
            ok = crud_append_value(ctx, f.want_new ? &new_doc : NULL, p, pl.m, err);
        } else {
            bson_append_document_begin(ctx->reply, "lastErrorObject", -1, &le);
            BSON_APPEND_INT32(&le, "n", 0);
            if (!f.remove)
                BSON_APPEND_BOOL(&le, "updatedExisting", false);
            bson_append_document_end(ctx->reply, &le);
            ok = crud_append_value(ctx, NULL, p, pl.m, err);
        }
        goto cleanup;
    }
    record_t *old = pl.recs.items[0]; /* recs keeps the old version alive */
    bson_t old_doc;
    record_view(old, &old_doc);
    if (!view_lock(ctx->view, c, &old_doc, err))
        goto cleanup;
    if (f.remove) {
        view_remove(ctx->view, c, old);
        bson_append_document_begin(ctx->reply, "lastErrorObject", -1, &le);
        BSON_APPEND_INT32(&le, "n", 1);
        bson_append_document_end(ctx->reply, &le);
        ok = crud_append_value(ctx, &old_doc, p, pl.m, err);
        goto cleanup;
    }
    bool modified;
    if (!crud_apply_one(ctx->view, c, old, pl.m, pl.u, &modified, &new_doc, err))
        goto cleanup;
    bson_append_document_begin(ctx->reply, "lastErrorObject", -1, &le);
    BSON_APPEND_INT32(&le, "n", 1);
    BSON_APPEND_BOOL(&le, "updatedExisting", true);
    bson_append_document_end(ctx->reply, &le);
    ok = crud_append_value(ctx, f.want_new && modified ? &new_doc : &old_doc, p, pl.m, err);
cleanup:
    bson_destroy(&new_doc);
    crud_plan_release(&pl, &f.query, &f.update);
    projection_destroy(p);
    return ok;
}
