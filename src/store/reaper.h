/* reaper: frees what a drop detached (the records and index maps of a
 * dropped collection or index) a slice at a time from the loop's idle
 * turns, so dropping a collection of millions of documents answers at
 * once and never holds the loop. Loop thread only. */
#ifndef ATOMDB_REAPER_H
#define ATOMDB_REAPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/btree.h"

/* Takes `map` (now unreachable) to be freed later, calling `free_value`
 * (may be NULL) on each value. Accepts NULL. */
void reaper_add(btree_t *map, void (*free_value)(void *));
/* Frees for about `budget_ns` of loop time (at least a few entries).
 * True when more remains. */
bool reaper_step(uint64_t budget_ns);
/* Entries still to free (serverStatus). */
size_t reaper_pending(void);
/* `wake` is called whenever work arrives: the caller schedules
 * reaper_step (cmd/op.c runs it from its idle handle); it must be cheap
 * when already scheduled. */
void reaper_set_wake(void (*wake)(void));
/* Frees everything now (shutdown, recovery starting over). */
void reaper_drain(void);

#endif
