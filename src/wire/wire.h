/* wire: MongoDB wire-protocol framing. Splits the byte stream into frames,
 * parses OP_MSG (kind 0 body, kind 1 document sequences, CRC-32C checksum),
 * legacy OP_QUERY on `<db>.$cmd`, and OP_COMPRESSED (snappy, zlib, zstd), and
 * builds OP_MSG / OP_REPLY replies. Knows nothing about commands. */
#ifndef ATOMDB_WIRE_H
#define ATOMDB_WIRE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/crc32c.h"
#include "util/dberr.h"

/* Opcodes. */
enum {
    WIRE_OP_REPLY = 1,
    WIRE_OP_UPDATE = 2001,
    WIRE_OP_INSERT = 2002,
    WIRE_OP_QUERY = 2004,
    WIRE_OP_GET_MORE = 2005,
    WIRE_OP_DELETE = 2006,
    WIRE_OP_KILL_CURSORS = 2007,
    WIRE_OP_COMPRESSED = 2012,
    WIRE_OP_MSG = 2013,
};

/* Limits atomdb advertises in hello and enforces. */
#define WIRE_HEADER_SIZE 16
#define WIRE_MAX_BSON_OBJECT_SIZE (16 * 1024 * 1024)
#define WIRE_MAX_MESSAGE_SIZE 48000000
#define WIRE_MAX_WRITE_BATCH_SIZE 100000

/* OP_MSG flag bits. */
#define WIRE_MSG_CHECKSUM_PRESENT (1u << 0)
#define WIRE_MSG_MORE_TO_COME (1u << 1)
#define WIRE_MSG_EXHAUST_ALLOWED (1u << 16)

/* Compressor ids (OP_COMPRESSED compressorId). */
enum {
    WIRE_COMPRESSOR_NOOP = 0,
    WIRE_COMPRESSOR_SNAPPY = 1,
    WIRE_COMPRESSOR_ZLIB = 2,
    WIRE_COMPRESSOR_ZSTD = 3,
};

/* The id of compressor `name` ("snappy", "zlib", "zstd"), or -1. */
int wire_compressor_id(const char *name);
/* The name of compressor `id`, or NULL. */
const char *wire_compressor_name(int id);

/* What the bytes buffered so far hold. */
typedef enum wire_frame_status {
    WIRE_FRAME_NEED_MORE, /* not yet a whole frame: read more */
    WIRE_FRAME_READY,     /* a whole frame of *frame_len bytes is at the front */
    WIRE_FRAME_BAD,       /* the length is impossible: close the connection */
} wire_frame_status_t;

/* Looks at the first `len` buffered bytes. A length below the header size,
 * negative, or above WIRE_MAX_MESSAGE_SIZE is WIRE_FRAME_BAD with `err`
 * saying why (for the log line). */
wire_frame_status_t wire_frame_peek(const uint8_t *data, size_t len, int32_t *frame_len,
                                    dberr_t *err);

/* A parsed request. */
typedef struct wire_request {
    int32_t request_id;   /* header requestID, echoed as responseTo */
    int32_t opcode;       /* WIRE_OP_MSG or WIRE_OP_QUERY (after decompression) */
    int compressor;       /* compressor the request came with, or -1 if none */
    uint32_t flags;       /* OP_MSG flagBits (0 for OP_QUERY) */
    bson_t cmd;           /* the command document, owned: the OP_MSG body with
                           * each kind-1 sequence appended as an array field, or
                           * the OP_QUERY query unwrapped from $query, with
                           * $readPreference and $db appended as mongod's
                           * upconversion does */
    char db[128];         /* $db (OP_MSG) or the db of `<db>.$cmd` (OP_QUERY) */
    bool has_db;          /* false when OP_MSG carried no $db */
} wire_request_t;

/* What wire_request_parse found. */
typedef enum wire_parse_status {
    WIRE_PARSE_OK,          /* `req` is filled; destroy it */
    WIRE_PARSE_REPLY_ERROR, /* answer with `err` ({ok: 0}); `req` has ids for the reply */
    WIRE_PARSE_CLOSE,       /* malformed frame or unknown/removed opcode:
                             * log `err` and close only this connection */
} wire_parse_status_t;

/* Parses one whole frame (`len` from wire_frame_peek). A body that fails
 * bson_validate is WIRE_PARSE_REPLY_ERROR with InvalidBSON 22; sections
 * inconsistent with the length, a bad checksum, illegal flag bits, an
 * OP_QUERY not on `$cmd` (answered as mongod 7 does), or an unknown opcode
 * are as documented above. After any status, wire_request_destroy(req) is
 * safe. */
wire_parse_status_t wire_request_parse(const uint8_t *frame, size_t len, wire_request_t *req,
                                       dberr_t *err);

/* Frees what `req` owns. */
void wire_request_destroy(wire_request_t *req);

/* Appends one reply frame for `req` to `out`: OP_MSG with body `body` (and
 * `msg_flags`, e.g. WIRE_MSG_MORE_TO_COME for exhaust) when the request was
 * OP_MSG, OP_REPLY when it was OP_QUERY. When `compressor` >= 0 the frame is
 * wrapped in OP_COMPRESSED with that compressor. */
void wire_reply_append(buf_t *out, const wire_request_t *req, int32_t reply_id,
                       const bson_t *body, uint32_t msg_flags, int compressor);

/* Appends the error reply for a request that wire_request_parse answered
 * with WIRE_PARSE_REPLY_ERROR (or any `err`): {ok: 0, errmsg, code, codeName}
 * as OP_MSG or OP_REPLY, except mongod 7's answer to an OP_QUERY not on
 * `$cmd` (code 5739101), which is OP_REPLY {$err, code, ok: 0} with the
 * QueryFailure flag. `compressor` as for wire_reply_append. */
void wire_error_reply_append(buf_t *out, const wire_request_t *req, int32_t reply_id,
                             const dberr_t *err, int compressor);

/* False for commands whose requests and replies must never be compressed
 * (hello, isMaster, saslStart, saslContinue, getnonce, authenticate,
 * createUser, updateUser, copydb*), per the OP_COMPRESSED spec: answer those
 * with compressor -1. Looks only at the first field of `cmd`. */
bool wire_command_compressible(const bson_t *cmd);

/* CRC-32C (Castagnoli) of `len` bytes, as OP_MSG checksums use: the one in
 * util/crc32c.h, which the journal shares. */
static inline uint32_t wire_crc32c(const uint8_t *data, size_t len)
{
    return crc32c(data, len);
}

#endif
