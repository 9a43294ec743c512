/* test_journal: the log record format (src/journal/walrec.c) — a record
 * reads back as written, and every way a segment's tail can be torn or
 * damaged is told apart, as recovery needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal/journal-private.h"
#include "store/catalog.h"
#include "unit.h"
#include "util/crc32c.h"

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


/* ---- recovery from files (journal_recover_dir) ---- */

static void snap_entry(buf_t *b, char tag, const bson_t *doc)
{
    buf_push(b, (uint8_t)tag);
    buf_append_i32le(b, (int32_t)doc->len);
    buf_append_i32le(b, (int32_t)crc32c(bson_get_data(doc), doc->len));
    buf_append(b, bson_get_data(doc), doc->len);
}

/* A snapshot at `lsn` of test.c with one index spec and one document; with
 * `corrupt` the index spec's terminator is not NUL, under a good checksum. */
static void write_snapshot(const char *dir, uint64_t lsn, bool corrupt, char *path, size_t size)
{
    buf_t b;
    buf_init(&b);
    buf_append(&b, SNAPSHOT_MAGIC, 8);
    uint8_t l[8];
    buf_put_le(l, 8, lsn);
    buf_append(&b, l, 8);
    bson_t *coll = BCON_NEW("db", BCON_UTF8("test"), "name", BCON_UTF8("c"), "options", "{", "}",
                            "indexes", "[", "{", "key", "{", "a", BCON_INT32(1), "}", "name",
                            BCON_UTF8("a_1"), "}", "]");
    if (corrupt) {
        uint8_t *p = (uint8_t *)bson_get_data(coll);
        uint8_t *name = memmem(p, coll->len, "a_1", 4);
        name[4] = 0x07; /* the index spec's own terminator */
    }
    snap_entry(&b, 'C', coll);
    bson_t *doc = BCON_NEW("_id", BCON_INT32(1), "a", BCON_INT32(2));
    snap_entry(&b, 'D', doc);
    bson_t *end = BCON_NEW("lsn", BCON_INT64((int64_t)lsn));
    snap_entry(&b, 'E', end);
    snprintf(path, size, "%s/snapshot-%016llx.adb", dir, (unsigned long long)lsn);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b.data, 1, b.len, f) == b.len && fclose(f) == 0, "wrote %s", path);
    bson_destroy(coll);
    bson_destroy(doc);
    bson_destroy(end);
    buf_destroy(&b);
}

static void test_recovery_loads_a_good_snapshot_and_refuses_a_damaged_one(void)
{
    char dir[] = "/tmp/atomdb-test-journal-XXXXXX", path[512];
    CHECK(mkdtemp(dir) != NULL, "a temporary directory");
    dberr_t err = {0};
    uint64_t lsn = 0;

    write_snapshot(dir, 7, false, path, sizeof path);
    catalog_t *cat = catalog_new();
    CHECK(journal_recover_dir(dir, false, cat, &lsn, &err), "a good snapshot loads: %s", err.msg);
    CHECK(lsn == 7, "recovered to its lsn (got %llu)", (unsigned long long)lsn);
    collection_t *c = catalog_get(cat, "test", "c");
    CHECK(c && collection_count(c) == 1, "with its collection and document");
    catalog_destroy(cat);

    /* fuzz_recovery: a checksum-valid entry holding corrupt nested BSON
     * crashed index_new; now the file is refused by name and offset */
    write_snapshot(dir, 7, true, path, sizeof path);
    cat = catalog_new();
    CHECK(!journal_recover_dir(dir, false, cat, &lsn, &err), "corrupt nested BSON is refused");
    CHECK(strstr(err.msg, path) && strstr(err.msg, "invalid BSON at offset"),
          "the refusal names the file and the offset: %s", err.msg);
    /* the only snapshot is damaged and no log reaches its lsn: starting
     * empty would silently lose its data */
    CHECK(strstr(err.msg, "will not start"), "and says start-up stops: %s", err.msg);
    catalog_destroy(cat);
    unlink(path);
    rmdir(dir);
}

/* A snapshot of test.c with `n` documents; with `bad` >= 0 document `bad`
 * holds invalid UTF-8 under a good checksum. The offset of that document's
 * entry goes to *bad_off. */
static void write_big_snapshot(const char *dir, int n, int bad, size_t *bad_off, char *path,
                               size_t size)
{
    buf_t b;
    buf_init(&b);
    buf_append(&b, SNAPSHOT_MAGIC, 8);
    uint8_t l[8];
    buf_put_le(l, 8, 9);
    buf_append(&b, l, 8);
    bson_t *coll = BCON_NEW("db", BCON_UTF8("test"), "name", BCON_UTF8("c"), "options", "{", "}");
    snap_entry(&b, 'C', coll);
    for (int i = 0; i < n; i++) {
        bson_t *doc = BCON_NEW("_id", BCON_INT32(i), "s", BCON_UTF8("text"));
        if (i == bad) {
            uint8_t *t = memmem((uint8_t *)bson_get_data(doc), doc->len, "text", 4);
            t[0] = 0xff;
            *bad_off = b.len;
        }
        snap_entry(&b, 'D', doc);
        bson_destroy(doc);
    }
    bson_t *end = BCON_NEW("lsn", BCON_INT64(9));
    snap_entry(&b, 'E', end);
    snprintf(path, size, "%s/snapshot-%016llx.adb", dir, 9ull);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b.data, 1, b.len, f) == b.len && fclose(f) == 0, "wrote %s", path);
    bson_destroy(coll);
    bson_destroy(end);
    buf_destroy(&b);
}

/* The entries are checked on another thread ahead of the loader
 * (journal/snapcheck.c): damage far into the file, past many batches of
 * checked entries, still stops the load at that entry, named by offset. */
static void test_a_snapshot_damaged_deep_inside_is_refused_at_the_damaged_entry(void)
{
    char dir[] = "/tmp/atomdb-test-journal-XXXXXX", path[512], want[64];
    CHECK(mkdtemp(dir) != NULL, "a temporary directory");
    dberr_t err = {0};
    uint64_t lsn = 0;
    size_t bad_off = 0;

    write_big_snapshot(dir, 5000, -1, &bad_off, path, sizeof path);
    catalog_t *cat = catalog_new();
    CHECK(journal_recover_dir(dir, false, cat, &lsn, &err), "5000 documents load: %s", err.msg);
    collection_t *c = catalog_get(cat, "test", "c");
    CHECK(c && collection_count(c) == 5000, "all 5000 are there");
    catalog_destroy(cat);

    write_big_snapshot(dir, 5000, 4321, &bad_off, path, sizeof path);
    cat = catalog_new();
    CHECK(!journal_recover_dir(dir, false, cat, &lsn, &err), "bad UTF-8 in document 4321 is refused");
    /* the string element follows the length (4) and the _id element (9) */
    snprintf(want, sizeof want, "invalid BSON at offset %zu", bad_off + 9 + 4 + 9);
    CHECK(strstr(err.msg, path) && strstr(err.msg, want),
          "the refusal names the file and the entry's offset (%s): %s", want, err.msg);
    catalog_destroy(cat);

    /* cut inside the last document's entry: truncated, however far the
     * check has run */
    write_big_snapshot(dir, 5000, -1, &bad_off, path, sizeof path);
    FILE *f = fopen(path, "r+b");
    CHECK(f && fseek(f, 0, SEEK_END) == 0, "opened %s", path);
    long size = f ? ftell(f) : 0;
    if (f)
        fclose(f);
    CHECK(truncate(path, size - 40) == 0, "cut 40 bytes off");
    cat = catalog_new();
    CHECK(!journal_recover_dir(dir, false, cat, &lsn, &err), "a cut snapshot is refused");
    CHECK(strstr(err.msg, "bad entry length") || strstr(err.msg, "truncated"),
          "as cut short: %s", err.msg);
    catalog_destroy(cat);
    unlink(path);
    rmdir(dir);
}

/* A log segment (first lsn 1) of `n` records, each inserting {_id: i}
 * into test.c; with `bad` >= 0 record `bad` holds a string that is not
 * UTF-8, under a good checksum. */
static void write_log(const char *dir, int n, int bad, char *path, size_t size)
{
    buf_t b;
    buf_init(&b);
    buf_append(&b, WAL_MAGIC, 8);
    uint8_t l[8];
    buf_put_le(l, 8, 1);
    buf_append(&b, l, 8);
    for (int i = 0; i < n; i++) {
        bson_t *rec = BCON_NEW("ops", "[", "{", "op", BCON_UTF8("i"), "db", BCON_UTF8("test"), "c",
                               BCON_UTF8("c"), "doc", "{", "_id", BCON_INT32(i), "s",
                               BCON_UTF8("text"), "}", "}", "]");
        if (i == bad) {
            uint8_t *t = memmem((uint8_t *)bson_get_data(rec), rec->len, "text", 4);
            t[0] = 0xff;
        }
        walrec_encode(&b, (uint64_t)i + 1, bson_get_data(rec), rec->len);
        bson_destroy(rec);
    }
    snprintf(path, size, "%s/wal-%016llx.log", dir, 1ull);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b.data, 1, b.len, f) == b.len && fclose(f) == 0, "wrote %s", path);
    buf_destroy(&b);
}

/* The log's records are checked on another thread ahead of the replay
 * (journal/snapcheck.c): a record of bad BSON under a good checksum, far
 * into the segment, still stops the replay there with the same refusal. */
static void test_a_log_record_of_bad_bson_deep_inside_is_refused(void)
{
    char dir[] = "/tmp/atomdb-test-journal-XXXXXX", path[512];
    CHECK(mkdtemp(dir) != NULL, "a temporary directory");
    dberr_t err = {0};
    uint64_t lsn = 0;

    write_log(dir, 3000, -1, path, sizeof path);
    catalog_t *cat = catalog_new();
    CHECK(journal_recover_dir(dir, false, cat, &lsn, &err), "3000 records replay: %s", err.msg);
    collection_t *c = catalog_get(cat, "test", "c");
    CHECK(c && collection_count(c) == 3000 && lsn == 3000, "all 3000 inserts, to lsn 3000");
    catalog_destroy(cat);

    write_log(dir, 3000, 2500, path, sizeof path);
    cat = catalog_new();
    CHECK(!journal_recover_dir(dir, false, cat, &lsn, &err), "bad UTF-8 in record 2501 is refused");
    CHECK(strstr(err.msg, "cannot replay record 2501") &&
              strstr(err.msg, "invalid BSON in the log record"),
          "the refusal names the record and why: %s", err.msg);
    catalog_destroy(cat);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    UNIT_RUN(test_a_record_decodes_as_it_was_encoded);
    UNIT_RUN(test_the_header_is_little_endian_length_crc_lsn);
    UNIT_RUN(test_a_torn_tail_is_told_from_damage);
    UNIT_RUN(test_recovery_loads_a_good_snapshot_and_refuses_a_damaged_one);
    UNIT_RUN(test_a_snapshot_damaged_deep_inside_is_refused_at_the_damaged_entry);
    UNIT_RUN(test_a_log_record_of_bad_bson_deep_inside_is_refused);
    return unit_finish();
}
