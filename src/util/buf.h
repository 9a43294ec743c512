/* buf: a growable byte buffer (append-only, heap-owned), used for wire
 * frames, index keys and log records. */
#ifndef ATOMDB_BUF_H
#define ATOMDB_BUF_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A byte buffer; `data` is heap-owned by the buffer, NULL while empty. */
typedef struct buf {
    uint8_t *data; /* bytes [0, len) are valid */
    size_t len;    /* bytes in use */
    size_t cap;    /* bytes allocated */
} buf_t;

/* Initialises an empty buffer in caller's storage. */
void buf_init(buf_t *b);
/* Frees the bytes (accepts NULL) and leaves the buffer empty. */
void buf_destroy(buf_t *b);
/* Makes room for `extra` more bytes; aborts on out-of-memory like libbson. */
void buf_reserve(buf_t *b, size_t extra);
/* Appends `n` bytes. */
void buf_append(buf_t *b, const void *p, size_t n);
/* Appends one byte. */
void buf_push(buf_t *b, uint8_t byte);
/* Appends little-endian integers. */
void buf_append_i32le(buf_t *b, int32_t v);

/* Byte order, through libbson's macros: reads and writes of little-endian
 * integers at `p` (unaligned is fine), and big-endian appends (index keys). */
static inline uint32_t buf_get_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return BSON_UINT32_FROM_LE(v);
}

static inline uint64_t buf_get_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return BSON_UINT64_FROM_LE(v);
}

static inline void buf_put_le32(uint8_t *p, uint32_t v)
{
    v = BSON_UINT32_TO_LE(v);
    memcpy(p, &v, 4);
}

static inline void buf_put_le64(uint8_t *p, uint64_t v)
{
    v = BSON_UINT64_TO_LE(v);
    memcpy(p, &v, 8);
}

static inline void buf_append_be16(buf_t *b, uint16_t v)
{
    v = BSON_UINT16_TO_BE(v);
    buf_append(b, &v, 2);
}

static inline void buf_append_be32(buf_t *b, uint32_t v)
{
    v = BSON_UINT32_TO_BE(v);
    buf_append(b, &v, 4);
}

static inline void buf_append_be64(buf_t *b, uint64_t v)
{
    v = BSON_UINT64_TO_BE(v);
    buf_append(b, &v, 8);
}

/* Drops the first `n` bytes, moving the rest to the front. */
void buf_consume(buf_t *b, size_t n);
/* Takes the bytes out of the buffer; the caller frees them with free(). */
uint8_t *buf_steal(buf_t *b, size_t *len);

#endif
