/* omap: an ordered map from byte strings (compared with memcmp, shorter
 * prefix first) to pointers — a skiplist. Indexes and the catalog are built
 * on it. Not thread-safe: loop thread only. */
#ifndef ATOMDB_OMAP_H
#define ATOMDB_OMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct omap omap_t;
typedef struct omap_node omap_node_t;

/* Creates an empty map. */
omap_t *omap_new(void);

/* Frees the map (accepts NULL), calling `free_value` (may be NULL) on each
 * value. */
void omap_destroy(omap_t *m, void (*free_value)(void *));

/* Frees at most `max` entries of `m` from its front (calling `free_value`
 * on each value), and the map itself once empty: a large map is freed a
 * slice at a time. True when the map is gone. No other call may be made
 * on a map being freed this way. */
bool omap_destroy_some(omap_t *m, void (*free_value)(void *), size_t max);

/* Inserts a copy of `key` → `value`. False (and nothing changes) when the
 * key is already present. */
bool omap_insert(omap_t *m, const void *key, size_t klen, void *value);

/* The value under `key`, or NULL. */
void *omap_get(const omap_t *m, const void *key, size_t klen);

/* Removes `key`; returns its value, or NULL when absent. */
void *omap_remove(omap_t *m, const void *key, size_t klen);

/* Number of entries. */
size_t omap_count(const omap_t *m);

/* The first node whose key is >= `key` (the first node when `key` is NULL),
 * or NULL. A node stays valid until it is removed. */
omap_node_t *omap_seek(const omap_t *m, const void *key, size_t klen);

/* The last node whose key is <= `key` (the last node when `key` is NULL),
 * or NULL. */
omap_node_t *omap_seek_last(const omap_t *m, const void *key, size_t klen);

/* Neighbours of `n`, or NULL at either end. */
omap_node_t *omap_next(const omap_node_t *n);
omap_node_t *omap_prev(const omap_node_t *n);

/* The node holding exactly `key`, or NULL. */
omap_node_t *omap_find(const omap_t *m, const void *key, size_t klen);

/* Replaces a node's value in place (the key stays). */
void omap_node_set_value(omap_node_t *n, void *value);

/* A node's key (borrowed, valid while the node is) and value. */
const uint8_t *omap_node_key(const omap_node_t *n, size_t *klen);
void *omap_node_value(const omap_node_t *n);

/* Compares two byte strings the way the map orders them. */
int omap_keycmp(const void *a, size_t alen, const void *b, size_t blen);

#endif
