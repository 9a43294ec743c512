/* btree: an ordered map from byte strings (compared as omap_keycmp does:
 * memcmp, shorter prefix first) to pointers — a B+tree whose leaves hold
 * short keys inline, so an entry costs 32 bytes and no allocation of its
 * own. The indexes' maps (millions of entries) use it; small maps keep
 * util/omap.h, whose nodes survive other changes. Loop thread only. */
#ifndef ATOMDB_BTREE_H
#define ATOMDB_BTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct btree btree_t;
typedef struct btree_leaf btree_leaf_t;

/* A position on one entry. Valid until the next insert or remove on the
 * tree: a caller that lets others change the tree goes on by seeking the
 * key it stopped at (see collection_run_scan). */
typedef struct btree_pos {
    btree_leaf_t *leaf; /* NULL: no entry */
    int i;              /* the entry's slot in `leaf` */
} btree_pos_t;

/* Creates an empty tree. */
btree_t *btree_new(void);

/* Frees the tree (accepts NULL), calling `free_value` (may be NULL) on
 * each value. */
void btree_destroy(btree_t *t, void (*free_value)(void *));

/* Frees about `max` entries from the tree's front (whole leaves, at least
 * one), calling `free_value` on each value, and the tree itself once
 * empty; *freed says how many entries went. True when the tree is gone.
 * No other call may be made on a tree being freed this way. */
bool btree_destroy_some(btree_t *t, void (*free_value)(void *), size_t max, size_t *freed);

/* Inserts a copy of `key` → `value`. False (and nothing changes) when the
 * key is already present. Keys arriving in ascending order fill each leaf
 * before starting the next (a bulk load packs the tree). */
bool btree_insert(btree_t *t, const void *key, size_t klen, void *value);

/* The value under `key`, or NULL. */
void *btree_get(const btree_t *t, const void *key, size_t klen);

/* Removes `key`; returns its value, or NULL when absent. */
void *btree_remove(btree_t *t, const void *key, size_t klen);

/* Number of entries. */
size_t btree_count(const btree_t *t);

/* Bytes the tree holds (nodes and long keys), for the memory figures. */
size_t btree_bytes(const btree_t *t);

/* Puts `pos` on the first entry whose key is >= `key` (the first entry
 * when `key` is NULL); false (pos->leaf NULL) when there is none. */
bool btree_seek(const btree_t *t, const void *key, size_t klen, btree_pos_t *pos);

/* Puts `pos` on the entry holding exactly `key`; false when absent. */
bool btree_find(const btree_t *t, const void *key, size_t klen, btree_pos_t *pos);

/* Moves `pos` to the next entry; false (pos->leaf NULL) past the last. */
bool btree_next(btree_pos_t *pos);

/* The key (borrowed until the entry is removed) and the value at `pos`. */
const uint8_t *btree_pos_key(const btree_pos_t *pos, size_t *klen);
void *btree_pos_value(const btree_pos_t *pos);
/* Replaces the value at `pos` (the key stays). */
void btree_pos_set_value(const btree_pos_t *pos, void *value);

#endif
