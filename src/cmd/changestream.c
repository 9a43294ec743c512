/* changestream: opening change streams ($changeStream first in aggregate,
 * on a collection, a database or the cluster), their getMore, and the
 * parking of an awaitData getMore until a commit it can see is durable
 * (woken through the journal's commit hook, a few ms coalesced) or its
 * maxTimeMS passes. A stream that caught up (returned all it had) less
 * than CS_PACE_MS ago waits out the rest before its next batch, so a busy
 * stream takes its events in batches, not one reply per commit. */
#include "cmd/changestream.h"

#include <string.h>

#include "cmd/access.h"
#include "cmd/tailable.h"
#include "journal/journal.h"
#include "store/catalog.h"
#include "util/log.h"
#include "util/namelist.h"

#define CS_DEFAULT_AWAIT_MS 1000
#define CS_COALESCE_MS 1
/* The least time between two getMore replies with results on one stream
 * (an awaitData getMore that comes sooner parks until then): under a
 * stream of commits every reply carries a few ms of events, and each
 * watcher costs the server and itself one round trip per CS_PACE_MS
 * instead of one per commit. Well inside the delivery target (issue 18:
 * p99 <= 10 ms from the write); an idle stream's first event is not
 * delayed by it. See docs/change-streams.md. */
#define CS_PACE_MS 4

/* A getMore waiting for events. */
typedef struct cs_park {
    cmd_client_t *client;
    int64_t cursor_id;
    int64_t batch_size;
    uint64_t deadline_ms;  /* uv_now() time to answer with an empty batch */
    uint64_t not_before_ms; /* uv_now() time before which results wait (pacing) */
} cs_park_t;

static struct {
    cs_park_t *parks;
    size_t nparks, cap;
    uv_timer_t timer;
    bool timer_init;
    uint64_t timer_due;        /* when the timer fires, 0: stopped */
    journal_waiter_t waiter;   /* on the newest commit a parked stream waits for */
    uint64_t want_lsn;
    bool hooked;               /* the journal's commit hook is ours */
    /* the reply buffers of one wake-up's answers, kept for the next (a
     * batch of events is tens of kB: building it in a fresh buffer each
     * time grew and trimmed the heap per reply) */
    uint8_t **bufs;
    size_t *buf_lens;
    size_t nbufs;
} cs;

/* A buffer kept beyond this size is freed after its reply went out. */
#define CS_KEEP_BUF (1024 * 1024)

/* A getMore of `r` returned `n` results of at most `max` (0: no count
 * bound) at loop time `now`: when they were all it had (the stream caught
 * up), its next batch is paced; a stream catching up in small batches is
 * not held back. */
static void cs_note_sent(cs_reader_t *r, uint32_t n, int64_t max, uint64_t now)
{
    if (r && n > 0 && (max <= 0 || (int64_t)n < max))
        r->last_sent_ms = now;
}

/* Makes room for `n` kept buffers; called before any is in use (a reply
 * document points into the array). */
static void cs_reply_bufs_reserve(size_t n)
{
    if (n > cs.nbufs) {
        cs.bufs = bson_realloc(cs.bufs, n * sizeof *cs.bufs);
        cs.buf_lens = bson_realloc(cs.buf_lens, n * sizeof *cs.buf_lens);
        for (size_t k = cs.nbufs; k < n; k++) {
            cs.bufs[k] = NULL;
            cs.buf_lens[k] = 0;
        }
        cs.nbufs = n;
    }
}

/* An empty reply document built in kept buffer `i` (< cs.nbufs). */
static bson_t *cs_reply_doc(size_t i)
{
    static const uint8_t empty[5] = {5, 0, 0, 0, 0};
    if (cs.bufs[i]) /* bson_new_from_buffer reads a buffer's bytes as the document */
        memcpy(cs.bufs[i], empty, sizeof empty);
    return bson_new_from_buffer(&cs.bufs[i], &cs.buf_lens[i], bson_realloc_ctx, NULL);
}

/* The reply of kept buffer `i` went out. */
static void cs_reply_done(size_t i, bson_t *reply)
{
    bson_destroy(reply); /* the buffer stays */
    if (cs.buf_lens[i] > CS_KEEP_BUF) {
        bson_free(cs.bufs[i]);
        cs.bufs[i] = NULL;
        cs.buf_lens[i] = 0;
    }
}

static void cs_stream_free(void *p)
{
    cs_stream_t *s = p;
    pipeline_destroy(s->pipeline);
    bson_free(s);
}

/* ---- opening ---- */

static bool cs_parse_image(const bson_iter_t *it, const char *field, bool before,
                           cs_image_t *out, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return cmd_wrong_type(err, it, "type 'string'", "$changeStream.%s", field);
    const char *v = bson_iter_utf8(it, NULL);
    if (!strcmp(v, before ? "off" : "default"))
        *out = CS_IMAGE_DEFAULT;
    else if (!before && !strcmp(v, "updateLookup"))
        *out = CS_IMAGE_LOOKUP;
    else if (!strcmp(v, "whenAvailable"))
        *out = CS_IMAGE_WHEN_AVAILABLE;
    else if (!strcmp(v, "required"))
        *out = CS_IMAGE_REQUIRED;
    else
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Enumeration value '%s' for field '$changeStream.%s' is not a valid "
                         "value.",
                         v, field);
    return true;
}

/* Parses the $changeStream stage's options into `s`. */
static bool cs_parse_spec(cmd_ctx_t *ctx, const bson_t *spec, cs_stream_t *s, bool *all_cluster,
                          dberr_t *err)
{
    /* options atomdb implements only as false */
    static const char *const refused[] = {"showSystemEvents",     "showRawUpdateDescription",
                                          "showMigrationEvents",  "allowToRunOnConfigDB",
                                          "allowToRunOnSystemNS", "$_resumeAfterClusterTime"};
    bson_iter_t it;
    bool has_resume = false, has_start_after = false, has_at = false;
    cs_pos_t start = {clock_now(), CS_K_END, 0};
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "fullDocument")) {
            if (!cs_parse_image(&it, k, false, &s->full_document, err))
                return false;
        } else if (!strcmp(k, "fullDocumentBeforeChange")) {
            if (!cs_parse_image(&it, k, true, &s->before_change, err))
                return false;
        } else if (!strcmp(k, "resumeAfter") || !strcmp(k, "startAfter")) {
            bool after = k[0] == 's';
            if (!cs_parse_token(&it, k, &start, err))
                return false;
            if (!after && start.kind == 1)
                return dberr_set(err, 260, "Attempting to resume a change stream using "
                                           "'resumeAfter' is not allowed from an invalidate "
                                           "notification.");
            *(after ? &has_start_after : &has_resume) = true;
        } else if (!strcmp(k, "startAtOperationTime")) {
            if (!BSON_ITER_HOLDS_TIMESTAMP(&it))
                return cmd_wrong_type(err, &it, "type 'timestamp'",
                                      "$changeStream.startAtOperationTime");
            bson_iter_timestamp(&it, &start.ts.t, &start.ts.i);
            start.k = 0; /* the commit at that time is included */
            start.kind = 0;
            has_at = true;
        } else if (!strcmp(k, "allChangesForCluster")) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return cmd_wrong_type(err, &it, "type 'bool'",
                                      "$changeStream.allChangesForCluster");
            *all_cluster = bson_iter_as_bool(&it);
        } else if (!strcmp(k, "showExpandedEvents")) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return cmd_wrong_type(err, &it, "type 'bool'", "$changeStream.showExpandedEvents");
            s->show_expanded = bson_iter_as_bool(&it);
        } else if (namelist_has(refused, NAMELIST_COUNT(refused), k)) {
            if (bson_iter_as_bool(&it))
                return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                                 "atomdb does not support the $changeStream option '%s' yet", k);
        } else {
            return dberr_set(err, 40415, "BSON field '$changeStream.%s' is an unknown field.", k);
        }
    }
    if (has_resume + has_start_after + has_at > 1)
        return dberr_set(err, 40674, "Only one type of resume option is allowed, but multiple "
                                     "were found.");
    if ((has_resume || has_start_after || has_at) && !cs_check_history(start, err))
        return false;
    s->pos = start;
    (void)ctx;
    return true;
}

/* The stages mongod allows after $changeStream. */
static bool cs_check_stages(const bson_iter_t *pipeline, bson_t *rest, dberr_t *err)
{
    static const char *const allowed[] = {"$match", "$project", "$addFields", "$set",
                                          "$unset", "$replaceRoot", "$replaceWith", "$redact"};
    bson_iter_t el;
    bson_t arr;
    char key[16];
    uint32_t n = 0;
    bson_iter_recurse(pipeline, &el);
    bson_iter_next(&el); /* $changeStream */
    bson_append_array_begin(rest, "pipeline", -1, &arr);
    while (bson_iter_next(&el)) {
        bson_t st;
        bson_iter_t f;
        if (!cmd_iter_doc(&el, &st) || !bson_iter_init(&f, &st) || !bson_iter_next(&f))
            return dberr_set(err, 40323, "A pipeline stage specification object must contain "
                                         "exactly one field.");
        const char *name = bson_iter_key(&f);
        bool ok = false;
        for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
            ok = ok || !strcmp(name, allowed[i]);
        if (!ok) { /* an unknown stage fails as in any pipeline (40324) */
            bson_t one = BSON_INITIALIZER;
            bson_iter_t oi;
            BSON_APPEND_DOCUMENT(&one, "0", &st);
            bson_t wrap = BSON_INITIALIZER;
            BSON_APPEND_ARRAY(&wrap, "p", &one);
            bson_iter_init_find(&oi, &wrap, "p");
            pipeline_t *p = pipeline_new(&oi, PIPELINE_AGGREGATE, NULL, err);
            pipeline_destroy(p);
            bson_destroy(&one);
            bson_destroy(&wrap);
            if (p)
                dberr_set(err, DBERR_ILLEGAL_OPERATION,
                          "%s is not permitted in a $changeStream pipeline", name);
            return false;
        }
        bson_append_document(&arr, cmd_index_key(n++, key, sizeof key), -1, &st);
    }
    bson_append_array_end(rest, &arr);
    return true;
}

bool cs_reader_reply(cursor_t *c, bson_t *reply, const char *field, int64_t max, uint32_t *n,
                     bool *ended, dberr_t *err)
{
    cs_reader_t *r = c->stream;
    bson_t cur, batch;
    uint32_t count = 0;
    bson_append_document_begin(reply, "cursor", -1, &cur);
    bson_append_array_begin(&cur, field, -1, &batch);
    bool ok = r->fill(c, &batch, &count, max, err);
    bson_append_array_end(&cur, &batch);
    if (r->resume_pos)
        cs_append_token(&cur, "postBatchResumeToken", *r->resume_pos);
    BSON_APPEND_INT64(&cur, "id", r->ended ? 0 : c->id);
    BSON_APPEND_UTF8(&cur, "ns", c->ns);
    bson_append_document_end(reply, &cur);
    if (n)
        *n = count;
    if (ended)
        *ended = r->ended;
    return ok;
}

/* The change stream reader's fill: the events after the stream's position. */
static bool cs_reader_fill(cursor_t *c, bson_t *batch, uint32_t *n, int64_t max, dberr_t *err)
{
    return cs_fill(c->stream, batch, n, max, err);
}

bool changestream_aggregate(cmd_ctx_t *ctx, const char *coll, const bson_iter_t *pipeline,
                            int64_t batch_size, dberr_t *err)
{
    bson_iter_t el, f;
    bson_t first, spec, rest = BSON_INITIALIZER;
    bool all_cluster = false, ok = false;
    cs_stream_t *s = bson_malloc0(sizeof *s);
    s->reader.fill = cs_reader_fill;
    s->reader.resume_pos = &s->pos;
    s->reader.await_data = true;
    bson_iter_recurse(pipeline, &el);
    bson_iter_next(&el);
    cmd_iter_doc(&el, &first);
    bson_iter_init_find(&f, &first, "$changeStream");
    if (!BSON_ITER_HOLDS_DOCUMENT(&f) || !cmd_iter_doc(&f, &spec)) {
        dberr_set(err, 50808, "$changeStream stage expects a document as argument");
        goto cleanup;
    }
    if (ctx->in_txn) {
        dberr_set(err, DBERR_OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
                  "$changeStream cannot run in a multi-document transaction");
        goto cleanup;
    }
    if (!cs_parse_spec(ctx, &spec, s, &all_cluster, err) || !cs_check_stages(pipeline, &rest, err))
        goto cleanup;
    bool admin = !strcmp(ctx->db, "admin");
    if (all_cluster) {
        if (!admin || coll) {
            dberr_set(err, DBERR_INVALID_NAMESPACE,
                      "A $changeStream with 'allChangesForCluster:true' may only be opened on the "
                      "'admin' database, and with no collection name");
            goto cleanup;
        }
        s->level = CS_CLUSTER;
    } else if (admin || !strcmp(ctx->db, "config") || !strcmp(ctx->db, "local")) {
        dberr_set(err, DBERR_INVALID_NAMESPACE,
                  "$changeStream may not be opened on the internal %s database", ctx->db);
        goto cleanup;
    } else if (coll && !strncmp(coll, "system.", 7)) {
        dberr_set(err, DBERR_INVALID_NAMESPACE,
                  "$changeStream may not be opened on the internal %s.%s collection", ctx->db,
                  coll);
        goto cleanup;
    } else {
        s->level = coll ? CS_COLLECTION : CS_DATABASE;
    }
    if (coll) {
        collection_t *c = catalog_get(server.catalog, ctx->db, coll);
        if (c && collection_is_view(c)) {
            dberr_set(err, 166, "Namespace %s.%s is a view, not a collection", ctx->db, coll);
            goto cleanup;
        }
    }
    snprintf(s->db, sizeof s->db, "%s", ctx->db);
    snprintf(s->coll, sizeof s->coll, "%s", coll ? coll : "");
    bson_iter_t stages;
    bson_t arr;
    if (bson_iter_init_find(&stages, &rest, "pipeline") && cmd_iter_doc(&stages, &arr) &&
        !bson_empty(&arr) && !(s->pipeline = pipeline_new(&stages, PIPELINE_AGGREGATE, NULL, err)))
        goto cleanup;
    char ns[512];
    if (coll)
        snprintf(ns, sizeof ns, "%s.%s", ctx->db, coll);
    else
        snprintf(ns, sizeof ns, "%s.$cmd.aggregate", ctx->db);
    cursor_t *c = cursors_open(server.cursors, ns, server_now_ms());
    c->conn_id = ctx->client->id;
    c->owner = access_owner(ctx->client);
    c->no_timeout = ctx->cursor_no_timeout;
    c->stream = s;
    c->stream_free = cs_stream_free;
    s = NULL;
    bool ended = false;
    ok = cs_reader_reply(c, ctx->reply, "firstBatch", batch_size < 0 ? 101 : batch_size, NULL,
                         &ended, err);
    if (!ok || ended)
        cursors_close(server.cursors, c->id);
cleanup:
    if (s)
        cs_stream_free(s);
    bson_destroy(&rest);
    return ok;
}

/* ---- getMore and parking ---- */

static void cs_on_timer(uv_timer_t *t);

/* Makes the timer fire within `ms` (never later than it already would). */
static void cs_arm(uint64_t ms)
{
    if (!cs.timer_init) {
        uv_timer_init(server.loop, &cs.timer);
        cs.timer_init = true;
    }
    uint64_t due = uv_now(server.loop) + ms;
    if (cs.timer_due && cs.timer_due <= due)
        return;
    cs.timer_due = due;
    uv_timer_start(&cs.timer, cs_on_timer, ms, 0);
}

static void cs_on_durable(journal_waiter_t *w, bool ok, const char *errmsg);

/* Wakes the parked getMores once record `lsn` is durable. */
static void cs_watch(uint64_t lsn)
{
    if (cs.nparks == 0)
        return;
    if (lsn == 0 || journal_is_durable(lsn, journal_mode() == JOURNAL_FSYNC)) {
        cs_arm(CS_COALESCE_MS);
        return;
    }
    if (lsn > cs.want_lsn)
        cs.want_lsn = lsn;
    if (cs.waiter.linked)
        return;
    cs.waiter.lsn = cs.want_lsn;
    cs.waiter.sync = journal_mode() == JOURNAL_FSYNC;
    cs.waiter.done = cs_on_durable;
    journal_wait(&cs.waiter);
}

static void cs_on_durable(journal_waiter_t *w, bool ok, const char *errmsg)
{
    cs_arm(CS_COALESCE_MS);
    if (cs.want_lsn > w->lsn)
        cs_watch(cs.want_lsn);
}

static void cs_on_commit(uint64_t lsn)
{
    if (cs.nparks)
        cs_watch(lsn);
}

static void cs_park_remove(size_t i)
{
    cs.parks[i] = cs.parks[--cs.nparks];
}

/* A parked getMore's reply: the events after its stream's position, or
 * nothing yet. */
typedef struct cs_answer {
    cs_park_t park;
    bson_t *reply; /* the whole reply body, ok and cluster time included (heap:
                    * a bson_t inside a malloc'ed array would lose its alignment) */
    bool close;    /* the cursor ends (invalidate or error) */
} cs_answer_t;

/* Builds the reply for `p` into a->reply; false (nothing built) when its
 * stream has no event yet and its wait goes on. */
static bool cs_try_answer(cs_park_t *p, uint64_t now, cs_answer_t *a, size_t slot)
{
    cursor_t *c = cursors_get(server.cursors, p->cursor_id);
    dberr_t err;
    dberr_clear(&err);
    a->reply = cs_reply_doc(slot);
    a->park = *p;
    a->close = false;
    if (!c || (!c->stream && !c->tail)) {
        dberr_set(&err, 237, "cursor id %lld was killed while its getMore waited",
                  (long long)p->cursor_id);
        cmd_error_reply(a->reply, &err);
        return true;
    }
    cs_reader_t *r = c->stream; /* NULL: a capped collection's tailable cursor */
    if (now < p->not_before_ms && p->deadline_ms > now && !server.stopping) {
        bson_destroy(a->reply); /* paced: the stream had results less than CS_PACE_MS ago */
        a->reply = NULL;
        return false;
    }
    uint32_t n = 0;
    bool ended = false;
    bool ok = r ? cs_reader_reply(c, a->reply, "nextBatch", p->batch_size, &n, &ended, &err)
                : tailable_reply(a->reply, c, p->batch_size, &n, &err);
    if (ok && n == 0 && !ended && p->deadline_ms > now && !server.stopping) {
        bson_destroy(a->reply);
        a->reply = NULL;
        return false;
    }
    c->last_used_ms = server_now_ms();
    cs_note_sent(r, n, p->batch_size, now);
    if (ok) {
        BSON_APPEND_DOUBLE(a->reply, "ok", 1.0);
    } else {
        bson_reinit(a->reply);
        cmd_error_reply(a->reply, &err);
    }
    a->close = !ok || ended;
    return true;
}

static void cs_on_timer(uv_timer_t *t)
{
    cs.timer_due = 0;
    uint64_t now = uv_now(server.loop), next = 0;
    /* build the answers first: answering runs the connection's next
     * request, which may park again */
    cs_answer_t *ready = cs.nparks ? bson_malloc(cs.nparks * sizeof *ready) : NULL;
    cs_reply_bufs_reserve(cs.nparks);
    size_t nready = 0;
    for (size_t i = 0; i < cs.nparks;) {
        cs_park_t *p = &cs.parks[i];
        if (cs_try_answer(p, now, &ready[nready], nready)) {
            nready++;
            cs_park_remove(i);
            continue;
        }
        uint64_t due = p->not_before_ms > now ? p->not_before_ms : p->deadline_ms;
        if (!next || due < next)
            next = due;
        i++;
    }
    for (size_t i = 0; i < nready; i++) {
        cs_answer_t *a = &ready[i];
        if (a->close)
            cursors_close(server.cursors, a->park.cursor_id);
        cmd_append_cluster_time(a->reply);
        a->park.client->wait_lsn = 0;
        a->park.client->send_parked_reply(a->park.client, a->reply);
        cs_reply_done(i, a->reply);
    }
    bson_free(ready);
    if (cs.nparks && next)
        cs_arm(next > now ? next - now : 0);
}

bool changestream_get_more(cmd_ctx_t *ctx, cursor_t *c, int64_t batch_size, dberr_t *err)
{
    bson_iter_t it;
    cs_reader_t *r = c->stream;
    int64_t await_ms = r->await_data ? CS_DEFAULT_AWAIT_MS : 0;
    if (cmd_find(ctx, "maxTimeMS", &it)) {
        if (!r->await_data)
            return dberr_set(err, DBERR_BAD_VALUE, "cannot set maxTimeMS on getMore command for "
                                                   "a non-awaitData cursor");
        await_ms = bson_iter_as_int64(&it);
    }
    c->last_used_ms = server_now_ms();
    uint64_t now = uv_now(server.loop);
    if (await_ms > 0 && r->last_sent_ms && now < r->last_sent_ms + CS_PACE_MS &&
        !server.stopping) {
        /* results went out less than CS_PACE_MS ago: gather more first */
        changestream_park(ctx, c, batch_size, await_ms);
        return true;
    }
    /* answer at once when there is something to return */
    bson_t reply = BSON_INITIALIZER;
    uint32_t n = 0;
    int64_t id = c->id;
    bool ended = false;
    bool ok = cs_reader_reply(c, &reply, "nextBatch", batch_size, &n, &ended, err);
    if (!ok || n > 0 || ended || await_ms <= 0 || server.stopping) {
        cs_note_sent(r, n, batch_size, now);
        bson_concat(ctx->reply, &reply);
        bson_destroy(&reply);
        if (!ok || ended)
            cursors_close(server.cursors, id);
        return ok;
    }
    bson_destroy(&reply);
    changestream_park(ctx, c, batch_size, await_ms);
    return true;
}

void changestream_park(cmd_ctx_t *ctx, cursor_t *c, int64_t batch_size, int64_t await_ms)
{
    if (!cs.hooked) { /* the first wait: be told of commits from now on */
        journal_set_commit_hook(cs_on_commit);
        cs.hooked = true;
    }
    if (cs.nparks == cs.cap) {
        cs.cap = cs.cap ? cs.cap * 2 : 16;
        cs.parks = bson_realloc(cs.parks, cs.cap * sizeof *cs.parks);
    }
    uint64_t now = uv_now(server.loop);
    const cs_reader_t *r = c->stream;
    uint64_t not_before = r && r->last_sent_ms ? r->last_sent_ms + CS_PACE_MS : 0;
    cs.parks[cs.nparks++] = (cs_park_t){ctx->client, c->id, batch_size, now + (uint64_t)await_ms,
                                        not_before};
    ctx->parked = true;
    uint64_t lsn;
    if (c->stream && cs_pending(&lsn))
        cs_watch(lsn);
    if (not_before > now && not_before < now + (uint64_t)await_ms)
        cs_arm(not_before - now); /* results may be waiting already */
    else
        cs_arm((uint64_t)await_ms);
}

void changestream_client_closed(cmd_client_t *client)
{
    for (size_t i = 0; i < cs.nparks;) {
        if (cs.parks[i].client == client)
            cs_park_remove(i);
        else
            i++;
    }
}
