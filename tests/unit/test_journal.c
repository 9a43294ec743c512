/* test_journal: the log record format (src/journal/walrec.c) — a record
 * reads back as written, and every way a segment's tail can be torn or
 * damaged is told apart, as recovery needs. */
#include <string.h>

#include "journal/journal-private.h"
#include "unit.h"

static void encode(buf_t *b, uint64_t lsn, const char *payload)
{
    walrec_encode(b, lsn, (const uint8_t *)payload, (uint32_t)strlen(payload));
}

static void test_a_record_decodes_as_it_was_encoded(void)
{
    buf_t b;
    walrec_t r;
    buf_init(&b);
    encode(&b, 42, "hello");
    encode(&b, 43, "world!");
    CHECK(b.len == 2 * WAL_RECORD_HEADER + 11, "two headers and 11 payload bytes");
    CHECK(walrec_decode(b.data, b.len, &r) == WALREC_OK, "the first record is whole");
    CHECK(r.lsn == 42 && r.len == 5 && memcmp(r.payload, "hello", 5) == 0, "lsn 42, payload hello");
    CHECK(walrec_decode(b.data + r.size, b.len - r.size, &r) == WALREC_OK && r.lsn == 43 &&
              r.len == 6 && memcmp(r.payload, "world!", 6) == 0,
          "the second follows at r.size");
    buf_destroy(&b);
}

static void test_the_header_is_little_endian_length_crc_lsn(void)
{
    buf_t b;
    buf_init(&b);
    encode(&b, 0x0102030405060708ull, "ab");
    CHECK(b.data[0] == 2 && b.data[1] == 0 && b.data[2] == 0 && b.data[3] == 0,
          "length 2, little-endian");
    CHECK(b.data[8] == 0x08 && b.data[15] == 0x01, "lsn little-endian at offset 8");
    buf_destroy(&b);
}

static void test_a_torn_tail_is_told_from_damage(void)
{
    buf_t b;
    walrec_t r;
    buf_init(&b);
    encode(&b, 7, "payload");
    CHECK(walrec_decode(b.data, WAL_RECORD_HEADER - 1, &r) == WALREC_SHORT_HEADER,
          "fewer bytes than a header: short header");
    CHECK(walrec_decode(b.data, b.len - 1, &r) == WALREC_TRUNCATED,
          "a payload cut short: truncated (a torn write)");
    b.data[b.len - 1] ^= 0xff;
    CHECK(walrec_decode(b.data, b.len, &r) == WALREC_BAD_CHECKSUM && r.size == b.len,
          "a changed byte: checksum mismatch, and the record ends the segment");
    b.data[b.len - 1] ^= 0xff;
    b.data[9] ^= 0x01;
    CHECK(walrec_decode(b.data, b.len, &r) == WALREC_BAD_CHECKSUM,
          "the lsn is covered by the checksum too");
    b.data[9] ^= 0x01;
    buf_put_le(b.data, 4, WAL_MAX_RECORD + 1);
    CHECK(walrec_decode(b.data, b.len, &r) == WALREC_BAD_LENGTH,
          "a length above the maximum is damage, not a torn write");
    buf_destroy(&b);
}

int main(void)
{
    UNIT_RUN(test_a_record_decodes_as_it_was_encoded);
    UNIT_RUN(test_the_header_is_little_endian_length_crc_lsn);
    UNIT_RUN(test_a_torn_tail_is_told_from_damage);
    return unit_finish();
}
