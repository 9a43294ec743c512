/* mvcc: sequence numbers, open snapshots and the change window (a queue
 * in sequence order, trimmed from its head as the oldest snapshot
 * advances). Loop thread only. */
#include "store/mvcc.h"

#include <bson/bson.h>
#include <string.h>

#include "util/vec.h"

static struct {
    uint64_t seq;
    uint64_t next_coll_id;
    uint64_t last_delete_seq;
    /* open snapshots: a small multiset of sequence numbers */
    uint64_t *snaps;
    size_t nsnaps, capsnaps;
    /* the window: changes[head .. len) in sequence order */
    mvcc_change_t *changes;
    size_t head, len, cap;
} mvcc;

uint64_t mvcc_current_seq(void)
{
    return mvcc.seq;
}

void mvcc_stamp(record_t *r)
{
    record_set_seq(r, ++mvcc.seq);
}

uint64_t mvcc_new_collection_id(void)
{
    return ++mvcc.next_coll_id;
}

bool mvcc_active(void)
{
    return mvcc.nsnaps > 0;
}

size_t mvcc_window_len(void)
{
    return mvcc.len - mvcc.head;
}

uint64_t mvcc_snapshot_open(void)
{
    VEC_RESERVE_ONE(mvcc.snaps, mvcc.nsnaps, mvcc.capsnaps, 16);
    mvcc.snaps[mvcc.nsnaps++] = mvcc.seq;
    return mvcc.seq;
}

static void mvcc_change_release(mvcc_change_t *ch)
{
    record_unref(ch->before);
    record_unref(ch->after);
}

/* Drops the changes no open snapshot can see past: those at or before the
 * oldest open snapshot (all of them when none is open). */
static void mvcc_trim(void)
{
    uint64_t oldest = UINT64_MAX;
    for (size_t i = 0; i < mvcc.nsnaps; i++)
        if (mvcc.snaps[i] < oldest)
            oldest = mvcc.snaps[i];
    while (mvcc.head < mvcc.len && mvcc.changes[mvcc.head].seq <= oldest)
        mvcc_change_release(&mvcc.changes[mvcc.head++]);
    if (mvcc.head == mvcc.len) {
        mvcc.head = mvcc.len = 0;
    } else if (mvcc.head > mvcc.cap / 2) {
        memmove(mvcc.changes, mvcc.changes + mvcc.head,
                (mvcc.len - mvcc.head) * sizeof *mvcc.changes);
        mvcc.len -= mvcc.head;
        mvcc.head = 0;
    }
}

void mvcc_snapshot_close(uint64_t snapshot)
{
    for (size_t i = 0; i < mvcc.nsnaps; i++) {
        if (mvcc.snaps[i] == snapshot) {
            mvcc.snaps[i] = mvcc.snaps[--mvcc.nsnaps];
            break;
        }
    }
    mvcc_trim();
}

static void mvcc_push(uint64_t coll_id, uint64_t seq, record_t *before, record_t *after)
{
    VEC_RESERVE_ONE(mvcc.changes, mvcc.len, mvcc.cap, 64);
    mvcc.changes[mvcc.len++] = (mvcc_change_t){coll_id, seq, before ? record_ref(before) : NULL,
                                               after ? record_ref(after) : NULL};
}

void mvcc_inserted(uint64_t coll_id, record_t *r)
{
    if (mvcc_active())
        mvcc_push(coll_id, record_seq(r), NULL, r);
}

void mvcc_replaced(uint64_t coll_id, record_t *newer, record_t *old)
{
    if (mvcc_active())
        mvcc_push(coll_id, record_seq(newer), old, newer);
}

void mvcc_deleted(uint64_t coll_id, record_t *old)
{
    if (!mvcc_active())
        return;
    mvcc.last_delete_seq = ++mvcc.seq;
    mvcc_push(coll_id, mvcc.seq, old, NULL);
}

bool mvcc_deletes_after(uint64_t snapshot)
{
    return mvcc.last_delete_seq > snapshot;
}

const mvcc_change_t *mvcc_changes_after(uint64_t snapshot, size_t *n)
{
    /* binary search for the first change with seq > snapshot */
    size_t lo = mvcc.head, hi = mvcc.len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mvcc.changes[mid].seq <= snapshot)
            lo = mid + 1;
        else
            hi = mid;
    }
    *n = mvcc.len - lo;
    /* before the first change the window has no array: no offset on NULL */
    return mvcc.changes ? mvcc.changes + lo : NULL;
}
