/* buf: a growable byte buffer. */
#include "util/buf.h"

#include <bson/bson.h>
#include <string.h>

void buf_init(buf_t *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
}

void buf_destroy(buf_t *b)
{
    if (!b)
        return;
    bson_free(b->data);
    buf_init(b);
}

void buf_reserve(buf_t *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra)
        cap *= 2;
    b->data = bson_realloc(b->data, cap); /* aborts on OOM */
    b->cap = cap;
}

void buf_append(buf_t *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void buf_push(buf_t *b, uint8_t byte)
{
    buf_reserve(b, 1);
    b->data[b->len++] = byte;
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
    if (len)
        *len = b->len;
    buf_init(b);
    return p;
}
