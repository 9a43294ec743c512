/* buf: a growable byte buffer (append-only, heap-owned, or starting in
 * caller's storage), used for wire frames, index keys and log records. */
#ifndef ATOMDB_BUF_H
#define ATOMDB_BUF_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A byte buffer; `data` is heap-owned by the buffer (NULL while empty),
 * unless it is `fixed`: the caller's storage given to buf_init_fixed, used
 * until the bytes outgrow it. */
typedef struct buf {
    uint8_t *data;  /* bytes [0, len) are valid */
    size_t len;     /* bytes in use */
    size_t cap;     /* bytes allocated */
    uint8_t *fixed; /* caller's storage (not freed), or NULL */
} buf_t;

/* Initialises an empty buffer in caller's storage. */
void buf_init(buf_t *b);
/* Initialises an empty buffer whose first `size` bytes live in `storage`
 * (e.g. a stack array that outlives the buffer): short keys then cost no
 * malloc/free. Past `size` bytes it moves to the heap as any buffer. */
void buf_init_fixed(buf_t *b, uint8_t *storage, size_t size);
/* After a struct holding both a buffer and its fixed storage was copied by
 * value: points the copy `b` at the copy's storage `new_storage` where it
 * pointed at the original's `old_storage` (bytes already copied along). */
void buf_relocate(buf_t *b, const uint8_t *old_storage, uint8_t *new_storage);
/* Frees the bytes (accepts NULL) and leaves the buffer empty. */
void buf_destroy(buf_t *b);
/* Makes room for `extra` more bytes; aborts on out-of-memory like libbson. */
void buf_reserve(buf_t *b, size_t extra);
/* Grows the bytes for buf_reserve (out of line: the rare case). */
void buf_grow(buf_t *b, size_t extra);

/* Appends `n` bytes. */
static inline void buf_append(buf_t *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n > b->cap)
        buf_grow(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* Appends one byte. */
static inline void buf_push(buf_t *b, uint8_t byte)
{
    if (b->len + 1 > b->cap)
        buf_grow(b, 1);
    b->data[b->len++] = byte;
}
/* Appends little-endian integers. */
void buf_append_i32le(buf_t *b, int32_t v);

/* Byte order, through libbson's macros: the `n`-byte (n <= 8) little-endian
 * integer at `p` (unaligned is fine), written or read, and a big-endian
 * append (index keys). */
static inline uint64_t buf_get_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    memcpy(&v, p, n);
    return BSON_UINT64_FROM_LE(v);
}

static inline void buf_put_le(uint8_t *p, size_t n, uint64_t v)
{
    v = BSON_UINT64_TO_LE(v);
    memcpy(p, &v, n);
}

static inline void buf_append_be(buf_t *b, size_t n, uint64_t v)
{
    v = BSON_UINT64_TO_BE(n < 8 ? v << (64 - 8 * n) : v);
    buf_append(b, &v, n);
}

/* Orders buffers `a` and `b` (buf_t pointers) bytewise, a shorter one
 * first when it is a prefix of the other: memcmp's order, for qsort. */
int buf_cmp(const void *a, const void *b);
/* Sorts `v[0..n)` by buf_cmp and destroys the repeats; returns how many
 * distinct buffers remain at the front. */
size_t buf_sort_unique(buf_t *v, size_t n);

/* Drops the first `n` bytes, moving the rest to the front. */
void buf_consume(buf_t *b, size_t n);
/* Takes the bytes out of the buffer; the caller frees them with free(). */
uint8_t *buf_steal(buf_t *b, size_t *len);

#endif
