/* test_wire: the wire layer — frame peeking, OP_MSG / OP_QUERY / OP_COMPRESSED
 * parsing, replies in every compressor, CRC-32C, and a deterministic
 * mutation loop that feeds broken frames to the parser (run under ASan). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "unit.h"
#include "wire/wire-private.h"
#include "wire/wire.h"

/* OP_QUERY SlaveOk flag (bit 2). */
#define WIRE_QUERY_SLAVE_OK_FOR_TEST 4

/* ---- helpers: building frames by hand, independently of the parser ---- */

/* A kind-1 section for build_msg. */
typedef struct seq_spec {
    const char *name;
    const bson_t *docs[4];
    int n;
} seq_spec_t;

static void put_i32(buf_t *b, int32_t v)
{
    buf_append_i32le(b, v);
}

static void patch_len(buf_t *b)
{
    wire_wr_i32(b->data, (int32_t)b->len);
}

/* Builds an OP_MSG: sequences first, then the body (so any truncation
 * leaves no body), optional checksum. */
static void build_msg(buf_t *b, int32_t req_id, uint32_t flags, const bson_t *body,
                      const seq_spec_t *seqs, int nseq, bool checksum)
{
    buf_init(b);
    put_i32(b, 0);
    put_i32(b, req_id);
    put_i32(b, 0);
    put_i32(b, WIRE_OP_MSG);
    put_i32(b, (int32_t)(flags | (checksum ? WIRE_MSG_CHECKSUM_PRESENT : 0)));
    for (int i = 0; i < nseq; i++) {
        buf_push(b, 1);
        size_t at = b->len;
        put_i32(b, 0);
        buf_append(b, seqs[i].name, strlen(seqs[i].name) + 1);
        for (int j = 0; j < seqs[i].n; j++)
            buf_append(b, bson_get_data(seqs[i].docs[j]), seqs[i].docs[j]->len);
        wire_wr_i32(b->data + at, (int32_t)(b->len - at));
    }
    if (body) {
        buf_push(b, 0);
        buf_append(b, bson_get_data(body), body->len);
    }
    if (checksum) {
        put_i32(b, 0);
        patch_len(b);
        wire_wr_i32(b->data + b->len - 4, (int32_t)wire_crc32c_sw(b->data, b->len - 4));
    } else {
        patch_len(b);
    }
}

/* Builds an OP_QUERY. */
static void build_query(buf_t *b, int32_t req_id, int32_t flags, const char *ns, int32_t ntoreturn,
                        const bson_t *query, const bson_t *fields)
{
    buf_init(b);
    put_i32(b, 0);
    put_i32(b, req_id);
    put_i32(b, 0);
    put_i32(b, WIRE_OP_QUERY);
    put_i32(b, flags);
    buf_append(b, ns, strlen(ns) + 1);
    put_i32(b, 0);
    put_i32(b, ntoreturn);
    buf_append(b, bson_get_data(query), query->len);
    if (fields)
        buf_append(b, bson_get_data(fields), fields->len);
    patch_len(b);
}

/* Compresses `len` bytes with the codec libraries directly into `out`. */
static bool test_compress(int id, const uint8_t *in, size_t len, buf_t *out)
{
    switch (id) {
    case WIRE_COMPRESSOR_NOOP:
        buf_append(out, in, len);
        return true;
    case WIRE_COMPRESSOR_SNAPPY: {
        size_t n = snappy_max_compressed_length(len);
        buf_reserve(out, n);
        if (snappy_compress((const char *)in, len, (char *)out->data + out->len, &n) != SNAPPY_OK)
            return false;
        out->len += n;
        return true;
    }
    case WIRE_COMPRESSOR_ZLIB: {
        uLongf n = compressBound(len);
        buf_reserve(out, n);
        if (compress(out->data + out->len, &n, in, len) != Z_OK)
            return false;
        out->len += n;
        return true;
    }
    case WIRE_COMPRESSOR_ZSTD: {
        size_t n = ZSTD_compressBound(len);
        buf_reserve(out, n);
        n = ZSTD_compress(out->data + out->len, n, in, len, 3);
        if (ZSTD_isError(n))
            return false;
        out->len += n;
        return true;
    }
    }
    return false;
}

/* Decompresses with the codec libraries directly; true when exactly `n` bytes came out. */
static bool test_decompress(int id, const uint8_t *in, size_t len, uint8_t *out, size_t n)
{
    switch (id) {
    case WIRE_COMPRESSOR_NOOP:
        if (len != n)
            return false;
        memcpy(out, in, n);
        return true;
    case WIRE_COMPRESSOR_SNAPPY: {
        size_t got = n;
        return snappy_uncompress((const char *)in, len, (char *)out, &got) == SNAPPY_OK && got == n;
    }
    case WIRE_COMPRESSOR_ZLIB: {
        uLongf got = n;
        return uncompress(out, &got, in, len) == Z_OK && got == n;
    }
    case WIRE_COMPRESSOR_ZSTD: {
        size_t got = ZSTD_decompress(out, n, in, len);
        return !ZSTD_isError(got) && got == n;
    }
    }
    return false;
}

/* Wraps the whole message `plain` in OP_COMPRESSED with compressor `id`. */
static void wrap_compressed(buf_t *out, const buf_t *plain, int id)
{
    buf_init(out);
    put_i32(out, 0);
    buf_append(out, plain->data + 4, 8);
    put_i32(out, WIRE_OP_COMPRESSED);
    buf_append(out, plain->data + 12, 4);
    put_i32(out, (int32_t)(plain->len - 16));
    buf_push(out, (uint8_t)id);
    test_compress(id, plain->data + 16, plain->len - 16, out);
    patch_len(out);
}

/* Parses `b` and returns the status; fills req (caller destroys) and err. */
static wire_parse_status_t parse(const buf_t *b, wire_request_t *req, dberr_t *err)
{
    return wire_request_parse(b->data, b->len, req, err);
}

/* Parses and expects WIRE_PARSE_CLOSE; `what` names the case for the message. */
static void expect_close(const buf_t *b, const char *what)
{
    wire_request_t req;
    dberr_t err;
    wire_parse_status_t st = parse(b, &req, &err);
    CHECK(st == WIRE_PARSE_CLOSE, "%s: expected CLOSE, got status %d (%s)", what, st, err.msg);
    CHECK(st != WIRE_PARSE_CLOSE || err.msg[0] != '\0', "%s: CLOSE carries a log message", what);
    wire_request_destroy(&req);
}

/* Parses and expects WIRE_PARSE_REPLY_ERROR with `code`. */
static void expect_reply_error(const buf_t *b, int code, const char *what)
{
    wire_request_t req;
    dberr_t err;
    wire_parse_status_t st = parse(b, &req, &err);
    CHECK(st == WIRE_PARSE_REPLY_ERROR, "%s: expected REPLY_ERROR, got %d (%s)", what, st, err.msg);
    CHECK(err.code == code, "%s: expected code %d, got %d (%s)", what, code, err.code, err.msg);
    wire_request_destroy(&req);
}

static bson_t *json(const char *s)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)s, -1, &e);
    if (!b) {
        fprintf(stderr, "bad test json %s: %s\n", s, e.message);
        exit(2);
    }
    return b;
}

static bool same_json(const bson_t *a, const char *expected_json)
{
    bson_t *e = json(expected_json);
    bool eq = bson_equal(a, e);
    if (!eq) {
        char *s = bson_as_canonical_extended_json(a, NULL);
        fprintf(stderr, "    got      %s\n    expected %s\n", s, expected_json);
        bson_free(s);
    }
    bson_destroy(e);
    return eq;
}

/* ---- CRC-32C ---- */

static void test_crc32c_matches_known_vectors(void)
{
    uint8_t buf[32];
    CHECK(wire_crc32c((const uint8_t *)"123456789", 9) == 0xE3069283u, "check value of 123456789");
    CHECK(wire_crc32c_sw((const uint8_t *)"123456789", 9) == 0xE3069283u,
          "software check value of 123456789");
    CHECK(wire_crc32c(NULL, 0) == 0, "empty input is 0");
    memset(buf, 0, sizeof buf);
    CHECK(wire_crc32c(buf, 32) == 0x8A9136AAu, "RFC 3720: 32 zero bytes");
    memset(buf, 0xff, sizeof buf);
    CHECK(wire_crc32c(buf, 32) == 0x62A8AB43u, "RFC 3720: 32 0xFF bytes");
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    CHECK(wire_crc32c(buf, 32) == 0x46DD794Eu, "RFC 3720: 32 incrementing bytes");
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    CHECK(wire_crc32c(buf, 32) == 0x113FDB5Cu, "RFC 3720: 32 decrementing bytes");
}

static void test_crc32c_hardware_and_software_agree(void)
{
    uint8_t data[1024];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof data; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (uint8_t)(x >> 16);
    }
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len + off <= sizeof data; len += 37)
            CHECK(wire_crc32c(data + off, len) == wire_crc32c_sw(data + off, len),
                  "crc of %zu bytes at offset %zu agrees", len, off);
}

/* ---- frame peeking ---- */

static void test_peek_needs_four_bytes_to_see_the_length(void)
{
    uint8_t b[4] = {100, 0, 0, 0};
    int32_t n = -1;
    dberr_t err;
    CHECK(wire_frame_peek(b, 3, &n, &err) == WIRE_FRAME_NEED_MORE, "3 bytes: need more");
    CHECK(wire_frame_peek(b, 4, &n, &err) == WIRE_FRAME_NEED_MORE, "4 of 100 bytes: need more");
    CHECK(n == 100, "length is reported while waiting (got %d)", n);
}

static void test_peek_reports_a_whole_frame(void)
{
    uint8_t b[40] = {20, 0, 0, 0};
    int32_t n = 0;
    dberr_t err;
    CHECK(wire_frame_peek(b, 20, &n, &err) == WIRE_FRAME_READY && n == 20, "exactly one frame");
    CHECK(wire_frame_peek(b, 40, &n, &err) == WIRE_FRAME_READY && n == 20,
          "a frame followed by more bytes");
}

static void test_peek_rejects_impossible_lengths(void)
{
    struct {
        uint32_t v;
        const char *what;
    } cases[] = {
        {0, "zero"},
        {15, "below the header"},
        {0x7fffffffu, "2^31-1"},
        {0x80000000u, "INT32_MIN (negative)"},
        {0xffffffffu, "-1"},
        {50u * 1000 * 1000, "50 MB"},
        {WIRE_MAX_MESSAGE_SIZE + 1, "one over the maximum"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t b[4];
        int32_t n;
        dberr_t err;
        dberr_clear(&err);
        wire_wr_i32(b, (int32_t)cases[i].v);
        CHECK(wire_frame_peek(b, 4, &n, &err) == WIRE_FRAME_BAD, "length %s is bad", cases[i].what);
        CHECK(err.msg[0] != '\0', "length %s comes with a message", cases[i].what);
    }
    uint8_t ok[4];
    int32_t n;
    wire_wr_i32(ok, WIRE_MAX_MESSAGE_SIZE);
    CHECK(wire_frame_peek(ok, 4, &n, NULL) == WIRE_FRAME_NEED_MORE,
          "exactly the maximum is allowed");
}

/* ---- OP_MSG ---- */

static void test_op_msg_body_round_trips(void)
{
    bson_t *body = json("{\"ping\": 1, \"$db\": \"admin\"}");
    buf_t b;
    wire_request_t req;
    dberr_t err;
    build_msg(&b, 77, 0, body, NULL, 0, false);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "parses (%s)", err.msg);
    CHECK(req.opcode == WIRE_OP_MSG, "opcode is OP_MSG");
    CHECK(req.request_id == 77, "request id kept");
    CHECK(req.compressor == -1, "not compressed");
    CHECK(req.flags == 0, "no flags");
    CHECK(req.has_db && strcmp(req.db, "admin") == 0, "db from $db");
    CHECK(bson_equal(&req.cmd, body), "cmd is the body");
    wire_request_destroy(&req);
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(body);
}

static void test_op_msg_sequences_are_appended_as_arrays(void)
{
    bson_t *body = json("{\"insert\": \"c\", \"$db\": \"test\"}");
    bson_t *d1 = json("{\"_id\": 1}"), *d2 = json("{\"_id\": 2, \"s\": \"x\"}");
    bson_t *u1 = json("{\"q\": {}, \"u\": {\"$inc\": {\"n\": 1}}}");
    seq_spec_t seqs[] = {{"documents", {d1, d2}, 2}, {"updates", {u1}, 1}};
    buf_t b;
    wire_request_t req;
    dberr_t err;
    build_msg(&b, 1, 0, body, seqs, 2, false);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "parses (%s)", err.msg);
    CHECK(same_json(&req.cmd, "{\"insert\": \"c\", \"$db\": \"test\", \"documents\": [{\"_id\": "
                              "1}, {\"_id\": 2, \"s\": \"x\"}], \"updates\": [{\"q\": {}, \"u\": "
                              "{\"$inc\": {\"n\": 1}}}]}"),
          "sequences appended as arrays in order");
    wire_request_destroy(&req);
    buf_destroy(&b);

    seq_spec_t empty[] = {{"documents", {NULL}, 0}};
    build_msg(&b, 1, 0, body, empty, 1, false);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "empty sequence parses (%s)", err.msg);
    CHECK(same_json(&req.cmd, "{\"insert\": \"c\", \"$db\": \"test\", \"documents\": []}"),
          "empty sequence is an empty array");
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(body);
    bson_destroy(d1);
    bson_destroy(d2);
    bson_destroy(u1);
}

static void test_op_msg_sequence_named_like_a_body_field_is_an_error_reply(void)
{
    bson_t *body = json("{\"insert\": \"c\", \"documents\": [], \"$db\": \"test\"}");
    bson_t *d1 = json("{\"_id\": 1}");
    seq_spec_t seqs[] = {{"documents", {d1}, 1}};
    buf_t b;
    build_msg(&b, 1, 0, body, seqs, 1, false);
    expect_reply_error(&b, 40433, "sequence duplicates body field");
    buf_destroy(&b);
    bson_destroy(body);

    body = json("{\"insert\": \"c\", \"$db\": \"test\"}");
    seq_spec_t twice[] = {{"documents", {d1}, 1}, {"documents", {d1}, 1}};
    build_msg(&b, 1, 0, body, twice, 2, false);
    expect_reply_error(&b, 40431, "two sequences with one name");
    buf_destroy(&b);
    bson_destroy(body);

    /* found by the one pass over the body, wherever the field stands, and
     * a dotted identifier still read as a path into the body */
    body = json("{\"insert\": \"c\", \"$db\": \"test\", \"ordered\": true, \"documents\": 1}");
    build_msg(&b, 1, 0, body, seqs, 1, false);
    expect_reply_error(&b, 40433, "sequence duplicates the body's last field");
    buf_destroy(&b);
    bson_destroy(body);
    body = json("{\"insert\": \"c\", \"a\": {\"b\": 1}, \"$db\": \"test\"}");
    seq_spec_t dotted[] = {{"a.b", {d1}, 1}};
    build_msg(&b, 1, 0, body, dotted, 1, false);
    expect_reply_error(&b, 40433, "dotted sequence name names a body path");
    buf_destroy(&b);
    bson_destroy(body);
    bson_destroy(d1);
}

static void test_op_msg_checksum_good_parses_and_bad_closes(void)
{
    bson_t *body = json("{\"ping\": 1, \"$db\": \"admin\"}");
    bson_t *d1 = json("{\"a\": 1}");
    seq_spec_t seqs[] = {{"documents", {d1}, 1}};
    buf_t b;
    wire_request_t req;
    dberr_t err;
    build_msg(&b, 5, 0, body, seqs, 1, true);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "good checksum parses (%s)", err.msg);
    CHECK(req.flags & WIRE_MSG_CHECKSUM_PRESENT, "flag reported");
    CHECK(same_json(&req.cmd, "{\"ping\": 1, \"$db\": \"admin\", \"documents\": [{\"a\": 1}]}"),
          "checksummed message content");
    wire_request_destroy(&req);

    b.data[b.len - 1] ^= 0x01;
    expect_close(&b, "checksum byte flipped");
    b.data[b.len - 1] ^= 0x01;
    b.data[30] ^= 0x40;
    expect_close(&b, "content byte flipped under a checksum");
    buf_destroy(&b);

    /* checksumPresent but the message ends right after the flags */
    buf_init(&b);
    put_i32(&b, 0);
    put_i32(&b, 1);
    put_i32(&b, 0);
    put_i32(&b, WIRE_OP_MSG);
    put_i32(&b, WIRE_MSG_CHECKSUM_PRESENT);
    buf_append(&b, "\0\0", 2);
    patch_len(&b);
    expect_close(&b, "checksum flag without room for it");
    buf_destroy(&b);
    bson_destroy(body);
    bson_destroy(d1);
}

static void test_op_msg_unknown_required_flag_closes_but_optional_bits_pass(void)
{
    bson_t *body = json("{\"ping\": 1, \"$db\": \"admin\"}");
    buf_t b;
    wire_request_t req;
    dberr_t err;
    for (int bit = 2; bit < 16; bit++) {
        char what[64];
        build_msg(&b, 1, 1u << bit, body, NULL, 0, false);
        snprintf(what, sizeof what, "required flag bit %d", bit);
        expect_close(&b, what);
        buf_destroy(&b);
    }
    build_msg(&b, 1, WIRE_MSG_EXHAUST_ALLOWED | WIRE_MSG_MORE_TO_COME | (1u << 30), body, NULL, 0,
              false);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "optional bits and moreToCome accepted (%s)",
          err.msg);
    CHECK(req.flags == (WIRE_MSG_EXHAUST_ALLOWED | WIRE_MSG_MORE_TO_COME | (1u << 30)),
          "flags reported as sent");
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(body);
}

static void test_op_msg_db_absent_too_long_or_not_a_string(void)
{
    buf_t b;
    wire_request_t req;
    dberr_t err;
    bson_t *body = json("{\"ping\": 1}");
    build_msg(&b, 1, 0, body, NULL, 0, false);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "no $db parses");
    CHECK(!req.has_db && req.db[0] == '\0', "has_db is false without $db");
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(body);

    char longname[200];
    memset(longname, 'd', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    body = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8(longname));
    build_msg(&b, 1, 0, body, NULL, 0, false);
    expect_reply_error(&b, DBERR_INVALID_NAMESPACE, "199-byte $db");
    buf_destroy(&b);
    bson_destroy(body);

    longname[127] = '\0';
    body = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8(longname));
    build_msg(&b, 1, 0, body, NULL, 0, false);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK && strlen(req.db) == 127,
          "127-byte $db fits the buffer");
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(body);

    body = json("{\"ping\": 1, \"$db\": 5}");
    build_msg(&b, 1, 0, body, NULL, 0, false);
    expect_reply_error(&b, DBERR_TYPE_MISMATCH, "$db is a number");
    buf_destroy(&b);
    bson_destroy(body);
}

static void test_op_msg_every_truncation_closes(void)
{
    bson_t *body = json("{\"insert\": \"c\", \"$db\": \"test\"}");
    bson_t *d1 = json("{\"_id\": 1, \"s\": \"abc\"}");
    seq_spec_t seqs[] = {{"documents", {d1, d1}, 2}};
    buf_t b;
    build_msg(&b, 1, 0, body, seqs, 1, false);
    for (size_t len = 16; len < b.len; len++) {
        buf_t t;
        char what[64];
        buf_init(&t);
        buf_append(&t, b.data, len);
        patch_len(&t);
        snprintf(what, sizeof what, "truncated to %zu of %zu bytes", len, b.len);
        expect_close(&t, what);
        buf_destroy(&t);
    }
    buf_destroy(&b);
    bson_destroy(body);
    bson_destroy(d1);
}

static void test_op_msg_bad_section_structure_closes(void)
{
    bson_t *body = json("{\"ping\": 1}");
    buf_t b, t;

    build_msg(&b, 1, 0, NULL, NULL, 0, false);
    expect_close(&b, "no body");
    buf_destroy(&b);

    build_msg(&b, 1, 0, body, NULL, 0, false);
    buf_init(&t);
    buf_append(&t, b.data, b.len);
    buf_push(&t, 0);
    buf_append(&t, bson_get_data(body), body->len);
    patch_len(&t);
    expect_close(&t, "two bodies");
    buf_destroy(&t);

    buf_init(&t);
    buf_append(&t, b.data, b.len);
    buf_push(&t, 0x7f);
    patch_len(&t);
    expect_close(&t, "trailing byte after the body");
    buf_destroy(&t);

    buf_init(&t);
    buf_append(&t, b.data, 20);
    buf_push(&t, 2);
    buf_append(&t, bson_get_data(body), body->len);
    patch_len(&t);
    expect_close(&t, "unknown section kind 2");
    buf_destroy(&t);

    /* body length larger than what is left */
    buf_init(&t);
    buf_append(&t, b.data, b.len);
    wire_wr_i32(t.data + 21, (int32_t)body->len + 1);
    expect_close(&t, "body length overruns the frame");
    wire_wr_i32(t.data + 21, 4);
    expect_close(&t, "body length 4");
    wire_wr_i32(t.data + 21, -7);
    expect_close(&t, "body length negative");
    buf_destroy(&t);

    /* sequence size overruns the frame / has no identifier terminator */
    bson_t *d1 = json("{\"a\": 1}");
    seq_spec_t seqs[] = {{"documents", {d1}, 1}};
    build_msg(&t, 1, 0, body, seqs, 1, false);
    int32_t sl = wire_rd_i32(t.data + 21);
    wire_wr_i32(t.data + 21, sl + 1000);
    expect_close(&t, "sequence size overruns the frame");
    wire_wr_i32(t.data + 21, sl - 1);
    expect_close(&t, "sequence size cuts its last document");
    wire_wr_i32(t.data + 21, 7);
    expect_close(&t, "sequence identifier not terminated in its section");
    buf_destroy(&t);

    buf_destroy(&b);
    bson_destroy(body);
    bson_destroy(d1);
}

static void test_op_msg_wrong_inner_bson_is_invalid_bson(void)
{
    bson_t *body = json("{\"ping\": 1, \"sub\": {\"x\": \"yy\"}, \"$db\": \"admin\"}");
    buf_t b;
    wire_request_t req;
    dberr_t err;

    /* The embedded document's own length is off by one. */
    build_msg(&b, 9, 0, body, NULL, 0, false);
    const uint8_t *sub = memmem(b.data, b.len, "sub", 4);
    CHECK(sub != NULL, "found the sub document");
    uint8_t *sublen = (uint8_t *)sub + 4;
    wire_wr_i32(sublen, wire_rd_i32(sublen) + 1);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_REPLY_ERROR, "inner length off: reply error");
    CHECK(err.code == DBERR_INVALID_BSON, "InvalidBSON (got %d)", err.code);
    CHECK(strstr(err.msg, "invalid bson") != NULL, "message says invalid bson: %s", err.msg);
    CHECK(req.request_id == 9 && req.opcode == WIRE_OP_MSG, "ids kept for the reply");
    CHECK(req.cmd.len == 5, "no half-built command");
    wire_request_destroy(&req);

    /* A string length that points past the document. */
    wire_wr_i32(sublen, wire_rd_i32(sublen) - 1);
    uint8_t *slen = (uint8_t *)memmem(b.data, b.len, "x\0", 2) + 2;
    wire_wr_i32(slen, 100);
    expect_reply_error(&b, DBERR_INVALID_BSON, "string length overruns");
    wire_wr_i32(slen, 3);
    slen[4] = 0xff; /* invalid UTF-8 */
    expect_reply_error(&b, DBERR_INVALID_BSON, "invalid UTF-8 in a string");
    buf_destroy(&b);
    bson_destroy(body);

    /* A boolean byte that is neither 0 nor 1, and a key that is not UTF-8. */
    body = json("{\"ping\": 1, \"flag\": true, \"$db\": \"admin\"}");
    build_msg(&b, 9, 0, body, NULL, 0, false);
    uint8_t *flag = (uint8_t *)memmem(b.data, b.len, "flag", 5);
    flag[5] = 2;
    expect_reply_error(&b, DBERR_INVALID_BSON, "boolean byte 2");
    flag[5] = 1;
    flag[0] = 0xc3; /* lead byte without its continuation */
    expect_reply_error(&b, DBERR_INVALID_BSON, "key that is not UTF-8");
    buf_destroy(&b);
    bson_destroy(body);

    /* An invalid document inside a sequence. */
    body = json("{\"insert\": \"c\", \"$db\": \"test\"}");
    bson_t *d1 = json("{\"a\": 1}");
    seq_spec_t seqs[] = {{"documents", {d1}, 1}};
    build_msg(&b, 1, 0, body, seqs, 1, false);
    uint8_t *type = (uint8_t *)memmem(b.data, b.len,
                                      "\x10"
                                      "a\0",
                                      3);
    *type = 0x77; /* unknown BSON type */
    expect_reply_error(&b, DBERR_INVALID_BSON, "unknown element type in a sequence document");
    buf_destroy(&b);
    bson_destroy(body);
    bson_destroy(d1);
}

static void test_op_msg_deep_nesting_is_invalid_bson_not_a_crash(void)
{
    /* 100,000 nested {a: {a: ...}}: libbson's recursive validator alone
     * would overflow the stack. */
    const int depth = 100000;
    size_t n = (size_t)depth * 8 + 5;
    uint8_t *doc = malloc(n);
    for (int i = 0; i < depth; i++) {
        uint8_t *p = doc + (size_t)i * 7;
        wire_wr_i32(p, (int32_t)(n - (size_t)i * 8));
        p[4] = 0x03;
        p[5] = 'a';
        p[6] = 0;
    }
    uint8_t *p = doc + (size_t)depth * 7;
    wire_wr_i32(p, 5);
    memset(p + 4, 0, (size_t)depth + 1);
    bson_t deep;
    CHECK(bson_init_static(&deep, doc, n), "built the deep document");
    buf_t b;
    build_msg(&b, 1, 0, &deep, NULL, 0, false);
    expect_reply_error(&b, DBERR_INVALID_BSON, "100000 levels deep");
    buf_destroy(&b);
    free(doc);

    bson_t *ok = json("{\"a\": {\"b\": [[[{\"c\": 1}]]]}}");
    build_msg(&b, 1, 0, ok, NULL, 0, false);
    wire_request_t req;
    dberr_t err;
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "modest nesting is fine (%s)", err.msg);
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(ok);
}

/* ---- OP_QUERY ---- */

static void test_op_query_unwraps_dollar_query_and_keeps_read_preference(void)
{
    bson_t *q = json("{\"$query\": {\"isMaster\": 1, \"client\": {\"x\": 1}}, "
                     "\"$readPreference\": {\"mode\": \"primaryPreferred\"}}");
    buf_t b;
    wire_request_t req;
    dberr_t err;
    build_query(&b, 42, 0, "admin.$cmd", -1, q, NULL);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "parses (%s)", err.msg);
    CHECK(req.opcode == WIRE_OP_QUERY && req.request_id == 42, "opcode and id");
    CHECK(req.has_db && strcmp(req.db, "admin") == 0, "db is the part before .$cmd");
    CHECK(same_json(&req.cmd, "{\"isMaster\": 1, \"client\": {\"x\": 1}, \"$readPreference\": "
                              "{\"mode\": \"primaryPreferred\"}, \"$db\": \"admin\"}"),
          "inner command with $readPreference and $db");
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(q);

    q = json("{\"query\": {\"hello\": 1}}");
    build_query(&b, 1, 0, "mydb.$cmd", 1, q, NULL);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "query wrapper parses (%s)", err.msg);
    CHECK(same_json(&req.cmd, "{\"hello\": 1, \"$db\": \"mydb\"}"), "unwrapped from query");
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(q);
}

static void test_op_query_plain_command_with_fields_selector(void)
{
    bson_t *q = json("{\"isMaster\": 1, \"helloOk\": true}");
    bson_t *f = json("{\"x\": 1}");
    buf_t b;
    wire_request_t req;
    dberr_t err;
    build_query(&b, 3, WIRE_QUERY_SLAVE_OK_FOR_TEST, "admin.$cmd", -1, q, f);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_OK, "parses (%s)", err.msg);
    CHECK(same_json(&req.cmd, "{\"isMaster\": 1, \"helloOk\": true, \"$readPreference\": "
                              "{\"mode\": \"secondaryPreferred\"}, \"$db\": \"admin\"}"),
          "slaveOk becomes secondaryPreferred as in mongod");
    CHECK(req.flags == 0, "flags are OP_MSG flags only");
    wire_request_destroy(&req);
    buf_destroy(&b);

    /* Two documents after the query: trailing garbage. */
    buf_init(&b);
    build_query(&b, 3, 0, "admin.$cmd", -1, q, f);
    buf_append(&b, bson_get_data(f), f->len);
    patch_len(&b);
    expect_close(&b, "two documents after the query");
    buf_destroy(&b);
    bson_destroy(q);
    bson_destroy(f);
}

static void test_op_query_not_on_cmd_gets_mongod7_answer(void)
{
    bson_t *q = json("{\"x\": 1}");
    buf_t b, out;
    wire_request_t req;
    dberr_t err;
    build_query(&b, 11, 0, "test.coll", 0, q, NULL);
    CHECK(parse(&b, &req, &err) == WIRE_PARSE_REPLY_ERROR, "reply error");
    CHECK(err.code == 5739101, "code 5739101 (got %d)", err.code);
    CHECK(strcmp(err.msg, "OP_QUERY is no longer supported. The client driver may require an "
                          "upgrade. For more details see "
                          "https://dochub.mongodb.org/core/legacy-opcode-removal") == 0,
          "mongod's text: %s", err.msg);

    buf_init(&out);
    wire_error_reply_append(&out, &req, 500, &err, -1);
    CHECK(out.len > 36 && wire_rd_i32(out.data) == (int32_t)out.len, "reply length");
    CHECK(wire_rd_i32(out.data + 8) == 11, "responseTo is the request id");
    CHECK(wire_rd_i32(out.data + 12) == WIRE_OP_REPLY, "OP_REPLY");
    CHECK(wire_rd_i32(out.data + 16) == 2, "QueryFailure flag as mongod sets it");
    CHECK(wire_rd_i32(out.data + 32) == 1, "numberReturned 1");
    bson_t doc;
    CHECK(bson_init_static(&doc, out.data + 36, out.len - 36), "reply document");
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, &doc, "$err") && BSON_ITER_HOLDS_UTF8(&it), "$err field");
    CHECK(bson_iter_init_find(&it, &doc, "code") && bson_iter_int32(&it) == 5739101, "code");
    CHECK(bson_iter_init_find(&it, &doc, "ok") && bson_iter_double(&it) == 0.0, "ok: 0");
    buf_destroy(&out);
    wire_request_destroy(&req);
    buf_destroy(&b);

    build_query(&b, 11, 0, "a.b.$cmd", -1, q, NULL);
    expect_reply_error(&b, 5739101, "a.b.$cmd is a collection, not $cmd");
    buf_destroy(&b);
    build_query(&b, 11, 0, "nodot", -1, q, NULL);
    expect_reply_error(&b, 5739101, "namespace without a dot");
    buf_destroy(&b);
    build_query(&b, 11, 0, ".$cmd", -1, q, NULL);
    expect_reply_error(&b, DBERR_INVALID_NAMESPACE, "empty db");
    buf_destroy(&b);
    bson_destroy(q);
}

static void test_op_query_rejects_what_mongod_rejects(void)
{
    bson_t *q = json("{\"ping\": 1}");
    buf_t b;
    build_query(&b, 1, 0, "admin.$cmd", 0, q, NULL);
    expect_reply_error(&b, 16979, "numberToReturn 0");
    buf_destroy(&b);
    build_query(&b, 1, 1 << 6, "admin.$cmd", -1, q, NULL);
    expect_reply_error(&b, 18527, "exhaust flag");
    buf_destroy(&b);
    bson_destroy(q);

    q = json("{\"ping\": 1, \"$db\": \"x\"}");
    build_query(&b, 1, 0, "admin.$cmd", -1, q, NULL);
    expect_reply_error(&b, 40621, "$db inside OP_QUERY");
    buf_destroy(&b);
    bson_destroy(q);

    q = json("{\"$query\": {\"ping\": 1}, \"$maxTimeMS\": 5}");
    build_query(&b, 1, 0, "admin.$cmd", -1, q, NULL);
    expect_reply_error(&b, DBERR_INVALID_OPTIONS, "$maxTimeMS wrapper");
    buf_destroy(&b);
    bson_destroy(q);

    q = json("{\"$query\": 1}");
    build_query(&b, 1, 0, "admin.$cmd", -1, q, NULL);
    expect_reply_error(&b, 10065, "$query not an object");
    buf_destroy(&b);
    bson_destroy(q);

    /* a namespace that is not UTF-8 would become a $db string that is not
     * (fuzz_frame) */
    q = json("{\"ping\": 1}");
    build_query(&b, 1, 0, "tes\xf4.$cmd", -1, q, NULL);
    expect_reply_error(&b, DBERR_INVALID_NAMESPACE, "a namespace that is not UTF-8");
    buf_destroy(&b);
    bson_destroy(q);
}

static void test_op_query_structure_errors_close(void)
{
    bson_t *q = json("{\"ping\": 1}");
    buf_t b;
    build_query(&b, 1, 0, "admin.$cmd", -1, q, NULL);
    for (size_t len = 16; len < b.len; len++) {
        buf_t t;
        char what[64];
        buf_init(&t);
        buf_append(&t, b.data, len);
        patch_len(&t);
        snprintf(what, sizeof what, "OP_QUERY truncated to %zu", len);
        expect_close(&t, what);
        buf_destroy(&t);
    }
    buf_destroy(&b);
    bson_destroy(q);
}

/* ---- OP_COMPRESSED ---- */

static void test_compressed_requests_parse_with_every_compressor(void)
{
    bson_t *body =
        json("{\"insert\": \"c\", \"$db\": \"test\", \"pad\": "
             "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}");
    bson_t *d1 = json("{\"_id\": 1}");
    seq_spec_t seqs[] = {{"documents", {d1, d1}, 2}};
    bson_t *q = json("{\"$query\": {\"hello\": 1}}");
    for (int id = 0; id <= 3; id++) {
        for (int checksum = 0; checksum < 2; checksum++) {
            buf_t plain, z;
            wire_request_t req;
            dberr_t err;
            build_msg(&plain, 100 + id, 0, body, seqs, 1, checksum);
            wrap_compressed(&z, &plain, id);
            CHECK(parse(&z, &req, &err) == WIRE_PARSE_OK, "%s OP_MSG parses (%s)",
                  wire_compressor_name(id), err.msg);
            CHECK(req.compressor == id, "%s: compressor reported", wire_compressor_name(id));
            CHECK(req.opcode == WIRE_OP_MSG, "%s: original opcode", wire_compressor_name(id));
            CHECK(req.request_id == 100 + id, "%s: request id", wire_compressor_name(id));
            CHECK(strcmp(req.db, "test") == 0, "%s: db", wire_compressor_name(id));
            bson_iter_t it;
            CHECK(bson_iter_init_find(&it, &req.cmd, "documents") && BSON_ITER_HOLDS_ARRAY(&it),
                  "%s: sequence arrived", wire_compressor_name(id));
            wire_request_destroy(&req);
            buf_destroy(&plain);
            buf_destroy(&z);
        }
        buf_t plain, z;
        wire_request_t req;
        dberr_t err;
        build_query(&plain, 7, 0, "admin.$cmd", -1, q, NULL);
        wrap_compressed(&z, &plain, id);
        CHECK(parse(&z, &req, &err) == WIRE_PARSE_OK, "%s OP_QUERY parses (%s)",
              wire_compressor_name(id), err.msg);
        CHECK(req.opcode == WIRE_OP_QUERY && req.compressor == id, "%s: OP_QUERY inside",
              wire_compressor_name(id));
        wire_request_destroy(&req);
        buf_destroy(&plain);
        buf_destroy(&z);
    }
    bson_destroy(body);
    bson_destroy(d1);
    bson_destroy(q);
}

static void test_replies_compress_with_every_compressor(void)
{
    bson_t *reply = json("{\"ok\": 1.0, \"n\": 1, \"pad\": "
                         "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"}");
    for (int legacy = 0; legacy < 2; legacy++) {
        for (int id = 0; id <= 3; id++) {
            wire_request_t req = {.request_id = 33, .opcode = legacy ? WIRE_OP_QUERY : WIRE_OP_MSG};
            buf_t out;
            buf_init(&out);
            wire_reply_append(&out, &req, 900, reply, 0, id);
            const char *name = wire_compressor_name(id);
            CHECK(out.len >= 25 && wire_rd_i32(out.data) == (int32_t)out.len, "%s: length", name);
            CHECK(wire_rd_i32(out.data + 4) == 900, "%s: requestID", name);
            CHECK(wire_rd_i32(out.data + 8) == 33, "%s: responseTo", name);
            CHECK(wire_rd_i32(out.data + 12) == WIRE_OP_COMPRESSED, "%s: OP_COMPRESSED", name);
            int32_t orig = wire_rd_i32(out.data + 16);
            int32_t usize = wire_rd_i32(out.data + 20);
            CHECK(orig == (legacy ? WIRE_OP_REPLY : WIRE_OP_MSG), "%s: original opcode", name);
            CHECK(out.data[24] == id, "%s: compressor id", name);
            uint8_t *plain = malloc((size_t)usize);
            CHECK(test_decompress(id, out.data + 25, out.len - 25, plain, (size_t)usize),
                  "%s: the codec library decompresses it", name);
            size_t at = legacy ? 20 : 5;
            bson_t doc;
            CHECK(bson_init_static(&doc, plain + at, (size_t)usize - at) && bson_equal(&doc, reply),
                  "%s: body survives", name);
            free(plain);

            /* and our own parser reads the reply frame back */
            if (!legacy) {
                wire_request_t back;
                dberr_t err;
                CHECK(wire_request_parse(out.data, out.len, &back, &err) == WIRE_PARSE_OK,
                      "%s: reply parses as a request (%s)", name, err.msg);
                CHECK(bson_equal(&back.cmd, reply), "%s: same body", name);
                wire_request_destroy(&back);
            }
            buf_destroy(&out);
        }
    }
    bson_destroy(reply);
}

static void test_bad_compressed_frames_close(void)
{
    bson_t *body = json("{\"ping\": 1, \"$db\": \"admin\"}");
    buf_t plain, z;
    build_msg(&plain, 1, 0, body, NULL, 0, false);

    for (int id = 0; id <= 3; id++) {
        char what[64];
        wrap_compressed(&z, &plain, id);
        wire_wr_i32(z.data + 20, wire_rd_i32(z.data + 20) + 1);
        snprintf(what, sizeof what, "%s: uncompressedSize one too big", wire_compressor_name(id));
        expect_close(&z, what);
        wire_wr_i32(z.data + 20, wire_rd_i32(z.data + 20) - 2);
        snprintf(what, sizeof what, "%s: uncompressedSize one too small", wire_compressor_name(id));
        expect_close(&z, what);
        wire_wr_i32(z.data + 20, -5);
        snprintf(what, sizeof what, "%s: negative uncompressedSize", wire_compressor_name(id));
        expect_close(&z, what);
        wire_wr_i32(z.data + 20, WIRE_MAX_MESSAGE_SIZE);
        snprintf(what, sizeof what, "%s: uncompressedSize at the limit plus header",
                 wire_compressor_name(id));
        expect_close(&z, what);
        buf_destroy(&z);

        if (id != WIRE_COMPRESSOR_NOOP) {
            wrap_compressed(&z, &plain, id);
            for (size_t i = 25; i < z.len; i++)
                z.data[i] ^= 0x5a;
            snprintf(what, sizeof what, "%s: garbage data", wire_compressor_name(id));
            expect_close(&z, what);
            buf_destroy(&z);
        }
    }

    wrap_compressed(&z, &plain, 1);
    z.data[24] = 9;
    expect_close(&z, "unknown compressor id");
    buf_destroy(&z);

    buf_t inner;
    wrap_compressed(&inner, &plain, 0);
    wrap_compressed(&z, &inner, 0);
    expect_close(&z, "OP_COMPRESSED inside OP_COMPRESSED");
    buf_destroy(&z);
    buf_destroy(&inner);

    build_msg(&z, 1, 0, body, NULL, 0, false);
    z.len = 16;
    buf_append(&z, "\x01\x00", 2);
    patch_len(&z);
    wire_wr_i32(z.data + 12, WIRE_OP_COMPRESSED);
    expect_close(&z, "compressed header truncated");
    buf_destroy(&z);

    buf_destroy(&plain);
    bson_destroy(body);
}

/* ---- replies ---- */

static void test_reply_layouts_follow_the_request_opcode(void)
{
    bson_t *reply = json("{\"ok\": 1.0}");
    wire_request_t req = {.request_id = 1234, .opcode = WIRE_OP_MSG};
    buf_t out;
    buf_init(&out);
    buf_append(&out, "xyz", 3); /* appends, does not overwrite */
    wire_reply_append(&out, &req, 55, reply, WIRE_MSG_MORE_TO_COME, -1);
    const uint8_t *m = out.data + 3;
    CHECK(memcmp(out.data, "xyz", 3) == 0, "earlier bytes kept");
    CHECK(wire_rd_i32(m) == (int32_t)(out.len - 3), "OP_MSG length");
    CHECK(wire_rd_i32(m + 4) == 55 && wire_rd_i32(m + 8) == 1234, "ids");
    CHECK(wire_rd_i32(m + 12) == WIRE_OP_MSG, "OP_MSG");
    CHECK(wire_rd_u32(m + 16) == WIRE_MSG_MORE_TO_COME, "flags as given");
    CHECK(m[20] == 0, "kind 0");
    CHECK(out.len - 3 == 21 + reply->len, "no checksum, no other sections");
    CHECK(memcmp(m + 21, bson_get_data(reply), reply->len) == 0, "body bytes");
    buf_destroy(&out);

    req.opcode = WIRE_OP_QUERY;
    buf_init(&out);
    wire_reply_append(&out, &req, 56, reply, 0, -1);
    CHECK(wire_rd_i32(out.data) == (int32_t)out.len && out.len == 36 + reply->len,
          "OP_REPLY length");
    CHECK(wire_rd_i32(out.data + 12) == WIRE_OP_REPLY, "OP_REPLY opcode");
    CHECK(wire_rd_i32(out.data + 16) == 8, "AwaitCapable");
    CHECK(wire_rd_i32(out.data + 20) == 0 && wire_rd_i32(out.data + 24) == 0, "cursorID 0");
    CHECK(wire_rd_i32(out.data + 28) == 0, "startingFrom 0");
    CHECK(wire_rd_i32(out.data + 32) == 1, "numberReturned 1");
    CHECK(memcmp(out.data + 36, bson_get_data(reply), reply->len) == 0, "document bytes");
    buf_destroy(&out);

    req.opcode = WIRE_OP_MSG;
    dberr_t err;
    dberr_set(&err, DBERR_INVALID_BSON, "invalid bson in OP_MSG body");
    buf_init(&out);
    wire_error_reply_append(&out, &req, 57, &err, -1);
    bson_t doc;
    CHECK(bson_init_static(&doc, out.data + 21, out.len - 21), "error body");
    CHECK(same_json(&doc, "{\"ok\": 0.0, \"errmsg\": \"invalid bson in OP_MSG body\", \"code\": "
                          "22, \"codeName\": \"InvalidBSON\"}"),
          "error reply shape");
    buf_destroy(&out);
    bson_destroy(reply);
}

/* ---- opcodes, names, misc ---- */

static void test_unknown_and_removed_opcodes_close(void)
{
    int32_t ops[] = {WIRE_OP_REPLY,
                     WIRE_OP_UPDATE,
                     WIRE_OP_INSERT,
                     WIRE_OP_GET_MORE,
                     WIRE_OP_DELETE,
                     WIRE_OP_KILL_CURSORS,
                     2003,
                     2010,
                     2011,
                     0,
                     -1,
                     9999};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        buf_t b;
        char what[48];
        buf_init(&b);
        put_i32(&b, 0);
        put_i32(&b, 1);
        put_i32(&b, 0);
        put_i32(&b, ops[i]);
        put_i32(&b, 0);
        buf_append(&b, "test.c\0", 7);
        buf_append(&b, "\x05\0\0\0\0", 5);
        patch_len(&b);
        snprintf(what, sizeof what, "opcode %d", ops[i]);
        expect_close(&b, what);
        buf_destroy(&b);
    }
}

static void test_frame_length_must_match_header(void)
{
    bson_t *body = json("{\"ping\": 1}");
    buf_t b;
    build_msg(&b, 1, 0, body, NULL, 0, false);
    wire_request_t req;
    dberr_t err;
    CHECK(wire_request_parse(b.data, b.len - 1, &req, &err) == WIRE_PARSE_CLOSE,
          "fewer bytes than messageLength");
    wire_request_destroy(&req);
    CHECK(wire_request_parse(b.data, 10, &req, &err) == WIRE_PARSE_CLOSE, "shorter than header");
    wire_request_destroy(&req);
    CHECK(wire_request_parse(NULL, 0, &req, NULL) == WIRE_PARSE_CLOSE, "NULL frame, NULL err");
    wire_request_destroy(&req);
    buf_destroy(&b);
    bson_destroy(body);
}

static void test_compressor_names_and_ids(void)
{
    CHECK(wire_compressor_id("snappy") == 1, "snappy is 1");
    CHECK(wire_compressor_id("zlib") == 2, "zlib is 2");
    CHECK(wire_compressor_id("zstd") == 3, "zstd is 3");
    CHECK(wire_compressor_id("noop") == 0, "noop is 0");
    CHECK(wire_compressor_id("lz4") == -1 && wire_compressor_id(NULL) == -1, "unknown is -1");
    CHECK(strcmp(wire_compressor_name(3), "zstd") == 0, "name of 3");
    CHECK(wire_compressor_name(4) == NULL && wire_compressor_name(-1) == NULL, "no name");
}

static void test_handshake_and_auth_commands_are_not_compressible(void)
{
    const char *no[] = {"{\"hello\": 1}",     "{\"isMaster\": 1}",     "{\"ismaster\": 1}",
                        "{\"saslStart\": 1}", "{\"saslContinue\": 1}", "{\"createUser\": \"u\"}"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        bson_t *c = json(no[i]);
        CHECK(!wire_command_compressible(c), "%s is never compressed", no[i]);
        bson_destroy(c);
    }
    bson_t *c = json("{\"find\": \"c\", \"hello\": 1}");
    CHECK(wire_command_compressible(c), "find may be compressed");
    bson_destroy(c);
}

/* ---- mutation loop ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void test_mutated_frames_never_crash(void)
{
    bson_t *body = json("{\"update\": \"c\", \"ordered\": true, \"$db\": \"test\", \"lsid\": "
                        "{\"id\": {\"$binary\": {\"base64\": \"AAAAAAAAAAAAAAAAAAAAAA==\", "
                        "\"subType\": \"04\"}}}, \"arr\": [1, 2.5, \"s\", null, {\"x\": [true]}]}");
    bson_t *u1 = json("{\"q\": {\"_id\": 1, \"seats.101\": \"N\"}, \"u\": {\"$set\": "
                      "{\"seats.101\": \"Y:user01\"}}}");
    bson_t *u2 = json("{\"q\": {\"stock\": {\"$gte\": 1}}, \"u\": {\"$inc\": {\"stock\": -1}}, "
                      "\"upsert\": false}");
    seq_spec_t seqs[] = {{"updates", {u1, u2}, 2}, {"other", {u1}, 1}};
    bson_t *q = json("{\"$query\": {\"isMaster\": 1}, \"$readPreference\": {\"mode\": "
                     "\"primary\"}}");

    /* Every BSON type, so mutations hit each element parser. */
    bson_t *all = bson_new();
    bson_oid_t oid;
    bson_decimal128_t dec;
    bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
    bson_decimal128_from_string("1.5", &dec);
    bson_t *scope = json("{\"s\": {\"t\": [1]}}");
    BSON_APPEND_DOUBLE(all, "d", 1.5);
    BSON_APPEND_UTF8(all, "s", "h\xc3\xa9llo");
    BSON_APPEND_BINARY(all, "b", BSON_SUBTYPE_BINARY_DEPRECATED, (const uint8_t *)"abc", 3);
    BSON_APPEND_UNDEFINED(all, "u");
    BSON_APPEND_OID(all, "o", &oid);
    BSON_APPEND_BOOL(all, "t", true);
    BSON_APPEND_DATE_TIME(all, "dt", 1234567);
    BSON_APPEND_NULL(all, "n");
    BSON_APPEND_REGEX(all, "re", "^a.*b$", "i");
    BSON_APPEND_DBPOINTER(all, "dp", "db.coll", &oid);
    BSON_APPEND_CODE(all, "c", "function(){}");
    BSON_APPEND_SYMBOL(all, "sy", "sym");
    BSON_APPEND_CODE_WITH_SCOPE(all, "cw", "f()", scope);
    BSON_APPEND_INT32(all, "i", 7);
    BSON_APPEND_TIMESTAMP(all, "ts", 1, 2);
    BSON_APPEND_INT64(all, "l", 1LL << 40);
    BSON_APPEND_DECIMAL128(all, "dec", &dec);
    BSON_APPEND_MINKEY(all, "min");
    BSON_APPEND_MAXKEY(all, "max");
    BSON_APPEND_UTF8(all, "$db", "test");

    enum { NSEEDS = 13 };
    buf_t seeds[NSEEDS];
    build_msg(&seeds[0], 1, 0, body, seqs, 2, false);
    build_msg(&seeds[1], 2, 0, body, seqs, 1, true);
    build_msg(&seeds[2], 3, 0, body, NULL, 0, false);
    build_query(&seeds[3], 4, 0, "admin.$cmd", -1, q, body);
    for (int id = 0; id <= 3; id++) {
        wrap_compressed(&seeds[4 + id], &seeds[0], id);
    }
    wrap_compressed(&seeds[8], &seeds[3], 2);
    wrap_compressed(&seeds[9], &seeds[1], 3);
    wrap_compressed(&seeds[10], &seeds[1], 1);
    seq_spec_t allseq[] = {{"documents", {all, all}, 2}};
    build_msg(&seeds[11], 5, 0, all, allseq, 1, true);
    build_msg(&seeds[12], 6, 0, all, NULL, 0, false);

    int counts[3] = {0, 0, 0};
    /* WIRE_MUTATION_ROUNDS=1000000 for a longer soak. */
    const char *env = getenv("WIRE_MUTATION_ROUNDS");
    const int rounds = env ? atoi(env) : 20000;
    const char *seed_env = getenv("WIRE_MUTATION_SEED");
    if (seed_env)
        rng_state = strtoull(seed_env, NULL, 0) | 1;
    for (int r = 0; r < rounds; r++) {
        const buf_t *seed = &seeds[rng() % NSEEDS];
        buf_t m;
        buf_init(&m);
        buf_append(&m, seed->data, seed->len);
        int nmut = 1 + (int)(rng() % 4);
        for (int k = 0; k < nmut; k++) {
            switch (rng() % 7) {
            case 0: { /* flip a bit */
                size_t at = rng() % m.len;
                m.data[at] ^= (uint8_t)(1u << (rng() % 8));
                break;
            }
            case 1: { /* random byte */
                size_t at = rng() % m.len;
                m.data[at] = (uint8_t)rng();
                break;
            }
            case 2: { /* interesting int32 somewhere */
                static const int32_t vals[] = {
                    0, 1, -1, 4, 5, 16, 0x7fffffff, INT32_MIN, WIRE_MAX_MESSAGE_SIZE, 1 << 24};
                if (m.len >= 4) {
                    size_t at = rng() % (m.len - 3);
                    wire_wr_i32(m.data + at, vals[rng() % 10]);
                }
                break;
            }
            case 3: /* truncate */
                if (m.len > 16)
                    m.len = 16 + rng() % (m.len - 16);
                break;
            case 4: { /* append junk */
                int n = 1 + (int)(rng() % 16);
                for (int i = 0; i < n; i++)
                    buf_push(&m, (uint8_t)rng());
                break;
            }
            case 5: /* small delta to a length-like int32 */
                if (m.len >= 4) {
                    uint8_t *p = m.data + rng() % (m.len - 3);
                    wire_wr_i32(p, (int32_t)(wire_rd_u32(p) + rng() % 9 - 4));
                }
                break;
            case 6: { /* duplicate a slice */
                size_t a = rng() % m.len, n = 1 + rng() % 32;
                if (a + n > m.len)
                    n = m.len - a;
                uint8_t tmp[32];
                memcpy(tmp, m.data + a, n);
                buf_append(&m, tmp, n);
                break;
            }
            }
        }
        /* Usually keep the header honest so parsing goes past it. */
        if (m.len >= 16 && rng() % 8 != 0)
            patch_len(&m);
        /* Sometimes re-sign a checksummed OP_MSG so the sections get parsed. */
        if (m.len >= 24 && wire_rd_i32(m.data + 12) == WIRE_OP_MSG &&
            (wire_rd_u32(m.data + 16) & WIRE_MSG_CHECKSUM_PRESENT) && rng() % 2)
            wire_wr_i32(m.data + m.len - 4, (int32_t)wire_crc32c(m.data, m.len - 4));

        int32_t flen;
        dberr_t err;
        wire_frame_peek(m.data, m.len, &flen, &err);
        wire_request_t req;
        wire_parse_status_t st = wire_request_parse(m.data, m.len, &req, &err);
        if (st >= 0 && st <= 2)
            counts[st]++;
        if (st == WIRE_PARSE_OK) {
            size_t off;
            if (!bson_validate(&req.cmd, BSON_VALIDATE_NONE, &off))
                CHECK(0, "round %d: parsed command is valid BSON (bad at %zu)", r, off);
            if (req.opcode != WIRE_OP_MSG && req.opcode != WIRE_OP_QUERY)
                CHECK(0, "round %d: OK only for OP_MSG / OP_QUERY (got %d)", r, req.opcode);
            /* and a reply to it can be built */
            buf_t out;
            buf_init(&out);
            wire_reply_append(&out, &req, 1, &req.cmd, 0, req.compressor);
            buf_destroy(&out);
        } else if (st == WIRE_PARSE_REPLY_ERROR) {
            if (err.code == 0)
                CHECK(0, "round %d: a reply error has a code", r);
            buf_t out;
            buf_init(&out);
            wire_error_reply_append(&out, &req, 1, &err, req.compressor);
            buf_destroy(&out);
        }
        wire_request_destroy(&req);
        buf_destroy(&m);
    }
    CHECK(counts[0] + counts[1] + counts[2] == rounds, "every round returned a known status");
    CHECK(counts[0] > 100 && counts[1] > 100 && counts[2] > 100,
          "the mutations reach every outcome (ok %d, reply error %d, close %d)", counts[0],
          counts[1], counts[2]);
    printf("  mutation loop: %d ok, %d reply errors, %d closes\n", counts[0], counts[1], counts[2]);

    for (int i = 0; i < NSEEDS; i++)
        buf_destroy(&seeds[i]);
    bson_destroy(body);
    bson_destroy(u1);
    bson_destroy(u2);
    bson_destroy(q);
    bson_destroy(all);
    bson_destroy(scope);
}

int main(void)
{
    UNIT_RUN(test_crc32c_matches_known_vectors);
    UNIT_RUN(test_crc32c_hardware_and_software_agree);
    UNIT_RUN(test_peek_needs_four_bytes_to_see_the_length);
    UNIT_RUN(test_peek_reports_a_whole_frame);
    UNIT_RUN(test_peek_rejects_impossible_lengths);
    UNIT_RUN(test_op_msg_body_round_trips);
    UNIT_RUN(test_op_msg_sequences_are_appended_as_arrays);
    UNIT_RUN(test_op_msg_sequence_named_like_a_body_field_is_an_error_reply);
    UNIT_RUN(test_op_msg_checksum_good_parses_and_bad_closes);
    UNIT_RUN(test_op_msg_unknown_required_flag_closes_but_optional_bits_pass);
    UNIT_RUN(test_op_msg_db_absent_too_long_or_not_a_string);
    UNIT_RUN(test_op_msg_every_truncation_closes);
    UNIT_RUN(test_op_msg_bad_section_structure_closes);
    UNIT_RUN(test_op_msg_wrong_inner_bson_is_invalid_bson);
    UNIT_RUN(test_op_msg_deep_nesting_is_invalid_bson_not_a_crash);
    UNIT_RUN(test_op_query_unwraps_dollar_query_and_keeps_read_preference);
    UNIT_RUN(test_op_query_plain_command_with_fields_selector);
    UNIT_RUN(test_op_query_not_on_cmd_gets_mongod7_answer);
    UNIT_RUN(test_op_query_rejects_what_mongod_rejects);
    UNIT_RUN(test_op_query_structure_errors_close);
    UNIT_RUN(test_compressed_requests_parse_with_every_compressor);
    UNIT_RUN(test_replies_compress_with_every_compressor);
    UNIT_RUN(test_bad_compressed_frames_close);
    UNIT_RUN(test_reply_layouts_follow_the_request_opcode);
    UNIT_RUN(test_unknown_and_removed_opcodes_close);
    UNIT_RUN(test_frame_length_must_match_header);
    UNIT_RUN(test_compressor_names_and_ids);
    UNIT_RUN(test_handshake_and_auth_commands_are_not_compressible);
    UNIT_RUN(test_mutated_frames_never_crash);
    return unit_finish();
}
