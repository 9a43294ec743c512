/* drv_mongo.c: the bench's primitives for atomdb through libmongoc 1.23 —
 * documents as in the seeds (favCount-style counter, item stock, a seat map
 * "seats.r01c01": "N" | "Y:<owner>", agents' clientCount, play counts). */
#include "bench.h"
#include "mongo_stream.h"

#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MONGO_DB "bench"

/* One client's connection. */
typedef struct {
    mongoc_client_t *client;               /* one connection (single-threaded client) */
    mongoc_collection_t *coll[SCEN_COUNT]; /* the scenario's collection */
    mongoc_client_session_t *session;      /* for transactions, created on first use */
    bool in_txn;                           /* reads and writes join the transaction */
    bool transient;                        /* last failure was a write conflict */
    int64_t lock_token;                    /* fencing token of the lease held */
} mconn_t;

static const char *const mongo_colls[SCEN_COUNT] = {"counters", "items", "items",
                                                    "halls",    "agents", "plays"};

/* Field holding a slot's value. buf must hold 32 bytes. */
static const char *mongo_field(scen_t s, int slot, char *buf)
{
    switch (s) {
    case SCEN_COUNTER:
        return "n";
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000:
        return "stock";
    case SCEN_SEATS: {
        char key[8];
        scen_seat_key(slot, key);
        snprintf(buf, 32, "seats.%s", key);
        return buf;
    }
    case SCEN_HELPDESK:
        return "clientCount";
    default:
        return "count";
    }
}

/* _id of a slot's document (all seats live in hall 0). */
static int mongo_id(scen_t s, int slot)
{
    return (s == SCEN_HELPDESK || s == SCEN_PLAY_COUNTER) ? slot : 0;
}

/* Records a libmongoc error into err and the transient flag. */
static bool mongo_fail(mconn_t *m, const bson_error_t *e, const bson_t *reply, char *err)
{
    m->transient = e->code == 112 || e->code == 251 ||
                   (reply && mongoc_error_has_label(reply, "TransientTransactionError"));
    snprintf(err, ERRLEN, "%s (code %u)", e->message, e->code);
    return false;
}

/* Appends the seat string or the number for value. */
static void mongo_append_value(bson_t *b, const char *field, scen_t s, int64_t value)
{
    if (s == SCEN_SEATS) {
        char v[40];
        if (value == 0)
            snprintf(v, sizeof v, "N");
        else
            snprintf(v, sizeof v, "Y:%lld", (long long)value);
        BSON_APPEND_UTF8(b, field, v);
    } else {
        BSON_APPEND_INT64(b, field, value);
    }
}

/* Reads a value at iterator: numbers as is, seat strings "N"/"Y:<owner>". */
static int64_t mongo_iter_value(const bson_iter_t *it)
{
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *s = bson_iter_utf8(it, NULL);
        return s[0] == 'Y' && s[1] == ':' ? strtoll(s + 2, NULL, 10) : 0;
    }
    return bson_iter_as_int64(it);
}

/* Adds the session to opts when inside a transaction. */
static bool mongo_opts_session(mconn_t *m, bson_t *opts, char *err)
{
    bson_error_t e;
    if (m->in_txn && !mongoc_client_session_append(m->session, opts, &e))
        return mongo_fail(m, &e, NULL, err);
    return true;
}

bool drv_mongo_blocking_stream = false;

bool drv_mongo_create_user(int port, char *err, size_t errlen)
{
    char uri[200];
    snprintf(uri, sizeof uri, "mongodb://127.0.0.1:%d/?directConnection=true", port);
    mongoc_client_t *c = mongoc_client_new(uri);
    if (!c) {
        snprintf(err, errlen, "bad uri %s", uri);
        return false;
    }
    bson_t *cmd = BCON_NEW("createUser", BENCH_AUTH_USER, "pwd", BENCH_AUTH_PWD, "roles", "[",
                           "root", "]");
    bson_error_t e;
    bool ok = mongoc_client_command_simple(c, "admin", cmd, NULL, NULL, &e);
    if (!ok)
        snprintf(err, errlen, "createUser through the localhost exception: %s", e.message);
    bson_destroy(cmd);
    mongoc_client_destroy(c);
    return ok;
}

static void *mongo_connect(const engine_t *eng, const char *durability, char *err)
{
    char uri[300];
    snprintf(uri, sizeof uri,
             "mongodb://%s127.0.0.1:%d/?directConnection=true&serverSelectionTimeoutMS=10000"
             "&socketTimeoutMS=30000&connectTimeoutMS=10000&appname=atomdb-bench%s",
             bench_auth ? BENCH_AUTH_USER ":" BENCH_AUTH_PWD "@" : "", eng->port,
             bench_auth ? "&authSource=admin&authMechanism=SCRAM-SHA-256" : "");
    mconn_t *m = calloc(1, sizeof *m);
    m->client = mongoc_client_new(uri);
    if (!m->client) {
        snprintf(err, ERRLEN, "bad uri %s", uri);
        free(m);
        return NULL;
    }
    mongoc_client_set_error_api(m->client, MONGOC_ERROR_API_VERSION_2);
    if (drv_mongo_blocking_stream)
        mongoc_client_set_stream_initiator(m->client, mongo_stream_initiator, NULL);
    for (int s = 0; s < SCEN_COUNT; s++)
        m->coll[s] = mongoc_client_get_collection(m->client, MONGO_DB, mongo_colls[s]);
    bson_t ping = BSON_INITIALIZER;
    BSON_APPEND_INT32(&ping, "ping", 1);
    bson_error_t e;
    bool ok = mongoc_client_command_simple(m->client, "admin", &ping, NULL, NULL, &e);
    bson_destroy(&ping);
    if (!ok) {
        snprintf(err, ERRLEN, "ping: %s", e.message);
        for (int s = 0; s < SCEN_COUNT; s++)
            mongoc_collection_destroy(m->coll[s]);
        mongoc_client_destroy(m->client);
        free(m);
        return NULL;
    }
    return m;
}

static void mongo_disconnect(void *c)
{
    mconn_t *m = c;
    if (!m)
        return;
    if (m->session)
        mongoc_client_session_destroy(m->session);
    for (int s = 0; s < SCEN_COUNT; s++)
        mongoc_collection_destroy(m->coll[s]);
    mongoc_client_destroy(m->client);
    free(m);
}

static bool mongo_setup(void *c, scen_t s, char *err)
{
    mconn_t *m = c;
    bson_error_t e;
    mongoc_collection_t *coll = m->coll[s];
    if (!mongoc_collection_drop(coll, &e) && e.code != 26)
        return mongo_fail(m, &e, NULL, err);
    bson_t *docs[AGENTS];
    int n = 0;
    switch (s) {
    case SCEN_COUNTER:
        docs[n++] = BCON_NEW("_id", BCON_INT32(0), "n", BCON_INT64(0), "v", BCON_INT64(0));
        break;
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000:
        docs[n++] = BCON_NEW("_id", BCON_INT32(0), "stock", BCON_INT64(scen_initial(s)), "v",
                             BCON_INT64(0));
        break;
    case SCEN_SEATS: {
        bson_t *d = bson_new(), seats;
        BSON_APPEND_INT32(d, "_id", 0);
        BSON_APPEND_DOCUMENT_BEGIN(d, "seats", &seats);
        for (int k = 0; k < SEATS; k++) {
            char key[8];
            scen_seat_key(k, key);
            BSON_APPEND_UTF8(&seats, key, "N");
        }
        bson_append_document_end(d, &seats);
        BSON_APPEND_INT64(d, "v", 0);
        docs[n++] = d;
        break;
    }
    case SCEN_HELPDESK:
        for (int k = 0; k < AGENTS; k++)
            docs[n++] = BCON_NEW("_id", BCON_INT32(k), "clientCount", BCON_INT64(0), "max",
                                 BCON_INT32(AGENT_CAPACITY), "v", BCON_INT64(0));
        break;
    default:
        break;
    }
    bool ok = true;
    if (n > 0 &&
        !mongoc_collection_insert_many(coll, (const bson_t **)docs, (size_t)n, NULL, NULL, &e))
        ok = mongo_fail(m, &e, NULL, err);
    for (int i = 0; i < n; i++)
        bson_destroy(docs[i]);
    return ok;
}

static bool mongo_read(void *c, scen_t s, int slot, bool lock, slot_read_t *out, char *err)
{
    mconn_t *m = c;
    char fbuf[32];
    const char *field = mongo_field(s, slot, fbuf);
    bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, proj;
    bson_error_t e;
    bool ok = true;
    const bson_t *doc = NULL;
    bson_t fam_reply = BSON_INITIALIZER, valdoc;
    mongoc_cursor_t *cur = NULL;
    BSON_APPEND_INT32(&filter, "_id", mongo_id(s, slot));
    out->exists = false;
    out->value = 0;
    out->version = 0;
    if (!mongo_opts_session(m, &opts, err)) {
        ok = false;
        goto cleanup;
    }
    if (lock) {
        /* MongoDB's way to lock a document in a transaction: write to it. */
        bson_t *update = BCON_NEW("$inc", "{", "lk", BCON_INT32(1), "}");
        mongoc_find_and_modify_opts_t *fo = mongoc_find_and_modify_opts_new();
        mongoc_find_and_modify_opts_set_update(fo, update);
        mongoc_find_and_modify_opts_set_flags(
            fo, MONGOC_FIND_AND_MODIFY_RETURN_NEW | MONGOC_FIND_AND_MODIFY_UPSERT);
        mongoc_find_and_modify_opts_append(fo, &opts);
        bson_destroy(&fam_reply);
        ok = mongoc_collection_find_and_modify_with_opts(m->coll[s], &filter, fo, &fam_reply, &e);
        mongoc_find_and_modify_opts_destroy(fo);
        bson_destroy(update);
        if (!ok) {
            mongo_fail(m, &e, &fam_reply, err);
            goto cleanup;
        }
        bson_iter_t it;
        if (bson_iter_init_find(&it, &fam_reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uint32_t len;
            const uint8_t *data;
            bson_iter_document(&it, &len, &data);
            if (bson_init_static(&valdoc, data, len))
                doc = &valdoc;
        }
    } else {
        BSON_APPEND_INT32(&opts, "limit", 1);
        BSON_APPEND_BOOL(&opts, "singleBatch", true);
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
        BSON_APPEND_INT32(&proj, field, 1);
        BSON_APPEND_INT32(&proj, "v", 1);
        bson_append_document_end(&opts, &proj);
        cur = mongoc_collection_find_with_opts(m->coll[s], &filter, &opts, NULL);
        if (!mongoc_cursor_next(cur, &doc)) {
            const bson_t *edoc = NULL;
            doc = NULL;
            if (mongoc_cursor_error_document(cur, &e, &edoc)) {
                ok = mongo_fail(m, &e, edoc, err);
                goto cleanup;
            }
        }
    }
    if (doc) {
        bson_iter_t it, f;
        out->exists = true;
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, field, &f))
            out->value = mongo_iter_value(&f);
        if (bson_iter_init_find(&it, doc, "v"))
            out->version = bson_iter_as_int64(&it);
    }
cleanup:
    mongoc_cursor_destroy(cur);
    bson_destroy(&fam_reply);
    bson_destroy(&filter);
    bson_destroy(&opts);
    return ok;
}

/* update_one; *modified gets modifiedCount + upsertedCount. */
static bool mongo_update(mconn_t *m, scen_t s, const bson_t *filter, const bson_t *update,
                         bool upsert, int64_t *modified, char *err)
{
    bson_t opts = BSON_INITIALIZER, reply;
    bson_error_t e;
    bool ok = mongo_opts_session(m, &opts, err);
    if (ok && upsert)
        BSON_APPEND_BOOL(&opts, "upsert", true);
    if (ok) {
        ok = mongoc_collection_update_one(m->coll[s], filter, update, &opts, &reply, &e);
        if (!ok) {
            mongo_fail(m, &e, &reply, err);
        } else if (modified) {
            bson_iter_t it;
            *modified = 0;
            if (bson_iter_init_find(&it, &reply, "modifiedCount"))
                *modified += bson_iter_as_int64(&it);
            if (bson_iter_init_find(&it, &reply, "upsertedCount"))
                *modified += bson_iter_as_int64(&it);
        }
        bson_destroy(&reply);
    }
    bson_destroy(&opts);
    return ok;
}

static bool mongo_write(void *c, scen_t s, int slot, int64_t value, char *err)
{
    mconn_t *m = c;
    char fbuf[32];
    const char *field = mongo_field(s, slot, fbuf);
    bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set, inc;
    BSON_APPEND_INT32(&filter, "_id", mongo_id(s, slot));
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    mongo_append_value(&set, field, s, value);
    bson_append_document_end(&update, &set);
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "v", 1);
    bson_append_document_end(&update, &inc);
    bool ok = mongo_update(m, s, &filter, &update, true, NULL, err);
    bson_destroy(&filter);
    bson_destroy(&update);
    return ok;
}

static bool mongo_atomic(void *c, scen_t s, int slot, int64_t *out, char *err)
{
    mconn_t *m = c;
    char fbuf[32];
    const char *field = mongo_field(s, slot, fbuf);
    bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, inc;
    bool ok;
    BSON_APPEND_INT32(&filter, "_id", mongo_id(s, slot));
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
    BSON_APPEND_INT64(&inc, field, 1);
    bson_append_document_end(&update, &inc);
    if (s != SCEN_PLAY_COUNTER) {
        ok = mongo_update(m, s, &filter, &update, false, NULL, err);
    } else {
        /* Seed 003: upsert + $inc, new: true returns the count atomically. */
        bson_t reply;
        bson_error_t e;
        mongoc_find_and_modify_opts_t *fo = mongoc_find_and_modify_opts_new();
        mongoc_find_and_modify_opts_set_update(fo, &update);
        mongoc_find_and_modify_opts_set_flags(
            fo, MONGOC_FIND_AND_MODIFY_UPSERT | MONGOC_FIND_AND_MODIFY_RETURN_NEW);
        ok = mongoc_collection_find_and_modify_with_opts(m->coll[s], &filter, fo, &reply, &e);
        if (!ok) {
            mongo_fail(m, &e, &reply, err);
        } else {
            bson_iter_t it, f;
            *out = 0;
            if (bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "value.count", &f))
                *out = bson_iter_as_int64(&f);
            else
                ok = (snprintf(err, ERRLEN, "findAndModify returned no value"), false);
        }
        bson_destroy(&reply);
        mongoc_find_and_modify_opts_destroy(fo);
    }
    bson_destroy(&filter);
    bson_destroy(&update);
    return ok;
}

static bool mongo_conditional(void *c, scen_t s, int slot, int64_t token, bool *won, char *err)
{
    mconn_t *m = c;
    char fbuf[32];
    const char *field = mongo_field(s, slot, fbuf);
    bson_t *filter, *update = NULL;
    int id = mongo_id(s, slot);
    switch (s) {
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000:
        filter = BCON_NEW("_id", BCON_INT32(id), "stock", "{", "$gte", BCON_INT32(1), "}");
        update = BCON_NEW("$inc", "{", "stock", BCON_INT32(-1), "}");
        break;
    case SCEN_HELPDESK:
        filter = BCON_NEW("_id", BCON_INT32(id), "clientCount", "{", "$lt",
                          BCON_INT32(AGENT_CAPACITY), "}");
        update = BCON_NEW("$inc", "{", "clientCount", BCON_INT32(1), "}");
        break;
    default: { /* seats: seed 000's {_id, "seats.101": "N"} -> $set */
        bson_t set;
        filter = BCON_NEW("_id", BCON_INT32(id), field, BCON_UTF8("N"));
        update = bson_new();
        BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
        mongo_append_value(&set, field, s, token);
        bson_append_document_end(update, &set);
        break;
    }
    }
    int64_t modified = 0;
    bool ok = mongo_update(m, s, filter, update, false, &modified, err);
    *won = modified > 0;
    bson_destroy(filter);
    bson_destroy(update);
    return ok;
}

static bool mongo_cas(void *c, scen_t s, int slot, const slot_read_t *seen, int64_t value,
                      bool *won, char *err)
{
    mconn_t *m = c;
    char fbuf[32];
    const char *field = mongo_field(s, slot, fbuf);
    int id = mongo_id(s, slot);
    bool ok;
    *won = false;
    if (!seen->exists) {
        /* First play of an id: the insert itself is the compare-and-set. */
        bson_t doc = BSON_INITIALIZER, reply;
        bson_error_t e;
        BSON_APPEND_INT32(&doc, "_id", id);
        BSON_APPEND_INT64(&doc, field, value);
        BSON_APPEND_INT64(&doc, "v", 1);
        ok = mongoc_collection_insert_one(m->coll[s], &doc, NULL, &reply, &e);
        if (ok)
            *won = true;
        else if (e.code == 11000)
            ok = true;
        else
            mongo_fail(m, &e, &reply, err);
        bson_destroy(&reply);
        bson_destroy(&doc);
        return ok;
    }
    bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, set, inc;
    BSON_APPEND_INT32(&filter, "_id", id);
    BSON_APPEND_INT64(&filter, "v", seen->version);
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    mongo_append_value(&set, field, s, value);
    bson_append_document_end(&update, &set);
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "v", 1);
    bson_append_document_end(&update, &inc);
    int64_t modified = 0;
    ok = mongo_update(m, s, &filter, &update, false, &modified, err);
    *won = modified > 0;
    bson_destroy(&filter);
    bson_destroy(&update);
    return ok;
}

static bool mongo_txn_begin(void *c, bool snapshot, char *err)
{
    mconn_t *m = c;
    bson_error_t e;
    if (!m->session) {
        m->session = mongoc_client_start_session(m->client, NULL, &e);
        if (!m->session)
            return mongo_fail(m, &e, NULL, err);
    }
    if (!mongoc_client_session_start_transaction(m->session, NULL, &e))
        return mongo_fail(m, &e, NULL, err);
    m->in_txn = true;
    return true;
}

static bool mongo_txn_commit(void *c, bool *retry, char *err)
{
    mconn_t *m = c;
    bson_t reply;
    bson_error_t e;
    m->in_txn = false;
    bool ok = mongoc_client_session_commit_transaction(m->session, &reply, &e);
    if (!ok) {
        mongo_fail(m, &e, &reply, err);
        *retry = m->transient;
        if (mongoc_client_session_in_transaction(m->session))
            mongoc_client_session_abort_transaction(m->session, NULL);
    }
    bson_destroy(&reply);
    return ok;
}

static void mongo_txn_abort(void *c)
{
    mconn_t *m = c;
    m->in_txn = false;
    if (m->session && mongoc_client_session_in_transaction(m->session))
        mongoc_client_session_abort_transaction(m->session, NULL);
}

static bool mongo_lock(void *c, const char *name, int client, bool *got, char *err)
{
    mconn_t *m = c;
    char owner[32];
    snprintf(owner, sizeof owner, "client-%d", client);
    bson_t *cmd = BCON_NEW("acquireLock", BCON_UTF8(name), "owner", BCON_UTF8(owner), "leaseMs",
                           BCON_INT64(5000), "waitMs", BCON_INT64(2000));
    bson_t reply;
    bson_error_t e;
    bool ok = mongoc_client_command_simple(m->client, "admin", cmd, NULL, &reply, &e);
    if (!ok) {
        mongo_fail(m, &e, &reply, err);
    } else {
        bson_iter_t it;
        *got = bson_iter_init_find(&it, &reply, "acquired") && bson_iter_as_bool(&it);
        if (*got && bson_iter_init_find(&it, &reply, "token"))
            m->lock_token = bson_iter_as_int64(&it);
    }
    bson_destroy(&reply);
    bson_destroy(cmd);
    return ok;
}

static bool mongo_unlock(void *c, const char *name, char *err)
{
    mconn_t *m = c;
    bson_t *cmd = BCON_NEW("releaseLock", BCON_UTF8(name), "token", BCON_INT64(m->lock_token));
    bson_t reply;
    bson_error_t e;
    bool ok = mongoc_client_command_simple(m->client, "admin", cmd, NULL, &reply, &e);
    if (!ok)
        mongo_fail(m, &e, &reply, err);
    bson_destroy(&reply);
    bson_destroy(cmd);
    return ok;
}

static bool mongo_final_state(void *c, scen_t s, int64_t *vals, int nslots, char *err)
{
    mconn_t *m = c;
    bson_t filter = BSON_INITIALIZER;
    bson_error_t e;
    const bson_t *doc;
    memset(vals, 0, sizeof *vals * (size_t)nslots);
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(m->coll[s], &filter, NULL, NULL);
    char fbuf[32];
    const char *field = mongo_field(s, 0, fbuf);
    while (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it, f;
        int id = bson_iter_init_find(&it, doc, "_id") ? (int)bson_iter_as_int64(&it) : -1;
        if (s == SCEN_SEATS) {
            bson_iter_t seats;
            if (bson_iter_init_find(&it, doc, "seats") && bson_iter_recurse(&it, &seats)) {
                while (bson_iter_next(&seats)) {
                    int r, col;
                    if (sscanf(bson_iter_key(&seats), "r%2dc%2d", &r, &col) == 2 && r >= 1 &&
                        r <= SEAT_ROWS && col >= 1 && col <= SEAT_COLS)
                        vals[(r - 1) * SEAT_COLS + col - 1] = mongo_iter_value(&seats);
                }
            }
        } else if (id >= 0 && id < nslots && bson_iter_init(&it, doc) &&
                   bson_iter_find_descendant(&it, field, &f)) {
            vals[id] = mongo_iter_value(&f);
        }
    }
    bool ok = !mongoc_cursor_error(cur, &e);
    if (!ok)
        snprintf(err, ERRLEN, "%s", e.message);
    mongoc_cursor_destroy(cur);
    bson_destroy(&filter);
    return ok;
}

/* Runs a transaction that writes a probe document, checks that the write is
 * invisible outside before commit, and commits it. Returns NULL or a reason. */
static const char *mongo_probe_txn(mconn_t *m, char *reason, size_t len)
{
    char err[ERRLEN];
    mongoc_collection_t *probe = mongoc_client_get_collection(m->client, MONGO_DB, "probe");
    bson_error_t e;
    mongoc_collection_drop(probe, &e);
    const char *res = NULL;
    if (!mongo_txn_begin(m, true, err)) {
        snprintf(reason, len, "no transactions: %s", err);
        res = reason;
        goto cleanup;
    }
    bson_t opts = BSON_INITIALIZER, reply;
    bson_t *doc = BCON_NEW("_id", BCON_INT32(1));
    mongoc_client_session_append(m->session, &opts, NULL);
    bool ok = mongoc_collection_insert_one(probe, doc, &opts, &reply, &e);
    bson_destroy(&reply);
    bson_destroy(&opts);
    bson_destroy(doc);
    if (!ok) {
        mongo_txn_abort(m);
        snprintf(reason, len, "no transactions: insert in a transaction failed: %s (code %u)",
                 e.message, e.code);
        res = reason;
        goto cleanup;
    }
    bson_t empty = BSON_INITIALIZER;
    int64_t outside = mongoc_collection_count_documents(probe, &empty, NULL, NULL, NULL, &e);
    bson_destroy(&empty);
    bool retry = false;
    if (!mongo_txn_commit(m, &retry, err)) {
        snprintf(reason, len, "no transactions: %s", err);
        res = reason;
    } else if (outside != 0) {
        snprintf(reason, len, "transactions not isolated: an uncommitted write was visible");
        res = reason;
    }
cleanup:
    mongoc_collection_drop(probe, &e);
    mongoc_collection_destroy(probe);
    return res;
}

static void mongo_probe(void *c, engine_t *eng)
{
    mconn_t *m = c;
    char reason[160];
    if (mongo_probe_txn(m, reason, sizeof reason))
    {
        snprintf(eng->na[STRAT_PESSIMISTIC], sizeof eng->na[0], "%s", reason);
        snprintf(eng->na[STRAT_SNAPSHOT_TXN], sizeof eng->na[0], "%s", reason);
    }
    char err[ERRLEN];
    bool got = false;
    if (!mongo_lock(m, "bench:probe", 0, &got, err))
        snprintf(eng->na[STRAT_LEASE_LOCK], sizeof eng->na[0], "no lease locks: %s", err);
    else if (!got)
        snprintf(eng->na[STRAT_LEASE_LOCK], sizeof eng->na[0],
                 "acquireLock did not grant a free lock");
    else if (!mongo_unlock(m, "bench:probe", err))
        snprintf(eng->na[STRAT_LEASE_LOCK], sizeof eng->na[0], "releaseLock: %s", err);
}

static bool mongo_last_transient(void *c)
{
    return ((mconn_t *)c)->transient;
}

const driver_t drv_mongo = {
    .name = "atomdb",
    .client = "libmongoc",
    .connect = mongo_connect,
    .disconnect = mongo_disconnect,
    .setup = mongo_setup,
    .read = mongo_read,
    .write = mongo_write,
    .atomic = mongo_atomic,
    .conditional = mongo_conditional,
    .cas = mongo_cas,
    .txn_begin = mongo_txn_begin,
    .txn_commit = mongo_txn_commit,
    .txn_abort = mongo_txn_abort,
    .lock = mongo_lock,
    .unlock = mongo_unlock,
    .final_state = mongo_final_state,
    .probe = mongo_probe,
    .last_transient = mongo_last_transient,
};
