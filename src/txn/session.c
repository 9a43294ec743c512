/* session: the session table (ordered map by lsid.id), transaction state
 * transitions, expiry, and retryable-write records in config.transactions. */
#include "txn/session.h"

#include <string.h>

#include "util/bsonview.h"
#include "util/log.h"
#include "util/omap.h"

#define SESSION_RETRY_DB "config"
#define SESSION_RETRY_COLL "transactions"

static omap_t *session_map;
static uint64_t session_next_age;
static void (*session_end_hook)(const uint8_t id[16]);

static omap_t *session_table(void)
{
    if (!session_map)
        session_map = omap_new();
    return session_map;
}

void session_set_end_hook(void (*hook)(const uint8_t id[16]))
{
    session_end_hook = hook;
}

bool session_parse_lsid(const bson_iter_t *lsid, uint8_t id[16], dberr_t *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(lsid) || !bson_iter_recurse(lsid, &it))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "lsid must be an object");
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "id") != 0)
            continue;
        bson_subtype_t sub;
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_BINARY(&it))
            break;
        bson_iter_binary(&it, &sub, &len, &data);
        if (len != 16 || sub != BSON_SUBTYPE_UUID)
            break;
        memcpy(id, data, 16);
        return true;
    }
    return dberr_set(err, DBERR_FAILED_TO_PARSE,
                     "BSON field 'lsid.id' is missing or not a UUID (binary subtype 4)");
}

session_t *session_find(const uint8_t id[16])
{
    return omap_get(session_table(), id, 16);
}

session_t *session_get(const uint8_t id[16], int64_t now_ms)
{
    session_t *s = session_find(id);
    if (!s) {
        s = bson_malloc0(sizeof *s);
        memcpy(s->id, id, 16);
        s->txn_number = -1;
        omap_insert(session_table(), id, 16, s);
    }
    s->last_used_ms = now_ms;
    return s;
}

void session_interrupt(session_t *s, int code, const char *msg, const char *why)
{
    if (!s->checkout || s->kill_code)
        return; /* idle, or the first kill wins (as fiber_kill) */
    s->kill_code = code;
    snprintf(s->kill_msg, sizeof s->kill_msg, "%s", msg);
    snprintf(s->kill_abort, sizeof s->kill_abort, "%s", why ? why : "");
    fiber_kill(s->checkout, code, msg);
}

void session_abort_txn(session_t *s, const char *reason)
{
    if (s->state != SESSION_TXN_IN_PROGRESS)
        return;
    if (s->checkout && s->checkout != fiber_current()) {
        /* its statement is running (perhaps suspended) and uses the
         * transaction: it ends first, then the abort is done */
        char msg[160];
        snprintf(msg, sizeof msg, "Transaction with { txnNumber: %lld } has been aborted%s%s",
                 (long long)s->txn_number, reason ? ": " : ".", reason ? reason : "");
        session_interrupt(s, DBERR_NO_SUCH_TRANSACTION, msg, reason);
        return;
    }
    txn_t *t = s->txn;
    s->txn = NULL;
    s->state = SESSION_TXN_ABORTED;
    snprintf(s->abort_reason, sizeof s->abort_reason, "%s", reason ? reason : "");
    if (reason)
        log_info("TXN", "transaction %lld aborted: %s", (long long)s->txn_number, reason);
    txn_destroy(t); /* releases locks and wakes their waiters */
}

void session_checkout(session_t *s, fiber_t *f)
{
    s->checkout = f;
    s->kill_code = 0;
    s->end_pending = false;
}

bool session_checkin(session_t *s, dberr_t *err)
{
    s->checkout = NULL;
    if (!s->kill_code)
        return true;
    int code = s->kill_code;
    s->kill_code = 0;
    dberr_set(err, code, "%s", s->kill_msg);
    if (code == DBERR_NO_SUCH_TRANSACTION)
        err->labels |= DBERR_LABEL_TRANSIENT_TXN;
    session_abort_txn(s, s->kill_abort[0] ? s->kill_abort : NULL);
    return false;
}

bool session_end_pending(session_t *s)
{
    if (!s->end_pending || s->checkout)
        return false;
    uint8_t id[16];
    memcpy(id, s->id, 16);
    session_end(id);
    return true;
}

void session_begin_txn(session_t *s, int64_t number, int64_t now_ms)
{
    session_abort_txn(s, NULL);
    s->txn_number = number;
    s->state = SESSION_TXN_IN_PROGRESS;
    s->abort_reason[0] = '\0';
    s->txn_opid = 0;
    s->txn_active_ns = 0;
    s->txn_read_concern[0] = '\0';
    s->txn = txn_new(++session_next_age, now_ms);
    txn_set_owner(s->txn, s);
}

static void session_free(session_t *s)
{
    session_abort_txn(s, NULL);
    if (s->noop_reply)
        bson_destroy(s->noop_reply);
    bson_free(s);
}

void session_end(const uint8_t id[16])
{
    session_t *s = session_find(id);
    if (s && s->checkout) {
        s->end_pending = true;
        session_interrupt(s, DBERR_INTERRUPTED, "operation was interrupted",
                          "its session was ended");
        return;
    }
    s = omap_remove(session_table(), id, 16);
    if (s)
        session_free(s);
    if (session_end_hook)
        session_end_hook(id);
}

void session_end_all(void)
{
    /* a checked-out session stays until its statement checks in */
    omap_node_t *n = omap_seek(session_table(), NULL, 0);
    while (n) {
        omap_node_t *next = omap_next(n);
        size_t klen;
        uint8_t id[16];
        memcpy(id, omap_node_key(n, &klen), 16);
        session_end(id);
        n = next;
    }
}

void session_reap(int64_t now_ms, int64_t lifetime_s)
{
    omap_node_t *n = omap_seek(session_table(), NULL, 0);
    while (n) {
        omap_node_t *next = omap_next(n);
        session_t *s = omap_node_value(n);
        if (s->state == SESSION_TXN_IN_PROGRESS &&
            now_ms - txn_started_ms(s->txn) > lifetime_s * 1000) {
            char why[128];
            snprintf(why, sizeof why,
                     "it exceeded transactionLifetimeLimitSeconds (%lld s)", (long long)lifetime_s);
            if (s->checkout) /* as mongod: its running statement is killed with 290 */
                session_interrupt(s, DBERR_TRANSACTION_EXCEEDED_LIFETIME,
                                  "operation was interrupted because the transaction exceeded "
                                  "transactionLifetimeLimitSeconds",
                                  why);
            else
                session_abort_txn(s, why);
        }
        if (s->checkout) {
            s->last_used_ms = now_ms; /* in use, not idle */
        } else if (now_ms - s->last_used_ms > (int64_t)SESSION_TIMEOUT_MINUTES * 60 * 1000) {
            uint8_t id[16];
            memcpy(id, s->id, 16);
            session_end(id);
        }
        n = next;
    }
}

void session_foreach(void (*fn)(const session_t *s, void *ctx), void *ctx)
{
    for (omap_node_t *n = omap_seek(session_table(), NULL, 0); n; n = omap_next(n))
        fn(omap_node_value(n), ctx);
}

size_t session_count(void)
{
    return omap_count(session_table());
}

size_t session_active_txns(void)
{
    size_t n = 0;
    for (omap_node_t *x = omap_seek(session_table(), NULL, 0); x; x = omap_next(x)) {
        session_t *s = omap_node_value(x);
        n += s->state == SESSION_TXN_IN_PROGRESS;
    }
    return n;
}

/* ---- retryable writes ---- */

/* Views the stored record of session `id` into `doc` (borrowed until the
 * next write to the record collection); false when there is none. */
static bool session_retry_view(catalog_t *cat, const uint8_t id[16], bson_t *doc)
{
    bson_value_t key = {.value_type = BSON_TYPE_BINARY};
    key.value.v_binary.subtype = BSON_SUBTYPE_UUID;
    key.value.v_binary.data = (uint8_t *)id;
    key.value.v_binary.data_len = 16;
    return catalog_view_id(cat, SESSION_RETRY_DB, SESSION_RETRY_COLL, &key, doc);
}

/* Stores the record of session `id`: `txn_number` and its `reply`, plus
 * `stmtsDone` when `stmts_done` is given (a batch begun and not finished). */
static bool session_retry_put(catalog_t *cat, const uint8_t id[16], int64_t txn_number,
                              const bson_t *reply, const uint32_t *stmts_done, dberr_t *err)
{
    collection_t *c = catalog_get_or_create(cat, SESSION_RETRY_DB, SESSION_RETRY_COLL, err);
    if (!c)
        return false;
    bson_t doc = BSON_INITIALIZER;
    bson_append_binary(&doc, "_id", 3, BSON_SUBTYPE_UUID, id, 16);
    BSON_APPEND_INT64(&doc, "txnNum", txn_number);
    BSON_APPEND_DOCUMENT(&doc, "reply", reply);
    if (stmts_done)
        BSON_APPEND_INT64(&doc, "stmtsDone", *stmts_done);
    bool ok = collection_put(c, &doc, err);
    bson_destroy(&doc);
    return ok;
}

int session_retry_lookup(catalog_t *cat, const uint8_t id[16], int64_t txn_number, bson_t *reply,
                         dberr_t *err)
{
    bson_t doc;
    bson_iter_t it;
    if (!session_retry_view(cat, id, &doc))
        return 0;
    int64_t stored = -1;
    if (bson_iter_init_find(&it, &doc, "txnNum"))
        stored = bson_iter_as_int64(&it);
    if (txn_number < stored) {
        dberr_set(err, DBERR_TRANSACTION_TOO_OLD,
                  "Retryable write with txnNumber %lld is prohibited on this session because a "
                  "newer retryable write with txnNumber %lld has already started on it",
                  (long long)txn_number, (long long)stored);
        return -1;
    }
    if (txn_number > stored)
        return 0; /* new */
    bson_t stored_reply;
    if (bson_iter_init_find(&it, &doc, "stmtsDone") ||
        !bsonview_field(&doc, "reply", &stored_reply))
        return 2; /* begun and not finished (session_retry_progress) */
    bson_concat(reply, &stored_reply);
    return 1;
}

void session_retry_remember(session_t *s, int64_t txn_number, const bson_t *reply)
{
    if (s->noop_reply)
        bson_reinit(s->noop_reply);
    else
        s->noop_reply = bson_new();
    bson_concat(s->noop_reply, reply);
    s->noop_txn = txn_number;
}

bool session_retry_recall(const session_t *s, int64_t txn_number, bson_t *reply)
{
    if (!s->noop_reply || s->noop_txn != txn_number)
        return false;
    bson_concat(reply, s->noop_reply);
    return true;
}

bool session_retry_record(catalog_t *cat, const uint8_t id[16], int64_t txn_number,
                          const bson_t *reply, dberr_t *err)
{
    return session_retry_put(cat, id, txn_number, reply, NULL, err);
}

bool session_retry_progress_record(catalog_t *cat, const uint8_t id[16], int64_t txn_number,
                                   uint32_t stmts_done, const bson_t *partial, dberr_t *err)
{
    return session_retry_put(cat, id, txn_number, partial, &stmts_done, err);
}

bool session_retry_progress(catalog_t *cat, const uint8_t id[16], int64_t txn_number,
                            uint32_t *stmts_done, bson_t *partial)
{
    bson_t doc, reply;
    bson_iter_t it;
    if (!session_retry_view(cat, id, &doc) ||
        !bson_iter_init_find(&it, &doc, "txnNum") || bson_iter_as_int64(&it) != txn_number ||
        !bson_iter_init_find(&it, &doc, "stmtsDone") || !BSON_ITER_HOLDS_INT64(&it) ||
        !bsonview_field(&doc, "reply", &reply))
        return false;
    *stmts_done = (uint32_t)bson_iter_int64(&it);
    bson_concat(partial, &reply);
    return true;
}
