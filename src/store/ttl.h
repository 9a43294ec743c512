/* ttl: the TTL monitor's pass over every collection, run a slice at a
 * time on its own fiber so a large expired set does not hold the loop;
 * one pass at a time. */
#ifndef ATOMDB_TTL_H
#define ATOMDB_TTL_H

#include <stdbool.h>
#include <stdint.h>

#include "store/catalog.h"

/* Starts a pass deleting documents whose TTL-indexed date is at or before
 * `now_ms` minus the index's expireAfterSeconds, and runs its first slice.
 * False (nothing started) while a pass is still running. */
bool ttl_pass_start(catalog_t *cat, int64_t now_ms);
/* True while a pass has slices left to run. */
bool ttl_pass_running(void);
/* Runs the next slice of the running pass; true while slices are left.
 * Loop stack only. */
bool ttl_pass_step(void);
/* Shutdown: ends the running pass at its next check, if any. */
void ttl_pass_stop(void);

#endif
