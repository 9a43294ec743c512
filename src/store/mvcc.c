/* mvcc: sequence numbers, open snapshots, kept versions and graveyards.
 * Loop thread only. */
#include "store/mvcc.h"

#include <bson/bson.h>

typedef struct mvcc_grave {
    uint64_t coll_id;
    uint64_t seq;      /* the delete */
    record_t *rec;     /* a reference */
} mvcc_grave_t;

static struct {
    uint64_t seq;
    uint64_t next_coll_id;
    /* open snapshots: a small multiset of sequence numbers */
    uint64_t *snaps;
    size_t nsnaps, capsnaps;
    /* records given an `older` link, to cut when the last snapshot closes */
    record_t **chained;
    size_t nchained, capchained;
    mvcc_grave_t *graves;
    size_t ngraves, capgraves;
} mvcc;

uint64_t mvcc_current_seq(void)
{
    return mvcc.seq;
}

void mvcc_stamp(record_t *r)
{
    r->seq = ++mvcc.seq;
}

uint64_t mvcc_new_collection_id(void)
{
    return ++mvcc.next_coll_id;
}

bool mvcc_active(void)
{
    return mvcc.nsnaps > 0;
}

uint64_t mvcc_snapshot_open(void)
{
    if (mvcc.nsnaps == mvcc.capsnaps) {
        mvcc.capsnaps = mvcc.capsnaps ? mvcc.capsnaps * 2 : 16;
        mvcc.snaps = bson_realloc(mvcc.snaps, mvcc.capsnaps * sizeof *mvcc.snaps);
    }
    mvcc.snaps[mvcc.nsnaps++] = mvcc.seq;
    return mvcc.seq;
}

/* The last snapshot closed: nothing needs old versions any more. */
static void mvcc_release_all(void)
{
    for (size_t i = 0; i < mvcc.nchained; i++) {
        record_t *r = mvcc.chained[i];
        record_t *older = r->older;
        r->older = NULL;
        record_unref(older);
        record_unref(r);
    }
    mvcc.nchained = 0;
    for (size_t i = 0; i < mvcc.ngraves; i++)
        record_unref(mvcc.graves[i].rec);
    mvcc.ngraves = 0;
}

void mvcc_snapshot_close(uint64_t snapshot)
{
    for (size_t i = 0; i < mvcc.nsnaps; i++) {
        if (mvcc.snaps[i] == snapshot) {
            mvcc.snaps[i] = mvcc.snaps[--mvcc.nsnaps];
            break;
        }
    }
    if (mvcc.nsnaps == 0)
        mvcc_release_all();
}

void mvcc_replaced(record_t *newer, record_t *old)
{
    if (!mvcc_active())
        return;
    newer->older = record_ref(old);
    if (mvcc.nchained == mvcc.capchained) {
        mvcc.capchained = mvcc.capchained ? mvcc.capchained * 2 : 64;
        mvcc.chained = bson_realloc(mvcc.chained, mvcc.capchained * sizeof *mvcc.chained);
    }
    mvcc.chained[mvcc.nchained++] = record_ref(newer);
}

void mvcc_deleted(uint64_t coll_id, record_t *old)
{
    if (!mvcc_active())
        return;
    if (mvcc.ngraves == mvcc.capgraves) {
        mvcc.capgraves = mvcc.capgraves ? mvcc.capgraves * 2 : 64;
        mvcc.graves = bson_realloc(mvcc.graves, mvcc.capgraves * sizeof *mvcc.graves);
    }
    mvcc.graves[mvcc.ngraves++] = (mvcc_grave_t){coll_id, ++mvcc.seq, record_ref(old)};
}

void mvcc_foreach_deleted(uint64_t coll_id, uint64_t snapshot, void (*fn)(record_t *r, void *ctx),
                          void *ctx)
{
    for (size_t i = 0; i < mvcc.ngraves; i++) {
        mvcc_grave_t *g = &mvcc.graves[i];
        if (g->coll_id != coll_id || g->seq <= snapshot)
            continue;
        record_t *v = mvcc_visible(g->rec, snapshot);
        if (v)
            fn(v, ctx);
    }
}
