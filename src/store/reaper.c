/* reaper: a queue of detached maps freed from the front, a few hundred
 * entries per clock read, until the step's budget is used up. */
#include "store/reaper.h"

#include <bson/bson.h>
#include <uv.h>

/* Entries freed between two reads of the clock. */
#define REAPER_BATCH 256

typedef struct reaper_item {
    btree_t *map;
    void (*free_value)(void *);
    size_t left; /* entries not yet freed, plus one for the map */
    struct reaper_item *next;
} reaper_item_t;

static reaper_item_t *reaper_head, *reaper_tail;
static size_t reaper_left;
static void (*reaper_wake)(void);

void reaper_add(btree_t *map, void (*free_value)(void *))
{
    if (!map)
        return;
    reaper_item_t *it = bson_malloc0(sizeof *it);
    it->map = map;
    it->free_value = free_value;
    it->left = btree_count(map) + 1;
    if (reaper_tail)
        reaper_tail->next = it;
    else
        reaper_head = it;
    reaper_tail = it;
    reaper_left += it->left;
    if (reaper_wake)
        reaper_wake();
}

bool reaper_step(uint64_t budget_ns)
{
    uint64_t t0 = uv_hrtime();
    while (reaper_head) {
        reaper_item_t *it = reaper_head;
        size_t freed;
        bool done = btree_destroy_some(it->map, it->free_value, REAPER_BATCH, &freed);
        if (done)
            freed = it->left;
        it->left -= freed;
        reaper_left -= freed;
        if (done) {
            reaper_head = it->next;
            if (!reaper_head)
                reaper_tail = NULL;
            bson_free(it);
        }
        if (uv_hrtime() - t0 >= budget_ns)
            break;
    }
    return reaper_head != NULL;
}

size_t reaper_pending(void)
{
    return reaper_left;
}

void reaper_set_wake(void (*wake)(void))
{
    reaper_wake = wake;
}

void reaper_drain(void)
{
    while (reaper_step(UINT64_MAX))
        ;
}
