/* btree: a B+tree of fixed 32-byte slots. A slot holds a pointer (a leaf's
 * value, an inner node's child) and its key: inline up to 23 bytes, else a
 * heap copy. Inner slot i's key is a lower bound of child i's keys (slot
 * 0's is never compared); leaves are chained for in-order scans. */
#include "util/btree.h"

#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>

#define BTREE_SLOTS 62     /* slots per node: a node is about 2 KiB */
#define BTREE_INLINE 23    /* longest key kept in the slot itself */
#define BTREE_LONG 0xFF    /* klen of a slot whose key is a heap copy */
#define BTREE_MAX_HEIGHT 16 /* inner levels; 31^15 entries would not fit in memory */

typedef struct btree_slot {
    void *ptr;                  /* a leaf's value or an inner node's child */
    uint8_t klen;               /* bytes in key[], or BTREE_LONG */
    uint8_t key[BTREE_INLINE];  /* the key, or for BTREE_LONG: its length
                                 * (4 bytes at key+3) and copy (at key+7) */
} btree_slot_t;

struct btree_leaf {
    uint16_t n;
    btree_leaf_t *prev, *next; /* neighbours in key order */
    btree_slot_t s[BTREE_SLOTS];
};

typedef struct btree_inner {
    uint16_t n;
    btree_slot_t s[BTREE_SLOTS];
} btree_inner_t;

struct btree {
    void *root;          /* a leaf when height is 0, else an inner node */
    int height;          /* inner levels above the leaves */
    size_t count;
    size_t bytes;        /* nodes and long keys */
    btree_leaf_t *first; /* the leftmost leaf */
    btree_leaf_t *last;  /* the rightmost leaf */
};

/* The inner nodes from the root down to a leaf, and the child taken in each. */
typedef struct btree_path {
    btree_inner_t *node[BTREE_MAX_HEIGHT];
    int idx[BTREE_MAX_HEIGHT];
} btree_path_t;

static const uint8_t *btree_slot_key(const btree_slot_t *s, size_t *klen)
{
    if (s->klen != BTREE_LONG) {
        *klen = s->klen;
        return s->key;
    }
    uint32_t len;
    const uint8_t *p;
    memcpy(&len, s->key + 3, sizeof len);
    memcpy(&p, s->key + 7, sizeof p);
    *klen = len;
    return p;
}

static void btree_slot_set_key(btree_t *t, btree_slot_t *s, const void *key, size_t klen)
{
    if (klen <= BTREE_INLINE) {
        s->klen = (uint8_t)klen;
        if (klen)
            memcpy(s->key, key, klen);
        return;
    }
    uint8_t *p = bson_malloc(klen);
    memcpy(p, key, klen);
    uint32_t len = (uint32_t)klen;
    s->klen = BTREE_LONG;
    memcpy(s->key + 3, &len, sizeof len);
    memcpy(s->key + 7, &p, sizeof p);
    t->bytes += klen;
}

static void btree_slot_free_key(btree_t *t, btree_slot_t *s)
{
    if (s->klen != BTREE_LONG)
        return;
    size_t klen;
    uint8_t *p = (uint8_t *)btree_slot_key(s, &klen);
    t->bytes -= klen;
    bson_free(p);
}

/* Compares the slot's key with `key` as omap_keycmp does (bytes, then
 * length), here where the compiler can inline it into the searches. */
static int btree_slot_cmp(const btree_slot_t *s, const void *key, size_t klen)
{
    size_t slen;
    const uint8_t *sk = btree_slot_key(s, &slen);
    size_t n = slen < klen ? slen : klen;
    int c = n ? memcmp(sk, key, n) : 0;
    if (c)
        return c;
    return (slen > klen) - (slen < klen);
}

static btree_leaf_t *btree_leaf_new(btree_t *t)
{
    btree_leaf_t *l = bson_malloc(sizeof *l);
    l->n = 0;
    l->prev = l->next = NULL;
    t->bytes += sizeof *l;
    return l;
}

static btree_inner_t *btree_inner_new(btree_t *t)
{
    btree_inner_t *x = bson_malloc(sizeof *x);
    x->n = 0;
    t->bytes += sizeof *x;
    return x;
}

btree_t *btree_new(void)
{
    btree_t *t = bson_malloc0(sizeof *t);
    t->first = t->last = btree_leaf_new(t);
    t->root = t->first;
    return t;
}

/* The child of inner node `x` whose range holds `key`: the last slot
 * (from 1) whose bound is <= key, else slot 0. */
static int btree_inner_child(const btree_inner_t *x, const void *key, size_t klen)
{
    int lo = 1, hi = x->n; /* first slot in [1, n) whose bound is > key */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (btree_slot_cmp(&x->s[mid], key, klen) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* The first slot of `l` whose key is >= key (l->n when none). */
static int btree_leaf_lower(const btree_leaf_t *l, const void *key, size_t klen)
{
    int lo = 0, hi = l->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (btree_slot_cmp(&l->s[mid], key, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The leaf whose range holds `key`, noting the way down in `path` (may be
 * NULL). */
static btree_leaf_t *btree_descend(const btree_t *t, const void *key, size_t klen,
                                   btree_path_t *path)
{
    void *x = t->root;
    for (int h = 0; h < t->height; h++) {
        btree_inner_t *in = x;
        int i = btree_inner_child(in, key, klen);
        if (path) {
            path->node[h] = in;
            path->idx[h] = i;
        }
        x = in->s[i].ptr;
    }
    return x;
}

/* True when `key` sorts after every key of the tree (ascending loads and
 * new ObjectIds land there: no descent needed). */
static bool btree_past_end(const btree_t *t, const void *key, size_t klen)
{
    const btree_leaf_t *l = t->last;
    return l->n > 0 && btree_slot_cmp(&l->s[l->n - 1], key, klen) < 0;
}

/* Puts (key, ptr) at slot `pos` of the `*n` slots `s` (one is free). */
static void btree_slots_insert(btree_t *t, btree_slot_t *s, uint16_t *n, int pos, const void *key,
                               size_t klen, void *ptr)
{
    memmove(&s[pos + 1], &s[pos], (size_t)(*n - pos) * sizeof s[0]);
    s[pos].ptr = ptr;
    btree_slot_set_key(t, &s[pos], key, klen);
    (*n)++;
}

/* Moves the last `move` of a full node's slots `s` to the empty node's
 * `rs`: none starts a new node for an append at the end (ascending keys),
 * half splits the node. */
static void btree_slots_split(btree_slot_t *s, uint16_t *n, btree_slot_t *rs, uint16_t *rn,
                              int move)
{
    memcpy(rs, &s[BTREE_SLOTS - move], (size_t)move * sizeof s[0]);
    *rn = (uint16_t)move;
    *n = (uint16_t)(BTREE_SLOTS - move);
}

/* Adds `child`, whose keys start at `bound`'s, to inner level `h` on `path`
 * right after the child taken there, splitting full nodes upwards; level
 * -1 is a new root above the old one. */
static void btree_inner_insert(btree_t *t, btree_path_t *path, int h, const btree_slot_t *bound,
                               void *child)
{
    size_t klen;
    const uint8_t *key = btree_slot_key(bound, &klen);
    if (h < 0) {
        if (t->height + 1 >= BTREE_MAX_HEIGHT)
            abort(); /* cannot happen: each level multiplies the entries by >= 31 */
        btree_inner_t *root = btree_inner_new(t);
        root->s[0].ptr = t->root;
        root->s[0].klen = 0;
        root->n = 1;
        btree_slots_insert(t, root->s, &root->n, 1, key, klen, child);
        t->root = root;
        t->height++;
        return;
    }
    btree_inner_t *x = path->node[h];
    int pos = path->idx[h] + 1;
    if (x->n < BTREE_SLOTS) {
        btree_slots_insert(t, x->s, &x->n, pos, key, klen, child);
        return;
    }
    btree_inner_t *right = btree_inner_new(t);
    btree_slots_split(x->s, &x->n, right->s, &right->n, pos == BTREE_SLOTS ? 0 : BTREE_SLOTS / 2);
    if (pos <= x->n && x->n < BTREE_SLOTS)
        btree_slots_insert(t, x->s, &x->n, pos, key, klen, child);
    else
        btree_slots_insert(t, right->s, &right->n, pos - x->n, key, klen, child);
    btree_inner_insert(t, path, h - 1, &right->s[0], right);
}

bool btree_insert(btree_t *t, const void *key, size_t klen, void *value)
{
    btree_leaf_t *last = t->last;
    if (last->n < BTREE_SLOTS && btree_past_end(t, key, klen)) {
        btree_slot_set_key(t, &last->s[last->n], key, klen);
        last->s[last->n++].ptr = value;
        t->count++;
        return true;
    }
    btree_path_t path;
    btree_leaf_t *l = btree_descend(t, key, klen, &path);
    int i = btree_leaf_lower(l, key, klen);
    if (i < l->n && btree_slot_cmp(&l->s[i], key, klen) == 0)
        return false;
    t->count++;
    if (l->n < BTREE_SLOTS) {
        btree_slots_insert(t, l->s, &l->n, i, key, klen, value);
        return true;
    }
    /* full: appending past the last key of the last leaf (a bulk load,
     * ObjectIds, dates) starts a new leaf and leaves this one full; any
     * other insert splits it in half */
    btree_leaf_t *right = btree_leaf_new(t);
    btree_slots_split(l->s, &l->n, right->s, &right->n,
                      i == BTREE_SLOTS && !l->next ? 0 : BTREE_SLOTS / 2);
    right->next = l->next;
    right->prev = l;
    if (l->next)
        l->next->prev = right;
    else
        t->last = right;
    l->next = right;
    if (i <= l->n && l->n < BTREE_SLOTS)
        btree_slots_insert(t, l->s, &l->n, i, key, klen, value);
    else
        btree_slots_insert(t, right->s, &right->n, i - l->n, key, klen, value);
    btree_inner_insert(t, &path, t->height - 1, &right->s[0], right);
    return true;
}

/* Takes slot `pos` out of inner level `h` on `path`; an emptied node goes
 * too, and a root left with one child gives way to it. */
static void btree_inner_remove(btree_t *t, btree_path_t *path, int h, int pos)
{
    btree_inner_t *x = path->node[h];
    btree_slot_free_key(t, &x->s[pos]);
    memmove(&x->s[pos], &x->s[pos + 1], (size_t)(x->n - pos - 1) * sizeof x->s[0]);
    x->n--;
    if (x->n == 0 && h > 0) {
        t->bytes -= sizeof *x;
        bson_free(x);
        btree_inner_remove(t, path, h - 1, path->idx[h - 1]);
        return;
    }
    while (t->height > 0 && ((btree_inner_t *)t->root)->n == 1) {
        btree_inner_t *root = t->root;
        t->root = root->s[0].ptr;
        btree_slot_free_key(t, &root->s[0]);
        t->bytes -= sizeof *root;
        bson_free(root);
        t->height--;
    }
}

/* Unlinks leaf `l` (slot `pos` of the lowest inner node on `path`) and
 * frees it; its entries must have gone already. */
static void btree_leaf_drop(btree_t *t, btree_path_t *path, btree_leaf_t *l, int pos)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        t->first = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        t->last = l->prev;
    t->bytes -= sizeof *l;
    bson_free(l);
    btree_inner_remove(t, path, t->height - 1, pos);
}

/* After a removal left `l` under a quarter full, merges it with a sibling
 * under the same parent when both fit in three quarters of a leaf. */
static void btree_leaf_merge(btree_t *t, btree_path_t *path, btree_leaf_t *l)
{
    btree_inner_t *parent = path->node[t->height - 1];
    int pos = path->idx[t->height - 1];
    btree_leaf_t *left = l, *right = NULL;
    int right_pos = pos + 1;
    if (pos + 1 < parent->n) {
        right = parent->s[pos + 1].ptr;
    } else if (pos > 0) {
        left = parent->s[pos - 1].ptr;
        right = l;
        right_pos = pos;
    }
    if (!right || left->n + right->n > BTREE_SLOTS * 3 / 4)
        return;
    memcpy(&left->s[left->n], right->s, (size_t)right->n * sizeof right->s[0]);
    left->n = (uint16_t)(left->n + right->n);
    right->n = 0;
    btree_leaf_drop(t, path, right, right_pos);
}

void *btree_remove(btree_t *t, const void *key, size_t klen)
{
    btree_path_t path;
    btree_leaf_t *l = btree_descend(t, key, klen, &path);
    int i = btree_leaf_lower(l, key, klen);
    if (i == l->n || btree_slot_cmp(&l->s[i], key, klen) != 0)
        return NULL;
    void *value = l->s[i].ptr;
    btree_slot_free_key(t, &l->s[i]);
    memmove(&l->s[i], &l->s[i + 1], (size_t)(l->n - i - 1) * sizeof l->s[0]);
    l->n--;
    t->count--;
    if (t->height == 0)
        return value;
    if (l->n == 0)
        btree_leaf_drop(t, &path, l, path.idx[t->height - 1]);
    else if (l->n < BTREE_SLOTS / 4)
        btree_leaf_merge(t, &path, l);
    return value;
}

bool btree_seek(const btree_t *t, const void *key, size_t klen, btree_pos_t *pos)
{
    btree_leaf_t *l;
    int i = 0;
    if (!key) {
        l = t->first;
    } else {
        l = btree_descend(t, key, klen, NULL);
        i = btree_leaf_lower(l, key, klen);
    }
    if (i == l->n) { /* past this leaf: the next one's first (leaves are never empty) */
        l = l->next;
        i = 0;
    }
    pos->leaf = l && l->n ? l : NULL;
    pos->i = i;
    return pos->leaf != NULL;
}

bool btree_find(const btree_t *t, const void *key, size_t klen, btree_pos_t *pos)
{
    btree_leaf_t *l = btree_descend(t, key, klen, NULL);
    int i = btree_leaf_lower(l, key, klen);
    bool found = i < l->n && btree_slot_cmp(&l->s[i], key, klen) == 0;
    pos->leaf = found ? l : NULL;
    pos->i = i;
    return found;
}

void *btree_get(const btree_t *t, const void *key, size_t klen)
{
    if (btree_past_end(t, key, klen))
        return NULL;
    btree_pos_t pos;
    return btree_find(t, key, klen, &pos) ? pos.leaf->s[pos.i].ptr : NULL;
}

bool btree_next(btree_pos_t *pos)
{
    if (!pos->leaf)
        return false;
    if (++pos->i >= pos->leaf->n) {
        pos->leaf = pos->leaf->next;
        pos->i = 0;
    }
    return pos->leaf != NULL;
}

const uint8_t *btree_pos_key(const btree_pos_t *pos, size_t *klen)
{
    return btree_slot_key(&pos->leaf->s[pos->i], klen);
}

void *btree_pos_value(const btree_pos_t *pos)
{
    return pos->leaf->s[pos->i].ptr;
}

void btree_pos_set_value(const btree_pos_t *pos, void *value)
{
    pos->leaf->s[pos->i].ptr = value;
}

size_t btree_count(const btree_t *t)
{
    return t->count;
}

size_t btree_bytes(const btree_t *t)
{
    return t->bytes;
}

/* Frees the inner nodes under `x` (`levels` inner levels, x's included),
 * not the leaves. */
static void btree_free_inner(btree_t *t, btree_inner_t *x, int levels)
{
    for (int i = 0; i < x->n; i++) {
        btree_slot_free_key(t, &x->s[i]);
        if (levels > 1)
            btree_free_inner(t, x->s[i].ptr, levels - 1);
    }
    bson_free(x);
}

/* Frees leaf `l` and its entries; returns how many entries it held. */
static size_t btree_free_leaf(btree_t *t, btree_leaf_t *l, void (*free_value)(void *))
{
    size_t n = l->n;
    for (int i = 0; i < l->n; i++) {
        if (free_value)
            free_value(l->s[i].ptr);
        btree_slot_free_key(t, &l->s[i]);
    }
    bson_free(l);
    return n;
}

bool btree_destroy_some(btree_t *t, void (*free_value)(void *), size_t max, size_t *freed)
{
    *freed = 0;
    if (t->height > 0) /* the inner nodes first: a few per thousand entries */
        btree_free_inner(t, t->root, t->height);
    t->height = 0;
    t->root = NULL;
    do {
        btree_leaf_t *l = t->first;
        if (!l)
            break;
        t->first = l->next;
        *freed += btree_free_leaf(t, l, free_value);
    } while (*freed < max);
    if (t->first)
        return false;
    bson_free(t);
    return true;
}

void btree_destroy(btree_t *t, void (*free_value)(void *))
{
    size_t freed;
    while (t && !btree_destroy_some(t, free_value, SIZE_MAX, &freed))
        ;
}
