/* buf: a growable byte buffer. */
#include "util/buf.h"

#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>

void buf_init(buf_t *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->fixed = NULL;
}

void buf_init_fixed(buf_t *b, uint8_t *storage, size_t size)
{
    b->data = b->fixed = storage;
    b->len = 0;
    b->cap = size;
}

void buf_relocate(buf_t *b, const uint8_t *old_storage, uint8_t *new_storage)
{
    if (b->fixed == old_storage)
        b->fixed = new_storage;
    if (b->data == old_storage)
        b->data = new_storage;
}

void buf_destroy(buf_t *b)
{
    if (!b)
        return;
    if (b->data != b->fixed)
        bson_free(b->data);
    buf_init(b);
}

void buf_grow(buf_t *b, size_t extra)
{
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra)
        cap *= 2;
    if (b->data && b->data == b->fixed) {
        uint8_t *heap = bson_malloc(cap); /* aborts on OOM */
        memcpy(heap, b->data, b->len);
        b->data = heap;
    } else {
        b->data = bson_realloc(b->data, cap); /* aborts on OOM */
    }
    b->cap = cap;
}

void buf_reserve(buf_t *b, size_t extra)
{
    if (b->len + extra > b->cap)
        buf_grow(b, extra);
}

void buf_append_i32le(buf_t *b, int32_t v)
{
    uint8_t le[4];
    buf_put_le(le, 4, (uint32_t)v);
    buf_append(b, le, 4);
}

void buf_consume(buf_t *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

uint8_t *buf_steal(buf_t *b, size_t *len)
{
    uint8_t *p = b->data;
    if (p && p == b->fixed) { /* the caller's storage: hand out a heap copy */
        p = bson_malloc(b->len ? b->len : 1);
        memcpy(p, b->data, b->len);
    }
    if (len)
        *len = b->len;
    buf_init(b);
    return p;
}

int buf_cmp(const void *a, const void *b)
{
    const buf_t *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->data, y->data, n) : 0;
    return c ? c : (x->len < y->len ? -1 : x->len > y->len);
}

size_t buf_sort_unique(buf_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, buf_cmp);
    size_t w = n ? 1 : 0;
    for (size_t r = 1; r < n; r++) {
        if (buf_cmp(&v[r], &v[w - 1]) == 0)
            buf_destroy(&v[r]);
        else
            v[w++] = v[r];
    }
    return w;
}
