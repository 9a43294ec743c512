/* frame: splits the byte stream into wire frames, parses requests (OP_MSG,
 * legacy OP_QUERY on `<db>.$cmd`, OP_COMPRESSED around either) into one
 * command document, and builds OP_MSG / OP_REPLY reply frames. Every read is
 * bounds-checked: a hostile frame is a status, never a crash. */
#include "wire/wire.h"
#include "wire/wire-private.h"

#include <string.h>

#include "util/bsoncheck.h"
#include "util/bsonview.h"
#include "util/shellfmt.h"

/* mongod's BSONObjMaxInternalSize: the user limit plus room for command fields. */
#define WIRE_MAX_INTERNAL_BSON_SIZE (WIRE_MAX_BSON_OBJECT_SIZE + 16 * 1024)

/* OP_QUERY flags that matter for commands. */
#define WIRE_QUERY_SLAVE_OK (1 << 2)
#define WIRE_QUERY_EXHAUST (1 << 6)

/* OP_COMPRESSED's header after the standard one: originalOpcode (int32),
 * uncompressedSize (int32), compressorId (uint8). */
#define WIRE_COMPRESSED_HEADER_SIZE 9

/* OP_REPLY responseFlags. */
#define WIRE_REPLY_QUERY_FAILURE 2
#define WIRE_REPLY_AWAIT_CAPABLE 8

/* mongod 7's error for legacy opcodes it no longer serves. */
#define WIRE_LEGACY_OP_CODE 5739101
#define WIRE_LEGACY_OP_SUFFIX                                                                      \
    ". The client driver may require an upgrade. For more details see "                            \
    "https://dochub.mongodb.org/core/legacy-opcode-removal"

/* mongod error codes used only here (not in dberr.h). */
#define WIRE_ERR_DUPLICATE_SEQUENCE 40431
#define WIRE_ERR_SEQUENCE_IN_BODY 40433
#define WIRE_ERR_DB_IN_OP_QUERY 40621
#define WIRE_ERR_EXHAUST_COMMAND 18527
#define WIRE_ERR_BAD_NTORETURN 16979
#define WIRE_ERR_EXPECTED_OBJECT 10065

/* One kind-1 section: identifier and the document bytes after it. */
typedef struct wire_seq {
    const char *name;    /* NUL-terminated inside the frame */
    const uint8_t *docs; /* first document */
    size_t len;          /* bytes of documents */
} wire_seq_t;

/* Sets `err` to ProtocolError and yields WIRE_PARSE_CLOSE (for `goto cleanup`). */
#define CLOSE_WITH(...)                                                                            \
    do {                                                                                           \
        dberr_set(err, DBERR_PROTOCOL_ERROR, __VA_ARGS__);                                         \
        st = WIRE_PARSE_CLOSE;                                                                     \
        goto cleanup;                                                                              \
    } while (0)

/* Sets `err` to `code` and yields WIRE_PARSE_REPLY_ERROR (for `goto cleanup`). */
#define REPLY_WITH(code, ...)                                                                      \
    do {                                                                                           \
        dberr_set(err, (code), __VA_ARGS__);                                                       \
        st = WIRE_PARSE_REPLY_ERROR;                                                               \
        goto cleanup;                                                                              \
    } while (0)

static wire_parse_status_t parse_message(const uint8_t *msg, size_t len, wire_request_t *req,
                                         dberr_t *err, bool inside_compressed);

/* Checks that the `len` bytes at `data` are exactly one well-formed BSON
 * document (valid UTF-8, embedded NULs allowed in strings), no larger than
 * mongod's internal limit and no deeper than BSONCHECK_MAX_DEPTH. On failure
 * fills `err` with InvalidBSON naming `what`. */
static bool validate_doc(const uint8_t *data, size_t len, const char *what, dberr_t *err)
{
    bson_t doc;
    uint32_t at;

    if (len > WIRE_MAX_INTERNAL_BSON_SIZE)
        return dberr_set(err, DBERR_INVALID_BSON,
                         "invalid bson in %s: BSONObj size: %zu (0x%zX) is invalid. Size must be "
                         "between 0 and %d(16MB)",
                         what, len, len, WIRE_MAX_INTERNAL_BSON_SIZE);
    if (!bson_init_static(&doc, data, len))
        return dberr_set(err, DBERR_INVALID_BSON,
                         "invalid bson in %s: length or terminator is wrong", what);
    switch (bsoncheck_doc(&doc, &at)) {
    case BSONCHECK_OK:
        break;
    case BSONCHECK_CORRUPT:
        return dberr_set(err, DBERR_INVALID_BSON,
                         "invalid bson in %s: corrupt element near offset %u", what, at);
    case BSONCHECK_TOO_DEEP:
        return dberr_set(err, DBERR_INVALID_BSON,
                         "invalid bson in %s: BSONObj exceeded maximum nested object depth: %d",
                         what, BSONCHECK_MAX_DEPTH);
    case BSONCHECK_BAD_UTF8:
        return dberr_set(err, DBERR_INVALID_BSON,
                         "invalid bson in %s: invalid UTF-8 near offset %u", what, at);
    case BSONCHECK_BAD_BOOL:
        return dberr_set(err, DBERR_INVALID_BSON,
                         "invalid bson in %s: boolean is neither 0 nor 1 near offset %u", what, at);
    }
    return true;
}

wire_frame_status_t wire_frame_peek(const uint8_t *data, size_t len, int32_t *frame_len,
                                    dberr_t *err)
{
    if (frame_len)
        *frame_len = 0;
    if (!data || len < 4)
        return WIRE_FRAME_NEED_MORE;
    int32_t n = wire_rd_i32(data);
    if (n < 0) {
        dberr_set(err, DBERR_PROTOCOL_ERROR, "message length %d is negative", n);
        return WIRE_FRAME_BAD;
    }
    if (n < WIRE_HEADER_SIZE) {
        dberr_set(err, DBERR_PROTOCOL_ERROR, "message length %d is smaller than the %d-byte header",
                  n, WIRE_HEADER_SIZE);
        return WIRE_FRAME_BAD;
    }
    if (n > WIRE_MAX_MESSAGE_SIZE) {
        dberr_set(err, DBERR_PROTOCOL_ERROR,
                  "message length %d is larger than the maximum message size %d", n,
                  WIRE_MAX_MESSAGE_SIZE);
        return WIRE_FRAME_BAD;
    }
    if (frame_len)
        *frame_len = n;
    return len >= (size_t)n ? WIRE_FRAME_READY : WIRE_FRAME_NEED_MORE;
}

/* Fills req->db from the $db field `it` of the body (NULL: none). */
static wire_parse_status_t take_db(const bson_iter_t *it, wire_request_t *req, dberr_t *err)
{
    wire_parse_status_t st = WIRE_PARSE_OK;
    uint32_t n = 0;
    const char *s;

    if (!it)
        goto cleanup;
    if (!BSON_ITER_HOLDS_UTF8(it))
        REPLY_WITH(DBERR_TYPE_MISMATCH,
                   "BSON field 'OpMsg.$db' is the wrong type '%s', expected type 'string'",
                   shellfmt_type_name(bson_iter_type(it)));
    s = bson_iter_utf8(it, &n);
    if (n == 0 || n >= sizeof req->db || memchr(s, '\0', n))
        REPLY_WITH(DBERR_INVALID_NAMESPACE, "Invalid database name: '%.*s'", (int)(n > 64 ? 64 : n),
                   s);
    memcpy(req->db, s, n);
    req->db[n] = '\0';
    req->has_db = true;
cleanup:
    return st;
}

/* Parses an OP_MSG (`msg` is the whole message, header included). */
static wire_parse_status_t parse_msg(const uint8_t *msg, size_t len, wire_request_t *req,
                                     dberr_t *err)
{
    wire_parse_status_t st = WIRE_PARSE_OK;
    wire_seq_t seq_room[4]; /* drivers send one sequence: no malloc for it */
    wire_seq_t *seqs = seq_room;
    size_t nseq = 0, capseq = sizeof seq_room / sizeof seq_room[0];
    const uint8_t *body = NULL;
    size_t body_len = 0;
    bool bad_bson = false;
    dberr_t bson_err;
    const uint8_t *p = msg + WIRE_HEADER_SIZE;
    const uint8_t *end = msg + len;
    bson_t b;

    dberr_clear(&bson_err);
    if (end - p < 4)
        CLOSE_WITH("OP_MSG of %zu bytes has no flagBits", len);
    req->flags = wire_rd_u32(p);
    p += 4;
    if (req->flags & 0xffffu & ~(uint32_t)(WIRE_MSG_CHECKSUM_PRESENT | WIRE_MSG_MORE_TO_COME))
        CLOSE_WITH("IllegalOpMsgFlag: Message contains illegal flags value: 0x%08x", req->flags);

    if (req->flags & WIRE_MSG_CHECKSUM_PRESENT) {
        if (end - p < 4)
            CLOSE_WITH("OP_MSG has checksumPresent but no room for the checksum");
        end -= 4;
        uint32_t want = wire_rd_u32(end);
        uint32_t got = wire_crc32c(msg, len - 4);
        if (want != got)
            CLOSE_WITH("ChecksumMismatch: OP_MSG checksum does not match contents "
                       "(sent 0x%08x, computed 0x%08x)",
                       want, got);
    }

    while (p < end) {
        uint8_t kind = *p++;
        if (kind == 0) {
            if (body)
                CLOSE_WITH("Multiple body sections in message");
            if (end - p < 5)
                CLOSE_WITH("OP_MSG body section is truncated");
            int32_t dl = wire_rd_i32(p);
            if (dl < 5 || dl > end - p)
                CLOSE_WITH("OP_MSG body length %d does not fit the %td bytes left", dl, end - p);
            body = p;
            body_len = (size_t)dl;
            if (!bad_bson && !validate_doc(body, body_len, "OP_MSG body", &bson_err))
                bad_bson = true;
            p += dl;
        } else if (kind == 1) {
            if (end - p < 4)
                CLOSE_WITH("OP_MSG document sequence size is truncated");
            int32_t sl = wire_rd_i32(p);
            if (sl < 5 || sl > end - p)
                CLOSE_WITH("OP_MSG document sequence size %d does not fit the %td bytes left", sl,
                           end - p);
            const uint8_t *s = p + 4;
            const uint8_t *send = p + sl;
            const uint8_t *nul = memchr(s, '\0', (size_t)(send - s));
            if (!nul)
                CLOSE_WITH("OP_MSG document sequence identifier is not terminated");
            for (const uint8_t *q = nul + 1; q < send;) {
                if (send - q < 5)
                    CLOSE_WITH("OP_MSG document sequence '%s' ends inside a document",
                               (const char *)s);
                int32_t dl = wire_rd_i32(q);
                if (dl < 5 || dl > send - q)
                    CLOSE_WITH("OP_MSG document length %d in sequence '%s' does not fit the "
                               "section",
                               dl, (const char *)s);
                if (!bad_bson &&
                    !validate_doc(q, (size_t)dl, "OP_MSG document sequence", &bson_err))
                    bad_bson = true;
                q += dl;
            }
            if (!bad_bson && !bson_utf8_validate((const char *)s, (size_t)(nul - s), false)) {
                dberr_set(&bson_err, DBERR_INVALID_BSON,
                          "invalid bson: OP_MSG document sequence identifier is not UTF-8");
                bad_bson = true;
            }
            if (nseq == capseq) {
                wire_seq_t *more = bson_malloc(2 * capseq * sizeof *more);
                memcpy(more, seqs, nseq * sizeof *more);
                if (seqs != seq_room)
                    bson_free(seqs);
                seqs = more;
                capseq *= 2;
            }
            seqs[nseq].name = (const char *)s;
            seqs[nseq].docs = nul + 1;
            seqs[nseq].len = (size_t)(send - (nul + 1));
            nseq++;
            p = send;
        } else {
            CLOSE_WITH("Unknown section kind %u", (unsigned)kind);
        }
    }
    if (!body)
        CLOSE_WITH("OP_MSG messages must have a body");

    /* The frame is sound from here on: what is left is answered, not closed. */
    if (bad_bson) {
        *err = bson_err;
        st = WIRE_PARSE_REPLY_ERROR;
        goto cleanup;
    }
    bson_init_static(&b, body, body_len);
    /* one pass over the body's top-level keys finds $db and the sequences
     * the body also holds (a dotted identifier names a path: libbson's
     * bson_has_field answers that one) */
    uint64_t in_body = 0; /* bit i: sequence i (i < 64) is a body field */
    bool have_db = false;
    bson_iter_t db_it, it;
    if (bson_iter_init(&it, &b)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (!have_db && k[0] == '$' && strcmp(k, "$db") == 0) {
                db_it = it;
                have_db = true;
            }
            for (size_t i = 0; i < nseq && i < 64; i++)
                if (k[0] == seqs[i].name[0] && strcmp(k, seqs[i].name) == 0)
                    in_body |= (uint64_t)1 << i;
        }
    }
    size_t cmd_size = body_len;
    for (size_t i = 0; i < nseq; i++) {
        for (size_t j = 0; j < i; j++)
            if (strcmp(seqs[i].name, seqs[j].name) == 0)
                REPLY_WITH(WIRE_ERR_DUPLICATE_SEQUENCE, "Duplicate document sequence: %s",
                           seqs[i].name);
        if (seqs[i].name[0] == '\0')
            REPLY_WITH(DBERR_BAD_VALUE, "OP_MSG document sequence has an empty identifier");
        bool dup = i < 64 && !strchr(seqs[i].name, '.') ? (in_body >> i) & 1
                                                         : bson_has_field(&b, seqs[i].name);
        if (dup)
            REPLY_WITH(WIRE_ERR_SEQUENCE_IN_BODY,
                       "Duplicate field between body and document sequence %s", seqs[i].name);
        /* the array element: type, name, length, terminator; each document
         * gains a type byte and an index key of at most 10 digits */
        cmd_size += strlen(seqs[i].name) + 7 + seqs[i].len + (seqs[i].len / 5) * 12;
    }
    st = take_db(have_db ? &db_it : NULL, req, err);
    if (st != WIRE_PARSE_OK)
        goto cleanup;

    /* sized once: the command is built without growing it again */
    if (cmd_size < WIRE_MAX_MESSAGE_SIZE && bson_reserve_buffer(&req->cmd, (uint32_t)cmd_size))
        bson_reinit(&req->cmd);
    bson_concat(&req->cmd, &b);
    for (size_t i = 0; i < nseq; i++) {
        bson_t arr;
        uint32_t idx = 0;
        bson_append_array_begin(&req->cmd, seqs[i].name, -1, &arr);
        for (const uint8_t *q = seqs[i].docs; q < seqs[i].docs + seqs[i].len; idx++) {
            size_t dl = (size_t)wire_rd_i32(q);
            bson_t d;
            char keybuf[16];
            const char *key;
            size_t klen = bson_uint32_to_string(idx, &key, keybuf, sizeof keybuf);
            bson_init_static(&d, q, dl);
            bson_append_document(&arr, key, (int)klen, &d);
            q += dl;
        }
        bson_append_array_end(&req->cmd, &arr);
    }
cleanup:
    if (seqs != seq_room)
        bson_free(seqs);
    return st;
}

/* Parses a legacy OP_QUERY; only `<db>.$cmd` carries a command. */
static wire_parse_status_t parse_query(const uint8_t *msg, size_t len, wire_request_t *req,
                                       dberr_t *err)
{
    wire_parse_status_t st = WIRE_PARSE_OK;
    const uint8_t *p = msg + WIRE_HEADER_SIZE;
    const uint8_t *end = msg + len;
    const uint8_t *nul, *query;
    const char *ns, *dot;
    size_t nslen, dblen;
    int32_t qflags, ntoreturn, dl;
    bson_t q, inner;
    const bson_t *cmd;
    bson_iter_t it, rp;
    bool have_rp = false;

    if (end - p < 4)
        CLOSE_WITH("OP_QUERY of %zu bytes has no flags", len);
    qflags = wire_rd_i32(p);
    p += 4;
    nul = memchr(p, '\0', (size_t)(end - p));
    if (!nul)
        CLOSE_WITH("OP_QUERY fullCollectionName is not terminated");
    ns = (const char *)p;
    nslen = (size_t)(nul - p);
    p = nul + 1;
    if (end - p < 8)
        CLOSE_WITH("OP_QUERY is truncated before numberToReturn");
    ntoreturn = wire_rd_i32(p + 4);
    p += 8;
    if (end - p < 5)
        CLOSE_WITH("OP_QUERY has no query document");
    dl = wire_rd_i32(p);
    if (dl < 5 || dl > end - p)
        CLOSE_WITH("OP_QUERY query length %d does not fit the %td bytes left", dl, end - p);
    query = p;
    p += dl;
    if (p < end) {
        /* Optional returnFieldsSelector: exactly one document, nothing after it. */
        if (end - p < 5)
            CLOSE_WITH("OP_QUERY has %td trailing bytes", end - p);
        int32_t fl = wire_rd_i32(p);
        if (fl < 5 || fl != end - p)
            CLOSE_WITH("OP_QUERY returnFieldsSelector length %d does not match the %td bytes "
                       "left",
                       fl, end - p);
    }

    dot = memchr(ns, '.', nslen);
    if (!dot || strcmp(dot + 1, "$cmd") != 0)
        REPLY_WITH(WIRE_LEGACY_OP_CODE, "OP_QUERY is no longer supported" WIRE_LEGACY_OP_SUFFIX);
    dblen = (size_t)(dot - ns);
    if (!bson_utf8_validate(ns, nslen, false)) /* it would become $db, a BSON string */
        REPLY_WITH(DBERR_INVALID_NAMESPACE,
                   "Invalid namespace specified: the OP_QUERY namespace is not valid UTF-8");
    if (dblen == 0 || dblen >= sizeof req->db)
        REPLY_WITH(DBERR_INVALID_NAMESPACE, "Invalid namespace specified '%.*s'",
                   (int)(nslen > 80 ? 80 : nslen), ns);
    memcpy(req->db, ns, dblen);
    req->db[dblen] = '\0';
    req->has_db = true;

    if (!validate_doc(query, (size_t)dl, "OP_QUERY command", err)) {
        st = WIRE_PARSE_REPLY_ERROR;
        goto cleanup;
    }
    if (p < end && !validate_doc(p, (size_t)(end - p), "OP_QUERY returnFieldsSelector", err)) {
        st = WIRE_PARSE_REPLY_ERROR;
        goto cleanup;
    }
    if (qflags & WIRE_QUERY_EXHAUST)
        REPLY_WITH(WIRE_ERR_EXHAUST_COMMAND,
                   "The 'exhaust' OP_QUERY flag is invalid for commands: %.*s", (int)nslen, ns);
    if (ntoreturn != 1 && ntoreturn != -1)
        REPLY_WITH(WIRE_ERR_BAD_NTORETURN,
                   "Bad numberToReturn (%d) for $cmd type ns - can only be 1 or -1", ntoreturn);

    /* Upconvert as mongod does: {$query|query: {cmd}, $readPreference: rp}. */
    bson_init_static(&q, query, (size_t)dl);
    cmd = &q;
    if (bson_iter_init(&it, &q) && bson_iter_next(&it) &&
        (strcmp(bson_iter_key(&it), "$query") == 0 || strcmp(bson_iter_key(&it), "query") == 0)) {
        if (bson_has_field(&q, "$maxTimeMS"))
            REPLY_WITH(DBERR_INVALID_OPTIONS,
                       "cannot use $maxTimeMS query option with commands; use maxTimeMS "
                       "command option instead");
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            REPLY_WITH(WIRE_ERR_EXPECTED_OBJECT, "invalid parameter: expected an object (%s)",
                       bson_iter_key(&it));
        bsonview_iter(&it, &inner);
        have_rp = bson_iter_init_find(&rp, &q, "$readPreference");
        cmd = &inner;
    }
    if (bson_has_field(cmd, "$db"))
        REPLY_WITH(WIRE_ERR_DB_IN_OP_QUERY, "$db is not allowed in OP_QUERY requests");

    bson_concat(&req->cmd, cmd);
    if (!bson_has_field(cmd, "$readPreference")) {
        if (have_rp) {
            if (BSON_ITER_HOLDS_ARRAY(&rp)) {
                /* Copied by hand: bson_append_array complains on stderr
                 * about arrays whose first key is not "0". */
                const uint8_t *data;
                uint32_t alen;
                bson_t src, dst;
                bson_iter_array(&rp, &alen, &data);
                bson_init_static(&src, data, alen);
                bson_append_array_begin(&req->cmd, "$readPreference", -1, &dst);
                bson_concat(&dst, &src);
                bson_append_array_end(&req->cmd, &dst);
            } else {
                bson_append_iter(&req->cmd, "$readPreference", -1, &rp);
            }
        } else if (qflags & WIRE_QUERY_SLAVE_OK) {
            bson_t mode;
            bson_append_document_begin(&req->cmd, "$readPreference", -1, &mode);
            BSON_APPEND_UTF8(&mode, "mode", "secondaryPreferred");
            bson_append_document_end(&req->cmd, &mode);
        }
    }
    BSON_APPEND_UTF8(&req->cmd, "$db", req->db);
cleanup:
    return st;
}

/* Parses an OP_COMPRESSED: decompresses into a rebuilt message with the
 * original opcode and parses that. */
static wire_parse_status_t parse_compressed(const uint8_t *msg, size_t len, wire_request_t *req,
                                            dberr_t *err)
{
    wire_parse_status_t st = WIRE_PARSE_OK;
    const uint8_t *head = msg + WIRE_HEADER_SIZE; /* OP_COMPRESSED's own header */
    const uint8_t *data;                          /* the compressed message after it */
    size_t data_len;
    uint8_t *plain = NULL;
    int32_t orig, usize;
    uint8_t cid;

    if (len < WIRE_HEADER_SIZE + WIRE_COMPRESSED_HEADER_SIZE)
        CLOSE_WITH("Invalid compressed message header");
    orig = wire_rd_i32(head);
    usize = wire_rd_i32(head + 4);
    cid = head[8];
    data = head + WIRE_COMPRESSED_HEADER_SIZE;
    data_len = len - WIRE_HEADER_SIZE - WIRE_COMPRESSED_HEADER_SIZE;
    if (!wire_compressor_name(cid))
        CLOSE_WITH("Compression algorithm %u specified in message is not available", (unsigned)cid);
    req->compressor = cid;
    if (orig == WIRE_OP_COMPRESSED)
        CLOSE_WITH("OP_COMPRESSED wraps another OP_COMPRESSED");
    if (usize < 0 || (int64_t)usize + WIRE_HEADER_SIZE > WIRE_MAX_MESSAGE_SIZE)
        CLOSE_WITH("Decompressed message would be larger than maximum message size "
                   "(uncompressedSize %d)",
                   usize);
    if (!wire_decompressed_size_plausible(cid, data, data_len, (size_t)usize))
        CLOSE_WITH("%s-compressed message cannot decompress to uncompressedSize %d",
                   wire_compressor_name(cid), usize);

    plain = bson_malloc((size_t)usize + WIRE_HEADER_SIZE);
    wire_wr_i32(plain, usize + WIRE_HEADER_SIZE);
    memcpy(plain + 4, msg + 4, 8); /* requestID, responseTo */
    wire_wr_i32(plain + 12, orig);
    if (!wire_decompress(cid, data, data_len, plain + WIRE_HEADER_SIZE, (size_t)usize, err)) {
        err->code = DBERR_PROTOCOL_ERROR;
        st = WIRE_PARSE_CLOSE;
        goto cleanup;
    }
    st = parse_message(plain, (size_t)usize + WIRE_HEADER_SIZE, req, err, true);
cleanup:
    bson_free(plain);
    return st;
}

/* Name of a removed legacy opcode, or NULL. */
static const char *removed_opcode_name(int32_t op)
{
    switch (op) {
    case WIRE_OP_REPLY:
        return "OP_REPLY";
    case WIRE_OP_UPDATE:
        return "OP_UPDATE";
    case WIRE_OP_INSERT:
        return "OP_INSERT";
    case WIRE_OP_GET_MORE:
        return "OP_GET_MORE";
    case WIRE_OP_DELETE:
        return "OP_DELETE";
    case WIRE_OP_KILL_CURSORS:
        return "OP_KILL_CURSORS";
    default:
        return NULL;
    }
}

/* Parses a whole message whose header is already known to be consistent. */
static wire_parse_status_t parse_message(const uint8_t *msg, size_t len, wire_request_t *req,
                                         dberr_t *err, bool inside_compressed)
{
    wire_parse_status_t st = WIRE_PARSE_OK;
    int32_t op = wire_rd_i32(msg + 12);
    const char *removed;

    req->opcode = op;
    switch (op) {
    case WIRE_OP_MSG:
        return parse_msg(msg, len, req, err);
    case WIRE_OP_QUERY:
        return parse_query(msg, len, req, err);
    case WIRE_OP_COMPRESSED:
        if (inside_compressed)
            CLOSE_WITH("OP_COMPRESSED wraps another OP_COMPRESSED");
        return parse_compressed(msg, len, req, err);
    default:
        removed = removed_opcode_name(op);
        if (removed)
            CLOSE_WITH("%s (opcode %d) is no longer supported" WIRE_LEGACY_OP_SUFFIX, removed, op);
        CLOSE_WITH("unknown opcode %d", op);
    }
cleanup:
    return st;
}

wire_parse_status_t wire_request_parse(const uint8_t *frame, size_t len, wire_request_t *req,
                                       dberr_t *err)
{
    wire_parse_status_t st = WIRE_PARSE_OK;
    dberr_t local;

    if (!err)
        err = &local;
    dberr_clear(err);
    req->request_id = 0;
    req->opcode = 0;
    req->compressor = -1;
    req->flags = 0;
    bson_init(&req->cmd);
    req->db[0] = '\0';
    req->has_db = false;

    if (!frame || len < WIRE_HEADER_SIZE)
        CLOSE_WITH("frame of %zu bytes is shorter than the header", len);
    if (len > WIRE_MAX_MESSAGE_SIZE)
        CLOSE_WITH("frame of %zu bytes is larger than the maximum message size", len);
    if ((size_t)wire_rd_i32(frame) != len)
        CLOSE_WITH("messageLength %d does not match the %zu-byte frame", wire_rd_i32(frame), len);
    req->request_id = wire_rd_i32(frame + 4);
    st = parse_message(frame, len, req, err, false);
cleanup:
    if (st != WIRE_PARSE_OK) {
        /* Half-built commands never leak out. */
        bson_reinit(&req->cmd);
        if (st == WIRE_PARSE_CLOSE) {
            req->db[0] = '\0';
            req->has_db = false;
        }
    }
    return st;
}

void wire_request_destroy(wire_request_t *req)
{
    if (!req)
        return;
    bson_destroy(&req->cmd);
    bson_init(&req->cmd); /* a second destroy is harmless */
}

/* Appends a reply to `out`; `legacy_flags` is OP_REPLY's responseFlags. */
static void reply_append(buf_t *out, const wire_request_t *req, int32_t reply_id,
                         const bson_t *body, uint32_t msg_flags, int32_t legacy_flags,
                         int compressor)
{
    size_t start = out->len;
    bool legacy = req && req->opcode == WIRE_OP_QUERY;
    int32_t response_to = req ? req->request_id : 0;
    int32_t opcode = legacy ? WIRE_OP_REPLY : WIRE_OP_MSG;
    buf_t z;

    buf_init(&z);
    buf_reserve(out, 36 + body->len); /* the largest header, then the body */
    buf_append_i32le(out, 0); /* messageLength, patched below */
    buf_append_i32le(out, reply_id);
    buf_append_i32le(out, response_to);
    buf_append_i32le(out, opcode);
    if (legacy) {
        buf_append_i32le(out, legacy_flags);
        buf_append_i32le(out, 0); /* cursorID (int64) */
        buf_append_i32le(out, 0);
        buf_append_i32le(out, 0); /* startingFrom */
        buf_append_i32le(out, 1); /* numberReturned */
    } else {
        buf_append_i32le(out, (int32_t)msg_flags);
        buf_push(out, 0); /* kind 0: body */
    }
    buf_append(out, bson_get_data(body), body->len);
    size_t msg_len = out->len - start;
    wire_wr_i32(out->data + start, (int32_t)msg_len);

    if (compressor < 0 || !wire_compressor_name(compressor))
        goto cleanup;
    buf_append_i32le(&z, 0); /* messageLength, patched below */
    buf_append_i32le(&z, reply_id);
    buf_append_i32le(&z, response_to);
    buf_append_i32le(&z, WIRE_OP_COMPRESSED);
    buf_append_i32le(&z, opcode);
    buf_append_i32le(&z, (int32_t)(msg_len - WIRE_HEADER_SIZE));
    buf_push(&z, (uint8_t)compressor);
    if (!wire_compress(compressor, out->data + start + WIRE_HEADER_SIZE, msg_len - WIRE_HEADER_SIZE,
                       &z))
        goto cleanup; /* send it uncompressed */
    wire_wr_i32(z.data, (int32_t)z.len);
    out->len = start;
    buf_append(out, z.data, z.len);
cleanup:
    buf_destroy(&z);
}

void wire_reply_append(buf_t *out, const wire_request_t *req, int32_t reply_id, const bson_t *body,
                       uint32_t msg_flags, int compressor)
{
    reply_append(out, req, reply_id, body, msg_flags, WIRE_REPLY_AWAIT_CAPABLE, compressor);
}

void wire_error_reply_append(buf_t *out, const wire_request_t *req, int32_t reply_id,
                             const dberr_t *err, int compressor)
{
    bson_t body = BSON_INITIALIZER;
    int code = err && err->code ? err->code : DBERR_INTERNAL_ERROR;
    const char *msg = err ? err->msg : "";

    if (code == WIRE_LEGACY_OP_CODE && req && req->opcode == WIRE_OP_QUERY) {
        /* mongod: makeErrorResponseToUnsupportedOpQuery. */
        BSON_APPEND_UTF8(&body, "$err", msg);
        BSON_APPEND_INT32(&body, "code", code);
        BSON_APPEND_DOUBLE(&body, "ok", 0.0);
        reply_append(out, req, reply_id, &body, 0, WIRE_REPLY_QUERY_FAILURE, compressor);
    } else {
        BSON_APPEND_DOUBLE(&body, "ok", 0.0);
        BSON_APPEND_UTF8(&body, "errmsg", msg);
        BSON_APPEND_INT32(&body, "code", code);
        BSON_APPEND_UTF8(&body, "codeName", dberr_codename(code));
        reply_append(out, req, reply_id, &body, 0, WIRE_REPLY_AWAIT_CAPABLE, compressor);
    }
    bson_destroy(&body);
}

bool wire_command_compressible(const bson_t *cmd)
{
    static const char *const never[] = {
        "hello",        "isMaster",   "ismaster",   "saslStart",       "saslContinue",   "getnonce",
        "authenticate", "createUser", "updateUser", "copydbSaslStart", "copydbgetnonce", "copydb",
    };
    bson_iter_t it;

    if (!cmd || !bson_iter_init(&it, cmd) || !bson_iter_next(&it))
        return true;
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strcmp(bson_iter_key(&it), never[i]) == 0)
            return false;
    return true;
}
