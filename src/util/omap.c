/* omap: skiplist implementation of the ordered byte-string map. Each node
 * carries its key inline after its tower of forward pointers, and a back
 * pointer on level 0 for reverse scans. */
#include "util/omap.h"

#include <bson/bson.h>
#include <string.h>

#define OMAP_MAX_LEVEL 24

struct omap_node {
    void *value;
    uint8_t *key;         /* points just past the tower */
    uint32_t klen;
    uint8_t level;        /* height of the tower, 1..OMAP_MAX_LEVEL */
    omap_node_t *prev;    /* level-0 predecessor (NULL for the first) */
    omap_node_t *next[];  /* `level` forward pointers */
};

struct omap {
    omap_node_t *head;    /* sentinel with OMAP_MAX_LEVEL pointers */
    int level;            /* highest level in use */
    size_t count;
    uint64_t rng;         /* xorshift state for tower heights */
};

int omap_keycmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static omap_node_t *omap_node_alloc(int level, const void *key, size_t klen)
{
    omap_node_t *n = bson_malloc(sizeof *n + (size_t)level * sizeof(omap_node_t *) + klen);
    n->value = NULL;
    n->level = (uint8_t)level;
    n->prev = NULL;
    n->key = (uint8_t *)&n->next[level];
    n->klen = (uint32_t)klen;
    if (klen)
        memcpy(n->key, key, klen);
    for (int i = 0; i < level; i++)
        n->next[i] = NULL;
    return n;
}

omap_t *omap_new(void)
{
    omap_t *m = bson_malloc0(sizeof *m);
    m->head = omap_node_alloc(OMAP_MAX_LEVEL, NULL, 0);
    m->level = 1;
    m->rng = 0x9E3779B97F4A7C15ull;
    return m;
}

void omap_destroy(omap_t *m, void (*free_value)(void *))
{
    if (!m)
        return;
    omap_node_t *n = m->head->next[0];
    while (n) {
        omap_node_t *next = n->next[0];
        if (free_value)
            free_value(n->value);
        bson_free(n);
        n = next;
    }
    bson_free(m->head);
    bson_free(m);
}

bool omap_destroy_some(omap_t *m, void (*free_value)(void *), size_t max)
{
    omap_node_t *n = m->head->next[0];
    for (size_t i = 0; n && i < max; i++) {
        omap_node_t *next = n->next[0];
        if (free_value)
            free_value(n->value);
        bson_free(n);
        n = next;
    }
    m->head->next[0] = n;
    if (n)
        return false;
    bson_free(m->head);
    bson_free(m);
    return true;
}

static int omap_random_level(omap_t *m)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    uint64_t r = m->rng;
    int level = 1;
    while ((r & 3) == 0 && level < OMAP_MAX_LEVEL) { /* p = 1/4 */
        level++;
        r >>= 2;
    }
    return level;
}

/* Fills update[i] with the last node on level i whose key is < key. */
static void omap_find_preds(const omap_t *m, const void *key, size_t klen,
                            omap_node_t **update)
{
    omap_node_t *x = m->head;
    for (int i = m->level - 1; i >= 0; i--) {
        while (x->next[i] && omap_keycmp(x->next[i]->key, x->next[i]->klen, key, klen) < 0)
            x = x->next[i];
        update[i] = x;
    }
}

bool omap_insert(omap_t *m, const void *key, size_t klen, void *value)
{
    omap_node_t *update[OMAP_MAX_LEVEL];
    omap_find_preds(m, key, klen, update);
    omap_node_t *at = update[0]->next[0];
    if (at && omap_keycmp(at->key, at->klen, key, klen) == 0)
        return false;
    int level = omap_random_level(m);
    if (level > m->level) {
        for (int i = m->level; i < level; i++)
            update[i] = m->head;
        m->level = level;
    }
    omap_node_t *n = omap_node_alloc(level, key, klen);
    n->value = value;
    for (int i = 0; i < level; i++) {
        n->next[i] = update[i]->next[i];
        update[i]->next[i] = n;
    }
    n->prev = update[0] == m->head ? NULL : update[0];
    if (n->next[0])
        n->next[0]->prev = n;
    m->count++;
    return true;
}

omap_node_t *omap_find(const omap_t *m, const void *key, size_t klen)
{
    omap_node_t *n = omap_seek(m, key, klen);
    if (n && omap_keycmp(n->key, n->klen, key, klen) == 0)
        return n;
    return NULL;
}

void *omap_get(const omap_t *m, const void *key, size_t klen)
{
    omap_node_t *n = omap_find(m, key, klen);
    return n ? n->value : NULL;
}

void omap_node_set_value(omap_node_t *n, void *value)
{
    n->value = value;
}

void *omap_remove(omap_t *m, const void *key, size_t klen)
{
    omap_node_t *update[OMAP_MAX_LEVEL];
    omap_find_preds(m, key, klen, update);
    omap_node_t *n = update[0]->next[0];
    if (!n || omap_keycmp(n->key, n->klen, key, klen) != 0)
        return NULL;
    for (int i = 0; i < n->level; i++)
        update[i]->next[i] = n->next[i];
    if (n->next[0])
        n->next[0]->prev = n->prev;
    while (m->level > 1 && !m->head->next[m->level - 1])
        m->level--;
    void *value = n->value;
    bson_free(n);
    m->count--;
    return value;
}

size_t omap_count(const omap_t *m)
{
    return m->count;
}

omap_node_t *omap_seek(const omap_t *m, const void *key, size_t klen)
{
    if (!key)
        return m->head->next[0];
    omap_node_t *update[OMAP_MAX_LEVEL];
    omap_find_preds(m, key, klen, update);
    return update[0]->next[0];
}

omap_node_t *omap_seek_last(const omap_t *m, const void *key, size_t klen)
{
    omap_node_t *x = m->head;
    for (int i = m->level - 1; i >= 0; i--) {
        while (x->next[i] &&
               (!key || omap_keycmp(x->next[i]->key, x->next[i]->klen, key, klen) <= 0))
            x = x->next[i];
    }
    return x == m->head ? NULL : x;
}

omap_node_t *omap_next(const omap_node_t *n)
{
    return n->next[0];
}

omap_node_t *omap_prev(const omap_node_t *n)
{
    return n->prev;
}

const uint8_t *omap_node_key(const omap_node_t *n, size_t *klen)
{
    *klen = n->klen;
    return n->key;
}

void *omap_node_value(const omap_node_t *n)
{
    return n->value;
}
