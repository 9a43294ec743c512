/* wire-private: helpers shared by the files of the wire module (framing,
 * compression, checksums). Not part of the interface: only the .c files of
 * src/wire include it. */
#ifndef ATOMDB_WIRE_PRIVATE_H
#define ATOMDB_WIRE_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/crc32c.h"
#include "util/dberr.h"

/* Reads a little-endian int32 at `p` (caller checked 4 bytes are there). */
static inline int32_t wire_rd_i32(const uint8_t *p)
{
    return (int32_t)(uint32_t)buf_get_le(p, 4);
}

/* Reads a little-endian uint32 at `p` (caller checked 4 bytes are there). */
static inline uint32_t wire_rd_u32(const uint8_t *p)
{
    return (uint32_t)wire_rd_i32(p);
}

/* Writes a little-endian int32 at `p`. */
static inline void wire_wr_i32(uint8_t *p, int32_t v)
{
    buf_put_le(p, 4, (uint32_t)v);
}

/* Decompresses `in_len` bytes with compressor `id` into exactly `out_len`
 * bytes at `out`. False (with `err` saying why) for an unknown compressor,
 * corrupt input, or output of any other size. */
bool wire_decompress(int id, const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                     dberr_t *err);

/* Appends `in` compressed with compressor `id` to `out`. False (and `out`
 * unchanged) for an unknown compressor or a compressor failure. */
bool wire_compress(int id, const uint8_t *in, size_t in_len, buf_t *out);

/* False when `in_len` bytes compressed with `id` certainly cannot
 * decompress to `out_len` bytes (checked from the codec's own header or its
 * best possible ratio), so a tiny frame cannot make us allocate 48 MB. */
bool wire_decompressed_size_plausible(int id, const uint8_t *in, size_t in_len, size_t out_len);

/* Software-only CRC-32C (the table path), for tests comparing it with the
 * SSE4.2 path that wire_crc32c may take. */
static inline uint32_t wire_crc32c_sw(const uint8_t *data, size_t len)
{
    return crc32c_sw(data, len);
}

#endif
