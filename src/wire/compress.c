/* compress: the OP_COMPRESSED codecs (noop, snappy, zlib, zstd) behind one
 * pair of calls, so framing never touches a codec library directly.
 * Spec: mongodb/specifications source/compression/OP_COMPRESSED.md. */
#include "wire/wire.h"
#include "wire/wire-private.h"

#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

/* mongod's default zlibCompressionLevel is 6; zstd uses its library default. */
#define WIRE_ZLIB_LEVEL 6

int wire_compressor_id(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "noop") == 0)
        return WIRE_COMPRESSOR_NOOP;
    if (strcmp(name, "snappy") == 0)
        return WIRE_COMPRESSOR_SNAPPY;
    if (strcmp(name, "zlib") == 0)
        return WIRE_COMPRESSOR_ZLIB;
    if (strcmp(name, "zstd") == 0)
        return WIRE_COMPRESSOR_ZSTD;
    return -1;
}

const char *wire_compressor_name(int id)
{
    switch (id) {
    case WIRE_COMPRESSOR_NOOP:
        return "noop";
    case WIRE_COMPRESSOR_SNAPPY:
        return "snappy";
    case WIRE_COMPRESSOR_ZLIB:
        return "zlib";
    case WIRE_COMPRESSOR_ZSTD:
        return "zstd";
    default:
        return NULL;
    }
}

bool wire_decompress(int id, const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                     dberr_t *err)
{
    switch (id) {
    case WIRE_COMPRESSOR_NOOP:
        if (in_len != out_len)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "noop-compressed message holds %zu bytes, header says %zu", in_len,
                             out_len);
        if (out_len)
            memcpy(out, in, out_len);
        return true;

    case WIRE_COMPRESSOR_SNAPPY: {
        size_t n = 0;
        if (snappy_uncompressed_length((const char *)in, in_len, &n) != SNAPPY_OK)
            return dberr_set(err, DBERR_BAD_VALUE, "snappy: corrupt compressed message");
        if (n != out_len)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "snappy: message decompresses to %zu bytes, header says %zu", n,
                             out_len);
        if (snappy_validate_compressed_buffer((const char *)in, in_len) != SNAPPY_OK)
            return dberr_set(err, DBERR_BAD_VALUE, "snappy: corrupt compressed message");
        n = out_len;
        if (snappy_uncompress((const char *)in, in_len, (char *)out, &n) != SNAPPY_OK ||
            n != out_len)
            return dberr_set(err, DBERR_BAD_VALUE, "snappy: corrupt compressed message");
        return true;
    }

    case WIRE_COMPRESSOR_ZLIB: {
        /* One inflate call into exactly out_len bytes: a stream that needs more
         * room stops with Z_BUF_ERROR, a short one ends with total_out smaller. */
        if (in_len > (size_t)UINT32_MAX || out_len > (size_t)UINT32_MAX)
            return dberr_set(err, DBERR_BAD_VALUE, "zlib: message too large");
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        if (inflateInit(&zs) != Z_OK)
            return dberr_set(err, DBERR_INTERNAL_ERROR, "zlib: inflateInit failed");
        zs.next_in = (Bytef *)in;
        zs.avail_in = (uInt)in_len;
        zs.next_out = out;
        zs.avail_out = (uInt)out_len;
        int rc = inflate(&zs, Z_FINISH);
        bool ok = rc == Z_STREAM_END && zs.total_out == out_len;
        inflateEnd(&zs);
        if (!ok)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "zlib: corrupt compressed message or size differs from header");
        return true;
    }

    case WIRE_COMPRESSOR_ZSTD: {
        size_t n = ZSTD_decompress(out, out_len, in, in_len);
        if (ZSTD_isError(n))
            return dberr_set(err, DBERR_BAD_VALUE, "zstd: %s", ZSTD_getErrorName(n));
        if (n != out_len)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "zstd: message decompresses to %zu bytes, header says %zu", n,
                             out_len);
        return true;
    }

    default:
        return dberr_set(err, DBERR_BAD_VALUE, "unknown compressor id %d", id);
    }
}

bool wire_decompressed_size_plausible(int id, const uint8_t *in, size_t in_len, size_t out_len)
{
    switch (id) {
    case WIRE_COMPRESSOR_NOOP:
        return in_len == out_len;
    case WIRE_COMPRESSOR_SNAPPY: {
        size_t n = 0;
        return snappy_uncompressed_length((const char *)in, in_len, &n) == SNAPPY_OK &&
               n == out_len;
    }
    case WIRE_COMPRESSOR_ZLIB:
        /* deflate cannot beat 1032:1; allow the zlib header and a margin. */
        return out_len <= in_len * 1032 + 1024;
    case WIRE_COMPRESSOR_ZSTD: {
        unsigned long long n = ZSTD_getFrameContentSize(in, in_len);
        if (n == ZSTD_CONTENTSIZE_ERROR)
            return false;
        return n == ZSTD_CONTENTSIZE_UNKNOWN || n == (unsigned long long)out_len;
    }
    default:
        return false;
    }
}

bool wire_compress(int id, const uint8_t *in, size_t in_len, buf_t *out)
{
    size_t start = out->len;
    switch (id) {
    case WIRE_COMPRESSOR_NOOP:
        buf_append(out, in, in_len);
        return true;

    case WIRE_COMPRESSOR_SNAPPY: {
        size_t cap = snappy_max_compressed_length(in_len);
        buf_reserve(out, cap);
        size_t n = cap;
        if (snappy_compress((const char *)in, in_len, (char *)out->data + start, &n) != SNAPPY_OK)
            return false;
        out->len = start + n;
        return true;
    }

    case WIRE_COMPRESSOR_ZLIB: {
        uLongf n = compressBound((uLong)in_len);
        buf_reserve(out, n);
        if (compress2(out->data + start, &n, in, (uLong)in_len, WIRE_ZLIB_LEVEL) != Z_OK)
            return false;
        out->len = start + n;
        return true;
    }

    case WIRE_COMPRESSOR_ZSTD: {
        size_t cap = ZSTD_compressBound(in_len);
        buf_reserve(out, cap);
        size_t n = ZSTD_compress(out->data + start, cap, in, in_len, ZSTD_CLEVEL_DEFAULT);
        if (ZSTD_isError(n))
            return false;
        out->len = start + n;
        return true;
    }

    default:
        return false;
    }
}
