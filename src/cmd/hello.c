/* hello: the handshake (hello / isMaster / ismaster). atomdb presents itself
 * as the primary of a single-node replica set so drivers turn on sessions,
 * retryable writes and transactions; also negotiates wire compression and
 * answers awaitable hellos after maxAwaitTimeMS. */
#include "cmd/cmd-private.h"

#include <string.h>

#include "util/log.h"

/* Appends the topology description (everything but ok). */
static void hello_append(cmd_ctx_t *ctx, bson_t *reply, bool legacy, bool helloOk)
{
    bson_t doc, arr;
    char key[16];
    bson_append_document_begin(reply, "topologyVersion", -1, &doc);
    BSON_APPEND_OID(&doc, "processId", &server.process_id);
    BSON_APPEND_INT64(&doc, "counter", 0);
    bson_append_document_end(reply, &doc);
    bson_append_array_begin(reply, "hosts", -1, &arr);
    BSON_APPEND_UTF8(&arr, "0", server.config.advertise);
    bson_append_array_end(reply, &arr);
    BSON_APPEND_UTF8(reply, "setName", server.config.replset);
    BSON_APPEND_INT32(reply, "setVersion", repl_config_version());
    BSON_APPEND_BOOL(reply, legacy ? "ismaster" : "isWritablePrimary", true);
    BSON_APPEND_BOOL(reply, "secondary", false);
    BSON_APPEND_UTF8(reply, "primary", server.config.advertise);
    BSON_APPEND_UTF8(reply, "me", server.config.advertise);
    BSON_APPEND_OID(reply, "electionId", &server.election_id);
    int64_t now = server_now_ms();
    bson_append_document_begin(reply, "lastWrite", -1, &doc);
    bson_t op;
    bson_append_document_begin(&doc, "opTime", -1, &op);
    BSON_APPEND_TIMESTAMP(&op, "ts", (uint32_t)(now / 1000), 1);
    BSON_APPEND_INT64(&op, "t", 1);
    bson_append_document_end(&doc, &op);
    BSON_APPEND_DATE_TIME(&doc, "lastWriteDate", now - now % 1000);
    bson_append_document_begin(&doc, "majorityOpTime", -1, &op);
    BSON_APPEND_TIMESTAMP(&op, "ts", (uint32_t)(now / 1000), 1);
    BSON_APPEND_INT64(&op, "t", 1);
    bson_append_document_end(&doc, &op);
    BSON_APPEND_DATE_TIME(&doc, "majorityWriteDate", now - now % 1000);
    bson_append_document_end(reply, &doc);
    BSON_APPEND_INT32(reply, "maxBsonObjectSize", WIRE_MAX_BSON_OBJECT_SIZE);
    BSON_APPEND_INT32(reply, "maxMessageSizeBytes", WIRE_MAX_MESSAGE_SIZE);
    BSON_APPEND_INT32(reply, "maxWriteBatchSize", WIRE_MAX_WRITE_BATCH_SIZE);
    BSON_APPEND_DATE_TIME(reply, "localTime", now);
    BSON_APPEND_INT32(reply, "logicalSessionTimeoutMinutes", 30);
    BSON_APPEND_INT64(reply, "connectionId", ctx->client->id);
    BSON_APPEND_INT32(reply, "minWireVersion", 0);
    BSON_APPEND_INT32(reply, "maxWireVersion", SERVER_MAX_WIRE_VERSION);
    BSON_APPEND_BOOL(reply, "readOnly", false);
    if (ctx->client->ncompressors > 0) {
        bson_append_array_begin(reply, "compression", -1, &arr);
        for (int i = 0; i < ctx->client->ncompressors; i++)
            BSON_APPEND_UTF8(&arr, cmd_index_key((uint32_t)i, key, sizeof key),
                             wire_compressor_name(ctx->client->compressors[i]));
        bson_append_array_end(reply, &arr);
    }
    sasl_hello_append(ctx, reply);
    if (helloOk)
        BSON_APPEND_BOOL(reply, "helloOk", true);
}

/* The awaitable hello's wait ended: answer with the (unchanged) topology. */
static void hello_on_await_done(uv_timer_t *t)
{
    cmd_client_t *client = t->data;
    bson_t reply = BSON_INITIALIZER;
    cmd_ctx_t ctx = {0};
    ctx.client = client;
    bson_t empty = BSON_INITIALIZER;
    ctx.cmd = &empty;
    hello_append(&ctx, &reply, client->park_legacy, client->park_hello_ok);
    BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
    cmd_append_cluster_time(&reply);
    if (client->park_exhaust && !server.stopping) {
        /* exhaust: answer with moreToCome and keep streaming, one reply per
         * maxAwaitTimeMS, until the client goes away */
        client->send_stream_reply(client, &reply);
        uv_timer_start(t, hello_on_await_done, client->park_await_ms, 0);
    } else {
        uv_close((uv_handle_t *)t, (uv_close_cb)bson_free);
        client->park_timer = NULL;
        client->send_parked_reply(client, &reply);
    }
    bson_destroy(&reply);
}

/* Records the compressors both sides support, in the client's order. */
static bool hello_negotiate(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it, el;
    if (!cmd_find(ctx, "compression", &it))
        return true;
    if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &el))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "'compression' is not an array");
    ctx->client->ncompressors = 0;
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_UTF8(&el))
            return dberr_set(err, DBERR_BAD_VALUE, "'compression' is not an array of strings");
        int id = wire_compressor_id(bson_iter_utf8(&el, NULL));
        if (id > 0 && ctx->client->ncompressors < 4)
            ctx->client->compressors[ctx->client->ncompressors++] = id;
    }
    return true;
}

bool cmd_hello(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    bool legacy = strcmp(ctx->name, "hello") != 0;
    bool helloOk = false;
    if (cmd_find(ctx, "helloOk", &it))
        helloOk = bson_iter_as_bool(&it);
    if (cmd_find(ctx, "client", &it)) {
        if (ctx->client->metadata)
            return dberr_set(err, 186, "The client metadata document may only be sent in the "
                                       "first hello");
        bson_t md;
        if (!cmd_iter_doc(&it, &md) || !BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "'client' must be an object");
        ctx->client->metadata = bson_copy(&md);
        log_debug("NETWORK", "connection %lld client metadata received",
                  (long long)ctx->client->id);
    }
    if (!hello_negotiate(ctx, err))
        return false;

    /* awaitable hello: wait while the client's topologyVersion is current */
    bson_iter_t tv, mat;
    if (cmd_find(ctx, "topologyVersion", &tv) && cmd_find(ctx, "maxAwaitTimeMS", &mat)) {
        bson_t tvdoc;
        bson_iter_t pid, counter;
        if (!BSON_ITER_HOLDS_NUMBER(&mat) || bson_iter_as_int64(&mat) < 0)
            return dberr_set(err, DBERR_BAD_VALUE, "maxAwaitTimeMS must be a non-negative integer");
        if (!cmd_iter_doc(&tv, &tvdoc))
            return dberr_set(err, DBERR_TYPE_MISMATCH, "topologyVersion must be an object");
        bool same = bson_iter_init_find(&pid, &tvdoc, "processId") && BSON_ITER_HOLDS_OID(&pid) &&
                    bson_oid_equal(bson_iter_oid(&pid), &server.process_id) &&
                    bson_iter_init_find(&counter, &tvdoc, "counter") &&
                    bson_iter_as_int64(&counter) == 0;
        if (same && !ctx->client->park_timer && !server.stopping) {
            uv_timer_t *t = bson_malloc0(sizeof *t);
            uv_timer_init(server.loop, t);
            t->data = ctx->client;
            ctx->client->park_timer = t;
            ctx->client->park_legacy = legacy;
            ctx->client->park_hello_ok = helloOk;
            ctx->client->park_await_ms = (uint64_t)bson_iter_as_int64(&mat);
            ctx->client->park_exhaust = ctx->req && ctx->req->opcode == WIRE_OP_MSG &&
                                        (ctx->req->flags & WIRE_MSG_EXHAUST_ALLOWED);
            uv_timer_start(t, hello_on_await_done, (uint64_t)bson_iter_as_int64(&mat), 0);
            ctx->parked = true;
            return true;
        }
    }
    hello_append(ctx, ctx->reply, legacy, helloOk);
    return true;
}
