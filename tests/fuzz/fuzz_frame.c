/* fuzz_frame: one wire message through wire_frame_peek, decompression
 * (OP_COMPRESSED with snappy, zlib, zstd) and OP_MSG / OP_QUERY parsing,
 * then the reply builders. Any status is fine; a crash, a sanitizer report
 * or a leak is a bug. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/bsoncheck.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int32_t frame_len = 0;
    dberr_t err = {0};
    wire_frame_status_t st = wire_frame_peek(data, size, &frame_len, &err);
    if (st != WIRE_FRAME_READY)
        return 0;
    /* a private copy of exactly the frame, so ASan sees any overread */
    uint8_t *frame = malloc((size_t)frame_len);
    memcpy(frame, data, (size_t)frame_len);
    wire_request_t req;
    memset(&req, 0, sizeof req);
    dberr_t perr = {0};
    wire_parse_status_t ps = wire_request_parse(frame, (size_t)frame_len, &req, &perr);
    buf_t out;
    buf_init(&out);
    if (ps == WIRE_PARSE_OK) {
        uint32_t at;
        if (bsoncheck_doc(&req.cmd, &at) != BSONCHECK_OK)
            abort(); /* the parser promised a valid command document */
        bson_t body = BSON_INITIALIZER;
        BSON_APPEND_INT32(&body, "ok", 1);
        wire_command_compressible(&req.cmd);
        wire_reply_append(&out, &req, 1, &body, 0, req.compressor);
        bson_destroy(&body);
    } else if (ps == WIRE_PARSE_REPLY_ERROR) {
        wire_error_reply_append(&out, &req, 1, &perr, req.compressor);
    }
    buf_destroy(&out);
    wire_request_destroy(&req);
    free(frame);
    return 0;
}
