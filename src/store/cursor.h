/* cursor: the open cursors of find and aggregate. A cursor holds
 * references to the records of its result (records are immutable, so later
 * writes never change what it returns) and the projection to apply; it is
 * closed when exhausted, by killCursors, or after 10 idle minutes. */
#ifndef ATOMDB_CURSOR_H
#define ATOMDB_CURSOR_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "doc/matcher.h"
#include "doc/projection.h"
#include "store/record.h"

#define CURSOR_IDLE_TIMEOUT_MS (10 * 60 * 1000)

/* One open cursor. */
typedef struct cursor {
    int64_t id;               /* never 0 */
    char ns[256];             /* "db.coll" the cursor reads */
    recvec_t recs;            /* the result, each with a reference */
    size_t pos;               /* next record to return */
    projection_t *projection; /* owned, or NULL */
    matcher_t *matcher;       /* owned, for positional projection, or NULL */
    int64_t last_used_ms;     /* for the idle timeout */
    int64_t conn_id;          /* connection that opened it */
    uint64_t owner;           /* the user who opened it (an opaque id), 0: none */
    bool no_timeout;          /* noCursorTimeout: never reaped for idleness */
    void *stream;             /* a change stream's state (cmd/changestream.c), or NULL */
    void (*stream_free)(void *stream); /* frees `stream` when the cursor closes */
    struct tailable *tail;    /* a tailable cursor's position (cmd/tailable.c; plain memory,
                               * freed with the cursor), or NULL */
} cursor_t;

typedef struct cursors cursors_t;

/* The table of open cursors. */
cursors_t *cursors_new(void);
void cursors_destroy(cursors_t *t);

/* Opens an empty cursor on `ns` with a fresh random id. */
cursor_t *cursors_open(cursors_t *t, const char *ns, int64_t now_ms);
/* The cursor with `id`, or NULL. */
cursor_t *cursors_get(const cursors_t *t, int64_t id);
/* Closes and frees cursor `id`; false when there was none. */
bool cursors_close(cursors_t *t, int64_t id);
/* Closes cursors idle since before now_ms - idle_ms (but those opened with
 * noCursorTimeout); returns how many. */
size_t cursors_reap(cursors_t *t, int64_t now_ms, int64_t idle_ms);
/* Number of open cursors. */
size_t cursors_count(const cursors_t *t);

#endif
