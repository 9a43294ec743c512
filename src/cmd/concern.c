/* concern: the readConcern and writeConcern arguments any command may
 * carry, parsed and checked as mongod does (read_concern_args.cpp,
 * write_concern_options.cpp), and answered as a single-member replica set
 * answers them: a write is applied whatever its write concern, and what
 * one node cannot satisfy (w > 1, an unknown tag) is reported in
 * writeConcernError; afterClusterTime and atClusterTime are compared with
 * the cluster time (src/store/clock.h). */
#include "cmd/cmd-private.h"

#include <string.h>

#include "store/clock.h"

/* Commands that write or change the catalog accept a write concern; so do
 * these others (mongod: supportsWriteConcern). */
static bool concern_wc_allowed(const cmd_ctx_t *ctx, bool is_write)
{
    static const char *also[] = {"aggregate",     "abortTransaction",  "commitTransaction",
                                 "setParameter",  "replSetReconfig",   "fsync",
                                 "endSessions",   "killSessions",      "killAllSessions",
                                 "killAllSessionsByPattern", "refreshSessions",
                                 "acquireLock",   "releaseLock",       "renewLock"};
    if (is_write)
        return true;
    for (size_t i = 0; i < sizeof also / sizeof also[0]; i++)
        if (!strcmp(ctx->name, also[i]))
            return true;
    return false;
}

bool cmd_write_concern_parse(cmd_ctx_t *ctx, bool is_write, dberr_t *err)
{
    cmd_write_concern_t *wc = &ctx->wc;
    bson_iter_t it, f;
    bson_t doc;
    memset(wc, 0, sizeof *wc);
    wc->w = 1;
    if (!cmd_find(ctx, "writeConcern", &it))
        return true;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !cmd_iter_doc(&it, &doc))
        return cmd_wrong_type(err, &it, "type 'object'", "writeConcern");
    if (bson_empty(&doc))
        return true; /* the default */
    if (!concern_wc_allowed(ctx, is_write))
        return dberr_set(err, DBERR_INVALID_OPTIONS, "Command %s does not support writeConcern",
                         ctx->name);
    wc->given = true;
    bson_iter_init(&f, &doc);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!strcmp(k, "w")) {
            wc->w_given = true;
            if (BSON_ITER_HOLDS_NUMBER(&f)) {
                double d = bson_iter_as_double(&f);
                if (d < 0 || d > 50)
                    return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                     "w has to be a non-negative number and not greater than 50");
                wc->w = (int)d;
            } else if (BSON_ITER_HOLDS_UTF8(&f)) {
                wc->w = -1;
                snprintf(wc->mode, sizeof wc->mode, "%s", bson_iter_utf8(&f, NULL));
            } else {
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "w has to be a number or a string");
            }
        } else if (!strcmp(k, "j") || !strcmp(k, "fsync")) {
            if (!BSON_ITER_HOLDS_BOOL(&f) && !BSON_ITER_HOLDS_NUMBER(&f))
                return cmd_wrong_type(err, &f, "types '[bool, long, int, decimal, double]'",
                                      "writeConcern.%s", k);
            if (k[0] == 'j')
                wc->j = bson_iter_as_bool(&f);
            else
                wc->fsync = bson_iter_as_bool(&f);
        } else if (!strcmp(k, "wtimeout")) {
            if (!BSON_ITER_HOLDS_NUMBER(&f))
                return cmd_wrong_type(err, &f, "types '[long, int, decimal, double]'",
                                      "writeConcern.wtimeout");
            wc->wtimeout = bson_iter_as_int64(&f);
        } else if (!strcmp(k, "provenance")) {
            /* drivers never send it; mongod accepts and records it */
        } else {
            return dberr_set(err, DBERR_FAILED_TO_PARSE,
                             "BSON field 'writeConcern.%s' is an unknown field.", k);
        }
    }
    if (wc->j && wc->fsync)
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "fsync and j options cannot be used together");
    if (wc->w == 0 && wc->j)
        return dberr_set(err, DBERR_BAD_VALUE, "cannot use 'j' option with a w:0 write concern");
    if (wc->w == -1 && !strcmp(wc->mode, "majority"))
        wc->majority = true;
    /* durability waits: j and fsync, and a majority of one node is this
     * node's journal */
    if (wc->j || wc->fsync || wc->majority)
        ctx->wait_sync = true;
    return true;
}

void cmd_write_concern_report(cmd_ctx_t *ctx)
{
    const cmd_write_concern_t *wc = &ctx->wc;
    int code;
    char msg[200];
    if (!wc->given || wc->majority || (wc->w >= 0 && wc->w <= 1))
        return;
    if (wc->w > 1) {
        code = 100;
        snprintf(msg, sizeof msg, "Not enough data-bearing nodes");
    } else {
        code = 79;
        snprintf(msg, sizeof msg,
                 "No write concern mode named '%s' found in replica set configuration", wc->mode);
    }
    bson_t e, info, w;
    bson_append_document_begin(ctx->reply, "writeConcernError", -1, &e);
    BSON_APPEND_INT32(&e, "code", code);
    BSON_APPEND_UTF8(&e, "codeName", dberr_codename(code));
    BSON_APPEND_UTF8(&e, "errmsg", msg);
    bson_append_document_begin(&e, "errInfo", -1, &info);
    bson_append_document_begin(&info, "writeConcern", -1, &w);
    if (wc->w >= 0)
        BSON_APPEND_INT32(&w, "w", wc->w);
    else
        BSON_APPEND_UTF8(&w, "w", wc->mode);
    if (wc->j)
        BSON_APPEND_BOOL(&w, "j", true);
    BSON_APPEND_INT64(&w, "wtimeout", wc->wtimeout);
    BSON_APPEND_UTF8(&w, "provenance", "clientSupplied");
    bson_append_document_end(&info, &w);
    bson_append_document_end(&e, &info);
    bson_append_document_end(ctx->reply, &e);
}

/* A Timestamp field of the read concern. */
static bool concern_ts(const bson_iter_t *f, const char *name, clock_ts_t *out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_TIMESTAMP(f))
        return dberr_set(err, DBERR_TYPE_MISMATCH,
                         "\"%s\" had the wrong type. Expected timestamp, found %s", name,
                         shellfmt_type_name(bson_iter_type(f)));
    bson_iter_timestamp(f, &out->t, &out->i);
    return true;
}

bool cmd_read_concern_parse(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_read_concern_t *rc = &ctx->rc;
    bson_iter_t it, f;
    bson_t doc;
    memset(rc, 0, sizeof *rc);
    if (!cmd_find(ctx, "readConcern", &it))
        return true;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !cmd_iter_doc(&it, &doc))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "readConcern field should be an object");
    rc->given = true;
    bson_iter_init(&f, &doc);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!strcmp(k, "level")) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "\"level\" had the wrong type. Expected string, found %s",
                                 shellfmt_type_name(bson_iter_type(&f)));
            const char *l = bson_iter_utf8(&f, NULL);
            static const char *levels[] = {"local", "majority", "linearizable", "available",
                                           "snapshot", "serializable"};
            size_t n = sizeof levels / sizeof levels[0];
            size_t i = 0;
            while (i < n && strcmp(l, levels[i]))
                i++;
            if (i == n)
                return dberr_set(err, DBERR_FAILED_TO_PARSE,
                                 "readConcern.level must be either 'local', 'majority', "
                                 "'linearizable', 'available', or 'snapshot'");
            snprintf(rc->level, sizeof rc->level, "%s", l);
        } else if (!strcmp(k, "afterClusterTime")) {
            if (!concern_ts(&f, k, &rc->after, err))
                return false;
            rc->has_after = true;
        } else if (!strcmp(k, "atClusterTime")) {
            if (!concern_ts(&f, k, &rc->at, err))
                return false;
            rc->has_at = true;
        } else if (!strcmp(k, "afterOpTime")) {
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "afterOpTime is an internal option atomdb does not support");
        } else if (!strcmp(k, "provenance")) {
            /* mongod records it */
        } else {
            return dberr_set(err, DBERR_INVALID_OPTIONS, "Unrecognized option in readConcern: %s",
                             k);
        }
    }
    const char *level = rc->level[0] ? rc->level : "local";
    if (rc->has_after && rc->has_at)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "Specifying a timestamp for readConcern snapshot in a causally "
                         "consistent session is not allowed.");
    if (rc->has_after && strcmp(level, "majority") && strcmp(level, "local") &&
        strcmp(level, "snapshot") && strcmp(level, "serializable"))
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "afterClusterTime field can be set only if level is equal to majority, "
                         "local, or snapshot");
    if (rc->has_at && strcmp(level, "snapshot"))
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "atClusterTime field can be set only if level is equal to snapshot");
    if (rc->has_at && rc->at.t == 0 && rc->at.i == 0)
        return dberr_set(err, DBERR_INVALID_OPTIONS, "atClusterTime cannot be a null timestamp");
    if (rc->has_after && rc->after.t == 0 && rc->after.i == 0)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "afterClusterTime cannot be a null timestamp");
    return true;
}

bool cmd_read_concern_check(cmd_ctx_t *ctx, bool is_write, dberr_t *err)
{
    const cmd_read_concern_t *rc = &ctx->rc;
    if (!rc->given)
        return true;
    if (!ctx->in_txn && rc->level[0]) {
        bool snapshot_read = !strcmp(ctx->name, "find") || !strcmp(ctx->name, "aggregate") ||
                             !strcmp(ctx->name, "distinct");
        if (!strcmp(rc->level, "serializable"))
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "readConcern level 'serializable' (an atomdb extension) applies to "
                             "multi-document transactions only");
        if ((!strcmp(rc->level, "snapshot") && !snapshot_read) ||
            (is_write && strcmp(rc->level, "local")))
            return dberr_set(err, DBERR_INVALID_OPTIONS,
                             "Command %s does not support { readConcern: { level: \"%s\" } }",
                             ctx->name, rc->level);
    }
    clock_ts_t now = clock_now();
    const clock_ts_t *asked = rc->has_after ? &rc->after : rc->has_at ? &rc->at : NULL;
    if (asked && clock_cmp(*asked, now) > 0)
        return dberr_set(err, DBERR_INVALID_OPTIONS,
                         "readConcern %s value must not be greater than the current "
                         "clusterTime. Requested clusterTime: Timestamp(%u, %u); current "
                         "clusterTime: Timestamp(%u, %u)",
                         rc->has_after ? "afterClusterTime" : "atClusterTime", asked->t, asked->i,
                         now.t, now.i);
    /* atomdb keeps no versions older than the newest commit outside
     * transactions: a snapshot read at an earlier time can only be served
     * when nothing was committed since */
    if (rc->has_at && clock_cmp(rc->at, now) < 0)
        return dberr_set(err, 239,
                         "Read timestamp Timestamp(%u, %u) is older than the oldest available "
                         "timestamp (Timestamp(%u, %u): atomdb serves snapshot reads outside "
                         "transactions at the newest commit only).",
                         rc->at.t, rc->at.i, now.t, now.i);
    return true;
}
