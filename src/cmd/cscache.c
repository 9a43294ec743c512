/* cscache: change events shared between streams — the operations of
 * recently read history entries, parsed once, with each document change's
 * event for the streams that add nothing of their own (no image options,
 * no expanded events) built once and copied as bytes into every such
 * stream's batch. Bounded; loop thread only. See docs/change-streams.md. */
#include "cmd/changestream.h"

#include <string.h>

#include "util/bsonview.h"

/* Entries remembered (a power of two), bytes of events kept in all, and
 * the largest event kept (bigger ones are built by each stream). */
#define CSCACHE_SLOTS 1024
#define CSCACHE_MAX_BYTES (16u * 1024 * 1024)
#define CSCACHE_MAX_EVENT (256u * 1024)

static struct {
    cs_shared_entry_t slots[CSCACHE_SLOTS];
    size_t bytes; /* events and op arrays held */
    uint64_t hits, misses;
} cache;

static bool cscache_used(const cs_shared_entry_t *se)
{
    return se->data != NULL;
}

static void cscache_entry_free(cs_shared_entry_t *se)
{
    for (uint32_t i = 0; i < se->nops; i++)
        bson_free(se->ops[i].event);
    bson_free(se->ops);
    cache.bytes -= se->bytes;
    memset(se, 0, sizeof *se);
}

void cscache_clear(void)
{
    for (size_t i = 0; i < CSCACHE_SLOTS; i++)
        if (cscache_used(&cache.slots[i]))
            cscache_entry_free(&cache.slots[i]);
}

/* Parses entry `e`'s operations into `se`. */
static void cscache_fill(cs_shared_entry_t *se, const history_entry_t *e)
{
    bson_t doc;
    bson_iter_t it, el;
    se->ts = e->ts;
    se->wall_ms = e->wall_ms;
    se->data = e->data;
    se->len = e->len;
    history_entry_view(e, &doc);
    if (!bson_iter_init_find(&it, &doc, "ops") || !bson_iter_recurse(&it, &el))
        return;
    uint32_t cap = e->nops ? e->nops : 4;
    se->ops = bson_malloc0(cap * sizeof *se->ops);
    uint64_t opi = 0;
    while (bson_iter_next(&el)) {
        opi++;
        bson_t op;
        if (!cmd_iter_doc(&el, &op))
            continue;
        bson_iter_t f;
        const char *kind = NULL, *db = NULL, *coll = NULL;
        bson_iter_init(&f, &op);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (!BSON_ITER_HOLDS_UTF8(&f))
                continue;
            if (k[0] == 'o' && !k[1] && !kind)
                kind = bson_iter_utf8(&f, NULL);
            else if (k[0] == 'd' && k[1] == 'b' && !k[2] && !db)
                db = bson_iter_utf8(&f, NULL);
            else if (k[0] == 'c' && !k[1] && !coll)
                coll = bson_iter_utf8(&f, NULL);
        }
        if (!kind || !db)
            continue; /* as cs_entry_events: not an operation a stream reports */
        if (se->nops == cap) {
            cap *= 2;
            se->ops = bson_realloc(se->ops, cap * sizeof *se->ops);
        }
        cs_shared_op_t *o = &se->ops[se->nops++];
        memset(o, 0, sizeof *o);
        o->base = opi << 20;
        o->kind = kind[0];
        o->db = db;
        o->coll = coll;
        o->op_data = bson_get_data(&op);
        o->op_len = op.len;
    }
    se->bytes = cap * sizeof *se->ops;
    cache.bytes += se->bytes;
}

cs_shared_entry_t *cscache_entry(const history_entry_t *e)
{
    uint64_t h = ((uint64_t)e->ts.t * 0x9E3779B1u + e->ts.i) & (CSCACHE_SLOTS - 1);
    cs_shared_entry_t *se = &cache.slots[h];
    if (cscache_used(se) && !clock_cmp(se->ts, e->ts) && se->data == e->data && se->len == e->len &&
        se->wall_ms == e->wall_ms) {
        cache.hits++;
        return se;
    }
    cache.misses++;
    if (cscache_used(se))
        cscache_entry_free(se);
    if (cache.bytes > CSCACHE_MAX_BYTES)
        cscache_clear(); /* no other entry is in use between two entries' events */
    cscache_fill(se, e);
    return se;
}

bool cscache_keep(cs_shared_entry_t *se, uint32_t i, const bson_t *ev)
{
    cs_shared_op_t *o = &se->ops[i];
    if (ev->len > CSCACHE_MAX_EVENT || cache.bytes + ev->len > CSCACHE_MAX_BYTES)
        return false;
    o->event = bson_malloc(ev->len);
    memcpy(o->event, bson_get_data(ev), ev->len);
    o->event_len = ev->len;
    se->bytes += ev->len;
    cache.bytes += ev->len;
    return true;
}
