/* walrec: the log record format, written by wal.c and read back by
 * recovery (journal.c): [u32 payload length][u32 crc32c of lsn+payload]
 * [u64 lsn][payload], little-endian. */
#include "journal/journal-private.h"

#include "util/crc32c.h"

void walrec_encode(buf_t *b, uint64_t lsn, const uint8_t *payload, uint32_t len)
{
    uint8_t head[WAL_RECORD_HEADER];
    size_t start = b->len;
    buf_put_le(head, 4, len);
    buf_put_le(head + 4, 4, 0); /* crc, filled below */
    buf_put_le(head + 8, 8, lsn);
    buf_append(b, head, sizeof head);
    buf_append(b, payload, len);
    buf_put_le(b->data + start + 4, 4, crc32c(b->data + start + 8, 8 + (size_t)len));
}

walrec_status_t walrec_decode(const uint8_t *data, size_t left, walrec_t *out)
{
    if (left < WAL_RECORD_HEADER)
        return WALREC_SHORT_HEADER;
    out->len = (uint32_t)buf_get_le(data, 4);
    out->lsn = buf_get_le(data + 8, 8);
    out->payload = data + WAL_RECORD_HEADER;
    out->size = WAL_RECORD_HEADER + (size_t)out->len;
    if (out->len > WAL_MAX_RECORD)
        return WALREC_BAD_LENGTH;
    if (out->len > left - WAL_RECORD_HEADER)
        return WALREC_TRUNCATED;
    if (crc32c(data + 8, 8 + (size_t)out->len) != (uint32_t)buf_get_le(data + 4, 4))
        return WALREC_BAD_CHECKSUM;
    return WALREC_OK;
}
