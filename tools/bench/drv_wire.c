/* drv_wire.c: the bench's primitives for atomdb through a minimal wire client
 * (`--client wire`) — what hiredis is to Redis and libpq to PostgreSQL, so the
 * bench can measure the server apart from libmongoc's client cost (issue 17).
 *
 * Each operation shape (find / update / findAndModify / insert of one
 * scenario, outside or inside a transaction) is built once with libbson into
 * a complete OP_MSG frame holding sentinel values; the sentinels' offsets are
 * remembered, and each request patches the request id and its values (_id,
 * seat key, value, version, txnNumber) into the frame and sends it with one
 * blocking send(). Replies are read with blocking recv() into a buffer (one
 * call per reply when it fits) and checked as libmongoc's callers check them:
 * ok, writeErrors, n / nModified / upserted, the returned document — so the
 * invariants are still verified from what the clients were told.
 *
 * Every command carries the connection's lsid, and every write outside a
 * transaction a new txnNumber, as libmongoc sends them (implicit sessions,
 * retryable writes), so the server does the same work for both clients.
 * Seat owners are written as "Y:" + 13 zero-padded digits (a fixed width, so
 * the frame can be patched); readers parse the number either way. Set-up,
 * the final state, locks and commits are built per call (not hot); the
 * capability probe runs through libmongoc. --auth is refused (no SCRAM). */
#include "bench.h"

#include <bson/bson.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WIRE_DB "bench"
#define WIRE_OP_MSG 2013
#define WIRE_SEATVAL_DIGITS 13

/* Sentinels the templates are built with, found again by memmem. */
#define WIRE_S_I32 0x5EED0A00     /* + param index */
#define WIRE_S_I64 0x5EED5EED0B00LL /* + param index */
#define WIRE_S_SEATKEY "r99c99"
#define WIRE_S_SEATVAL "Y:9999999999999"

/* Operation shapes. */
typedef enum {
    WOP_FIND,      /* find {_id}, projection {field, v} */
    WOP_FAM_LOCK,  /* findAndModify {_id} $inc lk, upsert, new (locking read) */
    WOP_WRITE,     /* update {_id} $set field, $inc v, upsert */
    WOP_INC,       /* update {_id} $inc field 1 */
    WOP_FAM_INC,   /* findAndModify {_id} $inc count, upsert, new (play counter) */
    WOP_COND,      /* update with the scenario's condition */
    WOP_CAS,       /* update {_id, v} $set field, $inc v */
    WOP_INSERT,    /* insert {_id, field, v: 1} (first play) */
    WOP_COUNT
} wop_t;

/* What a patch point holds. */
typedef enum { WP_I32, WP_I64, WP_SEATKEY, WP_SEATVAL, WP_VALUE, WP_TXN } wpkind_t;

#define WIRE_MAX_PATCH 8

/* One prebuilt frame. */
typedef struct {
    uint8_t *frame;                 /* the whole OP_MSG message (owned) */
    uint32_t len;                   /* its length */
    uint32_t off[WIRE_MAX_PATCH];   /* offset of each parameter's bytes */
    wpkind_t kind[WIRE_MAX_PATCH];  /* what each parameter is */
    int nparam;
} wtmpl_t;

/* Parameters of one request, in the order the builder used them. */
typedef struct {
    int64_t v[WIRE_MAX_PATCH];
    int n;
} wparams_t;

/* One client's connection. */
typedef struct {
    int fd;
    int32_t next_id;                       /* request id */
    uint8_t lsid[16];                      /* session id (UUID) */
    int64_t txn_number;                    /* last txnNumber used on this session */
    int txn_state;                         /* 0 none, 1 begun (next op starts it), 2 running */
    bool transient;                        /* last failure was a write conflict */
    int64_t lock_token;                    /* fencing token of the lease held */
    wtmpl_t tmpl[WOP_COUNT][SCEN_COUNT][3]; /* [op][scenario][0 plain, 1 txn start, 2 in txn] */
    uint8_t *rbuf;                         /* receive buffer */
    size_t rcap, rlen, roff;               /* its size, bytes held, bytes consumed */
    uint8_t *reply;                        /* the last reply's body (points into rbuf or rbig) */
    uint8_t *rbig;                         /* a reply larger than rbuf (owned) */
    bson_t doc;                            /* the last reply's document (static) */
} wconn_t;

static const char *const wire_colls[SCEN_COUNT] = {"counters", "items", "items",
                                                   "halls",    "agents", "plays"};

__attribute__((format(printf, 2, 3))) static bool wire_err(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, ERRLEN, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- building frames ---- */

/* Appends the session (and transaction) fields. mode: 0 plain, 1 start, 2 in
 * a transaction; txn_param: index of the txnNumber parameter, or -1. */
static void wire_append_session(wconn_t *w, bson_t *b, int mode, bool write, wparams_t *p)
{
    bson_t lsid;
    BSON_APPEND_DOCUMENT_BEGIN(b, "lsid", &lsid);
    bson_append_binary(&lsid, "id", 2, BSON_SUBTYPE_UUID, w->lsid, 16);
    bson_append_document_end(b, &lsid);
    if (mode || write) {
        BSON_APPEND_INT64(b, "txnNumber", WIRE_S_I64 + p->n);
        p->n++;
    }
    if (mode == 1)
        BSON_APPEND_BOOL(b, "startTransaction", true);
    if (mode)
        BSON_APPEND_BOOL(b, "autocommit", false);
}

/* Appends a slot's value: the seat string sentinel, or an int64 sentinel. */
static void wire_append_value(bson_t *b, const char *field, scen_t s, wparams_t *p)
{
    if (s == SCEN_SEATS)
        BSON_APPEND_UTF8(b, field, WIRE_S_SEATVAL);
    else
        BSON_APPEND_INT64(b, field, WIRE_S_I64 + p->n);
    p->n++;
}

/* The field of a scenario (seats: the sentinel key). buf: 32 bytes. */
static const char *wire_field(scen_t s, char *buf)
{
    switch (s) {
    case SCEN_COUNTER:
        return "n";
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000:
        return "stock";
    case SCEN_SEATS:
        snprintf(buf, 32, "seats.%s", WIRE_S_SEATKEY);
        return buf;
    case SCEN_HELPDESK:
        return "clientCount";
    default:
        return "count";
    }
}

/* Builds the command of an operation shape with sentinels; the parameter
 * order is: _id (i32), then per shape (see wire_op), then txnNumber. kinds
 * gets each parameter's kind. */
static void wire_build(wconn_t *w, wop_t op, scen_t s, int mode, bson_t *b, wpkind_t *kinds,
                       int *nk)
{
    char fbuf[32];
    const char *field = wire_field(s, fbuf);
    const char *coll = wire_colls[s];
    bool seats = s == SCEN_SEATS;
    wparams_t p = {{0}, 0};
    bson_t q, u, d1, d2, arr, st;
    int k = 0;
#define WIRE_ID(doc) (BSON_APPEND_INT32(doc, "_id", WIRE_S_I32 + p.n), p.n++, kinds[k++] = WP_I32)
#define WIRE_SEATPARAM() (seats ? (void)(kinds[k++] = WP_SEATKEY) : (void)0)
    /* the seat key is found by its sentinel text, not counted in p.n */
    switch (op) {
    case WOP_FIND:
        BSON_APPEND_UTF8(b, "find", coll);
        BSON_APPEND_DOCUMENT_BEGIN(b, "filter", &q);
        WIRE_ID(&q);
        bson_append_document_end(b, &q);
        BSON_APPEND_DOCUMENT_BEGIN(b, "projection", &d1);
        BSON_APPEND_INT32(&d1, field, 1);
        BSON_APPEND_INT32(&d1, "v", 1);
        bson_append_document_end(b, &d1);
        WIRE_SEATPARAM();
        BSON_APPEND_INT32(b, "limit", 1);
        BSON_APPEND_BOOL(b, "singleBatch", true);
        break;
    case WOP_FAM_LOCK:
    case WOP_FAM_INC:
        BSON_APPEND_UTF8(b, "findAndModify", coll);
        BSON_APPEND_DOCUMENT_BEGIN(b, "query", &q);
        WIRE_ID(&q);
        bson_append_document_end(b, &q);
        BSON_APPEND_DOCUMENT_BEGIN(b, "update", &u);
        BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &d1);
        if (op == WOP_FAM_LOCK)
            BSON_APPEND_INT32(&d1, "lk", 1);
        else
            BSON_APPEND_INT64(&d1, field, 1);
        bson_append_document_end(&u, &d1);
        bson_append_document_end(b, &u);
        BSON_APPEND_BOOL(b, "new", true);
        BSON_APPEND_BOOL(b, "upsert", true);
        break;
    case WOP_INSERT:
        BSON_APPEND_UTF8(b, "insert", coll);
        BSON_APPEND_ARRAY_BEGIN(b, "documents", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &d1);
        WIRE_ID(&d1);
        BSON_APPEND_INT64(&d1, field, WIRE_S_I64 + p.n);
        p.n++;
        kinds[k++] = WP_VALUE;
        BSON_APPEND_INT64(&d1, "v", 1);
        bson_append_document_end(&arr, &d1);
        bson_append_array_end(b, &arr);
        BSON_APPEND_BOOL(b, "ordered", true);
        break;
    default: /* the update shapes */
        BSON_APPEND_UTF8(b, "update", coll);
        BSON_APPEND_ARRAY_BEGIN(b, "updates", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &st);
        BSON_APPEND_DOCUMENT_BEGIN(&st, "q", &q);
        WIRE_ID(&q);
        if (op == WOP_CAS) {
            BSON_APPEND_INT64(&q, "v", WIRE_S_I64 + p.n);
            p.n++;
            kinds[k++] = WP_I64;
        } else if (op == WOP_COND) {
            if (s == SCEN_FLASH_SALE_1 || s == SCEN_FLASH_SALE_1000) {
                BSON_APPEND_DOCUMENT_BEGIN(&q, "stock", &d2);
                BSON_APPEND_INT32(&d2, "$gte", 1);
                bson_append_document_end(&q, &d2);
            } else if (s == SCEN_HELPDESK) {
                BSON_APPEND_DOCUMENT_BEGIN(&q, "clientCount", &d2);
                BSON_APPEND_INT32(&d2, "$lt", AGENT_CAPACITY);
                bson_append_document_end(&q, &d2);
            } else {
                BSON_APPEND_UTF8(&q, field, "N");
            }
        }
        bson_append_document_end(&st, &q);
        BSON_APPEND_DOCUMENT_BEGIN(&st, "u", &u);
        if (op == WOP_INC || (op == WOP_COND && !seats)) {
            BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &d1);
            if (op == WOP_INC)
                BSON_APPEND_INT64(&d1, field, 1);
            else
                BSON_APPEND_INT32(&d1, field, s == SCEN_HELPDESK ? 1 : -1);
            bson_append_document_end(&u, &d1);
        } else {
            BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &d1);
            wire_append_value(&d1, field, s, &p);
            kinds[k++] = seats ? WP_SEATVAL : WP_VALUE;
            bson_append_document_end(&u, &d1);
            if (op != WOP_COND) {
                BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &d2);
                BSON_APPEND_INT64(&d2, "v", 1);
                bson_append_document_end(&u, &d2);
            }
        }
        bson_append_document_end(&st, &u);
        if (op == WOP_WRITE)
            BSON_APPEND_BOOL(&st, "upsert", true);
        bson_append_document_end(&arr, &st);
        WIRE_SEATPARAM();
        bson_append_array_end(b, &arr);
        BSON_APPEND_BOOL(b, "ordered", true);
        break;
    }
    wire_append_session(w, b, mode, op != WOP_FIND, &p);
    if (mode || op != WOP_FIND)
        kinds[k++] = WP_TXN;
    BSON_APPEND_UTF8(b, "$db", WIRE_DB);
    *nk = k;
#undef WIRE_ID
#undef WIRE_SEATPARAM
}

/* Wraps a command document into an OP_MSG frame (owned by the caller). */
static uint8_t *wire_frame(const bson_t *cmd, uint32_t *len)
{
    uint32_t n = 16 + 4 + 1 + cmd->len;
    uint8_t *f = malloc(n);
    int32_t h[4] = {(int32_t)n, 0, 0, WIRE_OP_MSG};
    memcpy(f, h, 16);
    memset(f + 16, 0, 5); /* flagBits 0, section kind 0 */
    memcpy(f + 21, bson_get_data(cmd), cmd->len);
    *len = n;
    return f;
}

/* Builds the template of (op, s, mode), finding each sentinel. */
static bool wire_template(wconn_t *w, wop_t op, scen_t s, int mode, char *err)
{
    wtmpl_t *t = &w->tmpl[op][s][mode];
    bson_t cmd = BSON_INITIALIZER;
    wpkind_t kinds[WIRE_MAX_PATCH + 2];
    int nk = 0;
    wire_build(w, op, s, mode, &cmd, kinds, &nk);
    t->frame = wire_frame(&cmd, &t->len);
    bson_destroy(&cmd);
    t->nparam = nk;
    int numeric = 0; /* sentinels are numbered by their order among numbers */
    for (int i = 0; i < nk; i++) {
        t->kind[i] = kinds[i];
        const void *at = NULL;
        if (kinds[i] == WP_I32) {
            int32_t v = WIRE_S_I32 + numeric++;
            at = memmem(t->frame, t->len, &v, 4);
        } else if (kinds[i] == WP_I64 || kinds[i] == WP_VALUE || kinds[i] == WP_TXN) {
            int64_t v = WIRE_S_I64 + numeric++;
            at = memmem(t->frame, t->len, &v, 8);
        } else if (kinds[i] == WP_SEATVAL) {
            numeric++;
            at = memmem(t->frame, t->len, WIRE_S_SEATVAL, sizeof WIRE_S_SEATVAL - 1);
        } else {
            /* the seat key: every occurrence (filter and $set) */
            const uint8_t *from = t->frame;
            for (;;) {
                const uint8_t *hit = memmem(from, t->len - (uint32_t)(from - t->frame),
                                            WIRE_S_SEATKEY, sizeof WIRE_S_SEATKEY - 1);
                if (!hit)
                    break;
                if (!at) {
                    at = hit;
                } else if (t->nparam < WIRE_MAX_PATCH) {
                    t->kind[t->nparam] = WP_SEATKEY;
                    t->off[t->nparam++] = (uint32_t)(hit - t->frame);
                }
                from = hit + 1;
            }
        }
        if (!at)
            return wire_err(err, "wire client: template %s/%d lost a sentinel", wire_colls[s],
                            (int)op);
        t->off[i] = (uint32_t)((const uint8_t *)at - t->frame);
    }
    return true;
}

/* ---- sending and receiving ---- */

static bool wire_send(wconn_t *w, uint8_t *frame, uint32_t len, char *err)
{
    int32_t id = ++w->next_id;
    memcpy(frame + 4, &id, 4);
    for (uint32_t done = 0; done < len;) {
        ssize_t n = send(w->fd, frame + done, len - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return wire_err(err, "wire client: send: %s", strerror(errno));
        done += (uint32_t)n;
    }
    return true;
}

/* Reads n more bytes into rbuf (compacting it first); false on error. */
static bool wire_fill(wconn_t *w, size_t want, char *err)
{
    if (w->roff > 0) {
        memmove(w->rbuf, w->rbuf + w->roff, w->rlen - w->roff);
        w->rlen -= w->roff;
        w->roff = 0;
    }
    if (want > w->rcap) {
        w->rcap = want;
        w->rbuf = realloc(w->rbuf, w->rcap);
    }
    while (w->rlen < want) {
        ssize_t n = recv(w->fd, w->rbuf + w->rlen, w->rcap - w->rlen, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return wire_err(err, "wire client: recv: %s",
                            n == 0 ? "connection closed" : strerror(errno));
        w->rlen += (size_t)n;
    }
    return true;
}

/* Receives one OP_MSG reply into w->doc. */
static bool wire_recv(wconn_t *w, char *err)
{
    if (w->rlen - w->roff < 16 && !wire_fill(w, 16, err))
        return false;
    int32_t h[4];
    memcpy(h, w->rbuf + w->roff, 16);
    if (h[0] < 16 + 5 + 5 || h[0] > 48 * 1024 * 1024 || h[3] != WIRE_OP_MSG)
        return wire_err(err, "wire client: bad reply header (length %d)", h[0]);
    size_t len = (size_t)h[0];
    if (w->rlen - w->roff < len && !wire_fill(w, len, err))
        return false;
    uint8_t *m = w->rbuf + w->roff;
    w->roff += len;
    if (w->roff == w->rlen)
        w->roff = w->rlen = 0;
    uint32_t flags;
    memcpy(&flags, m + 16, 4);
    if (m[20] != 0 || (flags & 1)) /* kind 0 first; no checksum expected */
        return wire_err(err, "wire client: unexpected reply section %d", m[20]);
    int32_t dlen;
    memcpy(&dlen, m + 21, 4);
    if (dlen < 5 || (size_t)dlen > len - 21 || !bson_init_static(&w->doc, m + 21, (size_t)dlen))
        return wire_err(err, "wire client: bad reply document");
    return true;
}

/* Checks ok: 1 and no writeErrors (dup: an 11000 write error sets *dup and
 * is not a failure). Records the transient flag. */
static bool wire_check(wconn_t *w, bool *dup, char *err)
{
    bson_iter_t it;
    double ok = 0;
    const char *msg = "";
    int32_t code = 0;
    bool labelled = false;
    if (dup)
        *dup = false;
    if (bson_iter_init(&it, &w->doc)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (!strcmp(k, "ok")) {
                ok = bson_iter_as_double(&it);
            } else if (!strcmp(k, "errmsg") && BSON_ITER_HOLDS_UTF8(&it)) {
                msg = bson_iter_utf8(&it, NULL);
            } else if (!strcmp(k, "code")) {
                code = (int32_t)bson_iter_as_int64(&it);
            } else if (!strcmp(k, "errorLabels") && BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_iter_t l;
                if (bson_iter_recurse(&it, &l))
                    while (bson_iter_next(&l))
                        if (BSON_ITER_HOLDS_UTF8(&l) &&
                            !strcmp(bson_iter_utf8(&l, NULL), "TransientTransactionError"))
                            labelled = true;
            } else if (!strcmp(k, "writeErrors") && BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_iter_t e, f;
                if (bson_iter_recurse(&it, &e) && bson_iter_next(&e) &&
                    bson_iter_recurse(&e, &f)) {
                    while (bson_iter_next(&f)) {
                        if (!strcmp(bson_iter_key(&f), "code"))
                            code = (int32_t)bson_iter_as_int64(&f);
                        else if (!strcmp(bson_iter_key(&f), "errmsg") &&
                                 BSON_ITER_HOLDS_UTF8(&f))
                            msg = bson_iter_utf8(&f, NULL);
                    }
                    if (dup && code == 11000) {
                        *dup = true;
                        continue;
                    }
                    ok = 0;
                }
            }
        }
    }
    w->transient = code == 112 || code == 251 || labelled;
    if (ok != 1) {
        snprintf(err, ERRLEN, "%s (code %d)", msg, code);
        return false;
    }
    return true;
}

/* Sends a command built per call and receives its checked reply. */
static bool wire_command(wconn_t *w, const bson_t *cmd, bool *dup, char *err)
{
    uint32_t len;
    uint8_t *f = wire_frame(cmd, &len);
    bool ok = wire_send(w, f, len, err) && wire_recv(w, err);
    free(f);
    return ok && wire_check(w, dup, err);
}

/* Runs one operation shape: patches the template's parameters (the _id, the
 * shape's values, the seat key of slot, txnNumber last), sends, receives and
 * checks. vals: the shape's values after the _id. */
static bool wire_op(wconn_t *w, wop_t op, scen_t s, int slot, const int64_t *vals, int nvals,
                    bool *dup, char *err)
{
    int mode = w->txn_state;
    wtmpl_t *t = &w->tmpl[op][s][mode];
    if (!t->frame && !wire_template(w, op, s, mode, err))
        return false;
    int vi = 0;
    bool txn = mode || op != WOP_FIND;
    if (txn && mode == 0)
        w->txn_number++; /* a retryable write: a new statement */
    for (int i = 0; i < t->nparam; i++) {
        uint8_t *at = t->frame + t->off[i];
        switch (t->kind[i]) {
        case WP_I32: {
            int32_t id = (s == SCEN_HELPDESK || s == SCEN_PLAY_COUNTER) ? slot : 0;
            memcpy(at, &id, 4);
            break;
        }
        case WP_SEATKEY: {
            char key[8];
            scen_seat_key(slot, key);
            memcpy(at, key, 6);
            break;
        }
        case WP_SEATVAL: {
            char v[WIRE_SEATVAL_DIGITS + 4];
            int64_t tok = vi < nvals ? vals[vi++] : 0;
            if (tok < 0 || tok > 9999999999999LL)
                return wire_err(err, "wire client: seat owner %lld out of range", (long long)tok);
            snprintf(v, sizeof v, "Y:%0*lld", WIRE_SEATVAL_DIGITS, (long long)tok);
            memcpy(at, v, WIRE_SEATVAL_DIGITS + 2);
            break;
        }
        case WP_I64: /* the CAS version */
        case WP_VALUE: {
            int64_t v = vi < nvals ? vals[vi++] : 0;
            memcpy(at, &v, 8);
            break;
        }
        case WP_TXN:
            memcpy(at, &w->txn_number, 8);
            break;
        }
    }
    if (mode == 1)
        w->txn_state = 2;
    if (!wire_send(w, t->frame, t->len, err) || !wire_recv(w, err))
        return false;
    return wire_check(w, dup, err);
}

/* Reads the int64 at path of the reply (0 when absent). */
static int64_t wire_reply_int(wconn_t *w, const char *path)
{
    bson_iter_t it, f;
    if (bson_iter_init(&it, &w->doc) && bson_iter_find_descendant(&it, path, &f) &&
        (BSON_ITER_HOLDS_NUMBER(&f)))
        return bson_iter_as_int64(&f);
    return 0;
}

/* modified = nModified + the number of upserted ids. */
static int64_t wire_modified(wconn_t *w)
{
    int64_t m = wire_reply_int(w, "nModified");
    bson_iter_t it, a;
    if (bson_iter_init_find(&it, &w->doc, "upserted") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &a))
        while (bson_iter_next(&a))
            m++;
    return m;
}

/* A value: numbers as is, seat strings "N" / "Y:<owner>". */
static int64_t wire_iter_value(const bson_iter_t *it)
{
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *s = bson_iter_utf8(it, NULL);
        return s[0] == 'Y' && s[1] == ':' ? strtoll(s + 2, NULL, 10) : 0;
    }
    return bson_iter_as_int64(it);
}

/* The real field of a slot. buf: 32 bytes. */
static const char *wire_slot_field(scen_t s, int slot, char *buf)
{
    if (s != SCEN_SEATS)
        return wire_field(s, buf);
    char key[8];
    scen_seat_key(slot, key);
    snprintf(buf, 32, "seats.%s", key);
    return buf;
}

/* ---- the driver ---- */

static void *wire_connect(const engine_t *eng, const char *durability, char *err)
{
    if (bench_auth) {
        wire_err(err, "--client wire does not log in (no SCRAM); use --client driver");
        return NULL;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        wire_err(err, "socket: %s", strerror(errno));
        return NULL;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)eng->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        wire_err(err, "connect: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    wconn_t *w = calloc(1, sizeof *w);
    w->fd = fd;
    w->rcap = 64 * 1024;
    w->rbuf = malloc(w->rcap);
    FILE *r = fopen("/dev/urandom", "rb");
    if (!r || fread(w->lsid, 1, 16, r) != 16) {
        for (int i = 0; i < 16; i++)
            w->lsid[i] = (uint8_t)(rand() ^ (getpid() >> (i % 3)));
    }
    if (r)
        fclose(r);
    w->lsid[6] = (uint8_t)((w->lsid[6] & 0x0f) | 0x40); /* UUID version 4 */
    w->lsid[8] = (uint8_t)((w->lsid[8] & 0x3f) | 0x80);
    bson_t *hello = BCON_NEW("hello", BCON_INT32(1), "client", "{", "driver", "{", "name",
                             BCON_UTF8("atomdb-bench-wire"), "version", BCON_UTF8("1"), "}",
                             "}", "$db", BCON_UTF8("admin"));
    bool ok = wire_command(w, hello, NULL, err);
    bson_destroy(hello);
    if (!ok) {
        close(fd);
        free(w->rbuf);
        free(w);
        return NULL;
    }
    return w;
}

static void wire_disconnect(void *c)
{
    wconn_t *w = c;
    if (!w)
        return;
    close(w->fd);
    for (int o = 0; o < WOP_COUNT; o++)
        for (int s = 0; s < SCEN_COUNT; s++)
            for (int m = 0; m < 3; m++)
                free(w->tmpl[o][s][m].frame);
    free(w->rbuf);
    free(w);
}

static bool wire_setup(void *c, scen_t s, char *err)
{
    wconn_t *w = c;
    bson_t *drop = BCON_NEW("drop", BCON_UTF8(wire_colls[s]), "$db", BCON_UTF8(WIRE_DB));
    bool ok = wire_command(w, drop, NULL, err);
    bson_destroy(drop);
    if (!ok && strstr(err, "(code 26)") == NULL)
        return false;
    bson_t cmd = BSON_INITIALIZER, arr, d, seats;
    BSON_APPEND_UTF8(&cmd, "insert", wire_colls[s]);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &arr);
    int n = 0;
    switch (s) {
    case SCEN_COUNTER:
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000:
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &d);
        BSON_APPEND_INT32(&d, "_id", 0);
        BSON_APPEND_INT64(&d, s == SCEN_COUNTER ? "n" : "stock", scen_initial(s));
        BSON_APPEND_INT64(&d, "v", 0);
        bson_append_document_end(&arr, &d);
        n = 1;
        break;
    case SCEN_SEATS:
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &d);
        BSON_APPEND_INT32(&d, "_id", 0);
        BSON_APPEND_DOCUMENT_BEGIN(&d, "seats", &seats);
        for (int k = 0; k < SEATS; k++) {
            char key[8];
            scen_seat_key(k, key);
            BSON_APPEND_UTF8(&seats, key, "N");
        }
        bson_append_document_end(&d, &seats);
        BSON_APPEND_INT64(&d, "v", 0);
        bson_append_document_end(&arr, &d);
        n = 1;
        break;
    case SCEN_HELPDESK:
        for (int k = 0; k < AGENTS; k++) {
            char key[8];
            snprintf(key, sizeof key, "%d", k);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &d);
            BSON_APPEND_INT32(&d, "_id", k);
            BSON_APPEND_INT64(&d, "clientCount", 0);
            BSON_APPEND_INT32(&d, "max", AGENT_CAPACITY);
            BSON_APPEND_INT64(&d, "v", 0);
            bson_append_document_end(&arr, &d);
        }
        n = AGENTS;
        break;
    default:
        break;
    }
    bson_append_array_end(&cmd, &arr);
    BSON_APPEND_UTF8(&cmd, "$db", WIRE_DB);
    ok = n == 0 || wire_command(w, &cmd, NULL, err);
    bson_destroy(&cmd);
    return ok;
}

static bool wire_read(void *c, scen_t s, int slot, bool lock, slot_read_t *out, char *err)
{
    wconn_t *w = c;
    char fbuf[32];
    const char *field = wire_slot_field(s, slot, fbuf);
    out->exists = false;
    out->value = 0;
    out->version = 0;
    if (!wire_op(w, lock ? WOP_FAM_LOCK : WOP_FIND, s, slot, NULL, 0, NULL, err))
        return false;
    bson_iter_t it, d;
    bool found;
    if (lock) {
        found = bson_iter_init_find(&it, &w->doc, "value") && BSON_ITER_HOLDS_DOCUMENT(&it);
    } else {
        bson_iter_t b;
        found = bson_iter_init(&it, &w->doc) &&
                bson_iter_find_descendant(&it, "cursor.firstBatch", &b) &&
                BSON_ITER_HOLDS_ARRAY(&b) && bson_iter_recurse(&b, &it) && bson_iter_next(&it) &&
                BSON_ITER_HOLDS_DOCUMENT(&it);
    }
    if (!found)
        return true;
    out->exists = true;
    bson_iter_t f;
    if (bson_iter_recurse(&it, &d) && bson_iter_find_descendant(&d, field, &f))
        out->value = wire_iter_value(&f);
    if (bson_iter_recurse(&it, &d) && bson_iter_find(&d, "v"))
        out->version = bson_iter_as_int64(&d);
    return true;
}

static bool wire_write(void *c, scen_t s, int slot, int64_t value, char *err)
{
    return wire_op(c, WOP_WRITE, s, slot, &value, 1, NULL, err);
}

static bool wire_atomic(void *c, scen_t s, int slot, int64_t *out, char *err)
{
    wconn_t *w = c;
    if (s != SCEN_PLAY_COUNTER) {
        if (!wire_op(w, WOP_INC, s, slot, NULL, 0, NULL, err))
            return false;
        if (wire_reply_int(w, "n") != 1)
            return wire_err(err, "wire client: $inc matched %lld documents",
                            (long long)wire_reply_int(w, "n"));
        return true;
    }
    if (!wire_op(w, WOP_FAM_INC, s, slot, NULL, 0, NULL, err))
        return false;
    bson_iter_t it, f;
    if (!bson_iter_init(&it, &w->doc) || !bson_iter_find_descendant(&it, "value.count", &f))
        return wire_err(err, "findAndModify returned no value");
    *out = bson_iter_as_int64(&f);
    return true;
}

static bool wire_conditional(void *c, scen_t s, int slot, int64_t token, bool *won, char *err)
{
    wconn_t *w = c;
    if (!wire_op(w, WOP_COND, s, slot, &token, 1, NULL, err))
        return false;
    *won = wire_modified(w) > 0;
    return true;
}

static bool wire_cas(void *c, scen_t s, int slot, const slot_read_t *seen, int64_t value,
                     bool *won, char *err)
{
    wconn_t *w = c;
    *won = false;
    if (!seen->exists) {
        bool dup = false;
        if (!wire_op(w, WOP_INSERT, s, slot, &value, 1, &dup, err))
            return false;
        *won = !dup && wire_reply_int(w, "n") == 1;
        return true;
    }
    int64_t vals[2] = {seen->version, value};
    if (!wire_op(w, WOP_CAS, s, slot, vals, 2, NULL, err))
        return false;
    *won = wire_modified(w) > 0;
    return true;
}

static bool wire_txn_begin(void *c, bool snapshot, char *err)
{
    wconn_t *w = c;
    w->txn_number++;
    w->txn_state = 1;
    return true;
}

/* commitTransaction / abortTransaction of the running transaction. */
static bool wire_txn_end(wconn_t *w, const char *verb, char *err)
{
    bson_t cmd = BSON_INITIALIZER, lsid;
    BSON_APPEND_INT32(&cmd, verb, 1);
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "lsid", &lsid);
    bson_append_binary(&lsid, "id", 2, BSON_SUBTYPE_UUID, w->lsid, 16);
    bson_append_document_end(&cmd, &lsid);
    BSON_APPEND_INT64(&cmd, "txnNumber", w->txn_number);
    BSON_APPEND_BOOL(&cmd, "autocommit", false);
    BSON_APPEND_UTF8(&cmd, "$db", "admin");
    bool ok = wire_command(w, &cmd, NULL, err);
    bson_destroy(&cmd);
    return ok;
}

static bool wire_txn_commit(void *c, bool *retry, char *err)
{
    wconn_t *w = c;
    bool started = w->txn_state == 2;
    w->txn_state = 0;
    if (!started)
        return true; /* nothing was sent in it */
    if (wire_txn_end(w, "commitTransaction", err))
        return true;
    *retry = w->transient;
    char e2[ERRLEN];
    bool transient = w->transient;
    wire_txn_end(w, "abortTransaction", e2);
    w->transient = transient;
    return false;
}

static void wire_txn_abort(void *c)
{
    wconn_t *w = c;
    bool started = w->txn_state == 2;
    w->txn_state = 0;
    char err[ERRLEN];
    bool transient = w->transient;
    if (started)
        wire_txn_end(w, "abortTransaction", err);
    w->transient = transient;
}

static bool wire_lock(void *c, const char *name, int client, bool *got, char *err)
{
    wconn_t *w = c;
    char owner[32];
    snprintf(owner, sizeof owner, "client-%d", client);
    bson_t *cmd = BCON_NEW("acquireLock", BCON_UTF8(name), "owner", BCON_UTF8(owner), "leaseMs",
                           BCON_INT64(5000), "waitMs", BCON_INT64(2000), "$db",
                           BCON_UTF8("admin"));
    bool ok = wire_command(w, cmd, NULL, err);
    bson_destroy(cmd);
    if (!ok)
        return false;
    bson_iter_t it;
    *got = bson_iter_init_find(&it, &w->doc, "acquired") && bson_iter_as_bool(&it);
    if (*got && bson_iter_init_find(&it, &w->doc, "token"))
        w->lock_token = bson_iter_as_int64(&it);
    return true;
}

static bool wire_unlock(void *c, const char *name, char *err)
{
    wconn_t *w = c;
    bson_t *cmd = BCON_NEW("releaseLock", BCON_UTF8(name), "token", BCON_INT64(w->lock_token),
                           "$db", BCON_UTF8("admin"));
    bool ok = wire_command(w, cmd, NULL, err);
    bson_destroy(cmd);
    return ok;
}

/* Takes the values of one batch of documents into vals. */
static void wire_final_batch(scen_t s, const char *field, bson_iter_t *batch, int64_t *vals,
                             int nslots)
{
    while (bson_iter_next(batch)) {
        bson_iter_t it, f;
        if (!BSON_ITER_HOLDS_DOCUMENT(batch) || !bson_iter_recurse(batch, &it))
            continue;
        bson_iter_t d = it;
        int id = bson_iter_find(&d, "_id") ? (int)bson_iter_as_int64(&d) : -1;
        if (s == SCEN_SEATS) {
            bson_iter_t seats;
            d = it;
            if (bson_iter_find(&d, "seats") && bson_iter_recurse(&d, &seats)) {
                while (bson_iter_next(&seats)) {
                    int r, col;
                    if (sscanf(bson_iter_key(&seats), "r%2dc%2d", &r, &col) == 2 && r >= 1 &&
                        r <= SEAT_ROWS && col >= 1 && col <= SEAT_COLS)
                        vals[(r - 1) * SEAT_COLS + col - 1] = wire_iter_value(&seats);
                }
            }
        } else if (id >= 0 && id < nslots && bson_iter_find_descendant(&it, field, &f)) {
            vals[id] = wire_iter_value(&f);
        }
    }
}

static bool wire_final_state(void *c, scen_t s, int64_t *vals, int nslots, char *err)
{
    wconn_t *w = c;
    char fbuf[32];
    const char *field = wire_slot_field(s, 0, fbuf);
    memset(vals, 0, sizeof *vals * (size_t)nslots);
    bson_t *cmd = BCON_NEW("find", BCON_UTF8(wire_colls[s]), "filter", "{", "}", "$db",
                           BCON_UTF8(WIRE_DB));
    const char *key = "cursor.firstBatch";
    for (int round = 0; round < 100000; round++) {
        bool ok = wire_command(w, cmd, NULL, err);
        bson_destroy(cmd);
        if (!ok)
            return false;
        bson_iter_t it, b;
        if (bson_iter_init(&it, &w->doc) && bson_iter_find_descendant(&it, key, &b) &&
            BSON_ITER_HOLDS_ARRAY(&b) && bson_iter_recurse(&b, &it))
            wire_final_batch(s, field, &it, vals, nslots);
        int64_t id = wire_reply_int(w, "cursor.id");
        if (id == 0)
            return true;
        cmd = BCON_NEW("getMore", BCON_INT64(id), "collection", BCON_UTF8(wire_colls[s]), "$db",
                       BCON_UTF8(WIRE_DB));
        key = "cursor.nextBatch";
    }
    bson_destroy(cmd);
    return wire_err(err, "wire client: the final state's cursor did not end");
}

/* What the engine supports does not depend on the client: ask libmongoc. */
static void wire_probe(void *c, engine_t *eng)
{
    char err[ERRLEN];
    void *m = drv_mongo.connect(eng, eng->conf.durability, err);
    if (!m) {
        for (int st = 0; st < STRAT_COUNT; st++)
            snprintf(eng->na[st], sizeof eng->na[0], "probe: %s", err);
        return;
    }
    drv_mongo.probe(m, eng);
    drv_mongo.disconnect(m);
}

static bool wire_last_transient(void *c)
{
    return ((wconn_t *)c)->transient;
}

const driver_t drv_wire = {
    .name = "atomdb",
    .client = "wire",
    .connect = wire_connect,
    .disconnect = wire_disconnect,
    .setup = wire_setup,
    .read = wire_read,
    .write = wire_write,
    .atomic = wire_atomic,
    .conditional = wire_conditional,
    .cas = wire_cas,
    .txn_begin = wire_txn_begin,
    .txn_commit = wire_txn_commit,
    .txn_abort = wire_txn_abort,
    .lock = wire_lock,
    .unlock = wire_unlock,
    .final_state = wire_final_state,
    .probe = wire_probe,
    .last_transient = wire_last_transient,
};
