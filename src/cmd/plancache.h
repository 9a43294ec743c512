/* plancache: compiled filters and update documents kept between requests.
 *
 * Applications send the same few statements over and over (a flash sale's
 * {_id, stock: {$gte: 1}} / {$inc: {stock: -1}} thousands of times a
 * second); compiling them again for every request was about a third of the
 * server's own work on such a statement. Entries are keyed by the exact
 * BSON bytes and used exclusively: a request takes its compiled object out
 * of the cache and puts it back when done, so a parked request never
 * shares one. Only what compiles the same every time is cached: filters
 * without $expr, operator updates without arrayFilters, projections
 * without a text score, all only for commands without `let` or a
 * collation. */
#ifndef ATOMDB_CMD_PLANCACHE_H
#define ATOMDB_CMD_PLANCACHE_H

#include <bson/bson.h>
#include <stdbool.h>

#include "doc/matcher.h"
#include "doc/projection.h"
#include "doc/updater.h"

/* The compiled `filter` from the cache (removed from it), or NULL. */
matcher_t *plancache_take_matcher(const bson_t *filter);

/* Gives `m`, compiled from `filter`, back to the cache — or destroys it
 * when it may not be reused. Accepts NULL. */
void plancache_put_matcher(const bson_t *filter, matcher_t *m);

/* The compiled update document under `spec` from the cache, or NULL. */
updater_t *plancache_take_updater(const bson_iter_t *spec);

/* Gives `u`, compiled from `spec` without arrayFilters or let, back to the
 * cache — or destroys it when it may not be reused. Accepts NULL. */
void plancache_put_updater(const bson_iter_t *spec, updater_t *u);

/* The same for find's filters, compiled with $near allowed
 * (matcher_new_near): a table of their own, so an update never takes one. */
matcher_t *plancache_take_find_matcher(const bson_t *filter);
void plancache_put_find_matcher(const bson_t *filter, matcher_t *m);

/* The compiled projection `spec` from the cache, or NULL. */
projection_t *plancache_take_projection(const bson_t *spec);

/* Gives `p`, compiled from `spec` with no collation set, back to the cache
 * — or destroys it when it may not be reused (it holds a $text matcher).
 * Accepts NULL. */
void plancache_put_projection(const bson_t *spec, projection_t *p);

/* Frees every entry (shutdown). */
void plancache_clear(void);

#endif
