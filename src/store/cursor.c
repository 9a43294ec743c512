/* cursor: the cursor table, an ordered map from id to cursor. */
#include "store/cursor.h"

#include <stdlib.h>
#include <string.h>

#include "util/omap.h"
#include "util/strjoin.h"

struct cursors {
    omap_t *byid; /* 8-byte id → cursor_t* (owned) */
    uint64_t rng;
};

static void cursor_free(void *p)
{
    cursor_t *c = p;
    recvec_destroy(&c->recs);
    projection_destroy(c->projection);
    matcher_destroy(c->matcher);
    if (c->stream && c->stream_free)
        c->stream_free(c->stream);
    bson_free(c->tail);
    bson_free(c);
}

cursors_t *cursors_new(void)
{
    cursors_t *t = bson_malloc0(sizeof *t);
    t->byid = omap_new();
    t->rng = (uint64_t)rand() << 32 ^ (uint64_t)rand() ^ 0x2545F4914F6CDD1Dull;
    return t;
}

void cursors_destroy(cursors_t *t)
{
    if (!t)
        return;
    omap_destroy(t->byid, cursor_free);
    bson_free(t);
}

cursor_t *cursors_open(cursors_t *t, const char *ns, int64_t now_ms)
{
    cursor_t *c = bson_malloc0(sizeof *c);
    recvec_init(&c->recs);
    strjoin3(c->ns, sizeof c->ns, ns, NULL, NULL);
    c->last_used_ms = now_ms;
    do {
        t->rng ^= t->rng << 13;
        t->rng ^= t->rng >> 7;
        t->rng ^= t->rng << 17;
        c->id = (int64_t)(t->rng & 0x3fffffffffffffffull);
    } while (c->id == 0 || !omap_insert(t->byid, &c->id, sizeof c->id, c));
    return c;
}

cursor_t *cursors_get(const cursors_t *t, int64_t id)
{
    return omap_get(t->byid, &id, sizeof id);
}

bool cursors_close(cursors_t *t, int64_t id)
{
    cursor_t *c = omap_remove(t->byid, &id, sizeof id);
    if (!c)
        return false;
    cursor_free(c);
    return true;
}

size_t cursors_reap(cursors_t *t, int64_t now_ms, int64_t idle_ms)
{
    size_t closed = 0;
    omap_node_t *n = omap_seek(t->byid, NULL, 0);
    while (n) {
        omap_node_t *next = omap_next(n);
        cursor_t *c = omap_node_value(n);
        if (!c->no_timeout && c->last_used_ms < now_ms - idle_ms) {
            cursors_close(t, c->id);
            closed++;
        }
        n = next;
    }
    return closed;
}

size_t cursors_count(const cursors_t *t)
{
    return omap_count(t->byid);
}
