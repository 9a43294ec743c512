/* changestream: $changeStream — what the two files of change streams
 * share: the stream's state, resume tokens and positions (csevent.c turns
 * history entries into mongod 7's change events; changestream.c opens
 * streams in aggregate, answers getMore and parks it until a commit is
 * durable). See docs/change-streams.md. Loop thread only. */
#ifndef ATOMDB_CHANGESTREAM_H
#define ATOMDB_CHANGESTREAM_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd-private.h"
#include "doc/pipeline.h"
#include "journal/history.h"
#include "store/clock.h"
#include "store/cursor.h"

/* A position in the history: events sort by (ts, k, kind). k numbers the
 * events of one commit ((operation + 1) << 20 | event of that operation);
 * CS_K_END is past every event of the commit (a high-water mark). */
typedef struct cs_pos {
    clock_ts_t ts;
    uint64_t k;
    uint8_t kind; /* 0: an event; 1: the invalidate that follows it */
} cs_pos_t;

#define CS_K_END UINT64_MAX

/* Which changes a stream sees. */
typedef enum cs_level { CS_COLLECTION, CS_DATABASE, CS_CLUSTER } cs_level_t;

/* fullDocument and fullDocumentBeforeChange. */
typedef enum cs_image {
    CS_IMAGE_DEFAULT,    /* fullDocument: default / fullDocumentBeforeChange: off */
    CS_IMAGE_LOOKUP,     /* updateLookup: the document as it is now */
    CS_IMAGE_WHEN_AVAILABLE,
    CS_IMAGE_REQUIRED,
} cs_image_t;

/* What a cursor whose getMore parks until a commit keeps first in its
 * `stream` (a change stream here, the oplog view's tailable cursors in
 * cmd/oplog.c): how to build its batch, and whether it waits. */
typedef struct cs_reader {
    /* Appends to `batch` (an array, *n elements so far) the next results,
     * at most `max` (0: no count bound); sets `ended` once the cursor is
     * finished. */
    bool (*fill)(cursor_t *c, bson_t *batch, uint32_t *n, int64_t max, dberr_t *err);
    bool ended;                 /* finished: its id goes out as 0, it closes */
    const cs_pos_t *resume_pos; /* sent as postBatchResumeToken after a batch (NULL: none) */
    bool await_data; /* an empty getMore parks for its maxTimeMS (else answers at once) */
    uint64_t last_sent_ms; /* uv_now() when a getMore last returned results (pacing, 0: never) */
} cs_reader_t;

/* One open stream (a cursor's `stream`). */
typedef struct cs_stream {
    cs_reader_t reader; /* first: changestream_get_more reads it */
    cs_level_t level;
    char db[128];
    char coll[256];             /* CS_COLLECTION only */
    cs_pos_t pos;               /* every event up to here was returned or filtered */
    cs_image_t full_document;
    cs_image_t before_change;
    bool show_expanded;         /* showExpandedEvents */
    pipeline_t *pipeline;       /* the stages after $changeStream, or NULL */
} cs_stream_t;

/* 0 when a < b ... as clock_cmp. */
int cs_pos_cmp(cs_pos_t a, cs_pos_t b);

/* Appends the resume token {_data: "82..."} for `pos` as `key` of `out`. */
void cs_append_token(bson_t *out, const char *key, cs_pos_t pos);

/* Parses a resume token document; false with InvalidResumeToken (260). */
bool cs_parse_token(const bson_iter_t *it, const char *field, cs_pos_t *out, dberr_t *err);

/* Appends to `batch` (an array being built, *n elements so far) the events
 * of `s` after s->pos, up to `max` events, advancing s->pos. Stops at the
 * first entry whose log record is not yet durable. False with err when an
 * event cannot be produced (a required image missing, a following stage
 * failing or changing _id, the history lost past s->pos). */
bool cs_fill(cs_stream_t *s, bson_t *batch, uint32_t *n, int64_t max, dberr_t *err);

/* True when the newest history entry is waiting for its log record to be
 * durable; *lsn gets that record. */
bool cs_pending(uint64_t *lsn);

/* True when entry `e`'s log record is durable (a reader may show it). */
bool cs_entry_visible(const history_entry_t *e);

/* Fails with ChangeStreamHistoryLost (286) when events after `pos` were
 * dropped by retention. */
bool cs_check_history(cs_pos_t pos, dberr_t *err);

/* ---- events shared between streams (cscache.c) ---- */

/* One operation of a cached history entry. */
typedef struct cs_shared_op {
    uint64_t base;          /* its events' k: (operation + 1) << 20 | event */
    char kind;              /* its `o`: i, u, r, d or c */
    const char *db, *coll;  /* borrowed from the entry (coll NULL for a catalog change) */
    const uint8_t *op_data; /* the operation document, borrowed from the entry */
    uint32_t op_len;
    uint8_t *event;         /* a document change's event as a stream with no image
                             * options and no expanded events sees it (owned), or NULL
                             * while not built (or too big to keep) */
    uint32_t event_len;
} cs_shared_op_t;

/* A history entry as cached: its identity and its operations. */
typedef struct cs_shared_entry {
    clock_ts_t ts;
    int64_t wall_ms;
    const uint8_t *data; /* the entry's document (NULL: the slot is free) */
    uint32_t len;
    uint32_t nops;       /* operations a stream may report (with `o` and `db`) */
    cs_shared_op_t *ops;
    size_t bytes;        /* held by this entry: ops and events */
} cs_shared_entry_t;

/* The cached form of entry `e` (parsed on the first call), borrowed until
 * the next call of cscache_entry or cscache_clear. */
cs_shared_entry_t *cscache_entry(const history_entry_t *e);

/* Keeps a copy of `ev` as the shared event of operation `i` of `se`;
 * false (nothing kept) when it is too big or the cache is full. */
bool cscache_keep(cs_shared_entry_t *se, uint32_t i, const bson_t *ev);

/* Forgets every cached entry. */
void cscache_clear(void);

/* Appends {cursor: {<field>: [...], postBatchResumeToken, id, ns}} for the
 * cursor `c` whose `stream` starts with a cs_reader_t, with at most `max`
 * results (0: no count bound); *n gets how many and *ended whether the
 * cursor is finished (its id was 0), each when not NULL. */
bool cs_reader_reply(cursor_t *c, bson_t *reply, const char *field, int64_t max, uint32_t *n,
                     bool *ended, dberr_t *err);

/* getMore on a change stream cursor, or any cursor whose `stream` starts
 * with a cs_reader_t (query.c hands it over); parks an awaitData one. */
bool changestream_get_more(cmd_ctx_t *ctx, cursor_t *c, int64_t batch_size, dberr_t *err);

/* Parks the getMore of `ctx` on awaitData cursor `c` (a change stream or
 * a tailable cursor, cmd/tailable.c) until a commit gives it something to
 * return or `await_ms` passes; the reply is sent then. */
void changestream_park(cmd_ctx_t *ctx, cursor_t *c, int64_t batch_size, int64_t await_ms);

/* aggregate whose first stage is $changeStream (query.c hands it over). */
bool changestream_aggregate(cmd_ctx_t *ctx, const char *coll, const bson_iter_t *pipeline,
                            int64_t batch_size, dberr_t *err);

/* The connection closed: forget its parked getMore. */
void changestream_client_closed(cmd_client_t *client);

#endif
