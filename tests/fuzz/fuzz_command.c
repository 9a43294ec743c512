/* fuzz_command: commands through cmd_run (the whole command layer: dispatch,
 * argument checks, CRUD, aggregate, indexes, sessions, transactions, locks)
 * against an in-memory catalog with --journal none, without a network.
 * Input = BSON documents laid end to end, each one command run in turn
 * ($db from the document, else "test"), so an insert can be followed by a
 * find over what it wrote. Every reply must be a valid document holding
 * `ok`. After each input every database is dropped and every session
 * killed, so inputs do not pile up state. The client is not local, so
 * shutdown is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/op.h"
#include "cmd/server.h"
#include "fuzz.h"
#include "journal/journal.h"
#include "lease/lease.h"
#include "store/catalog.h"
#include "store/cursor.h"

static const char *fuzz_dir;
static cmd_client_t fuzz_client;
static int64_t fuzz_next_id;
/* Keeps the loop turning while fuzz_finish_op drives a suspended
 * operation: op.c's idle handle is unreferenced, so uv_run alone would
 * return at once. */
static uv_prepare_t fuzz_keepalive;

static void fuzz_parked_reply(cmd_client_t *client, const bson_t *body)
{
    fuzz_check_doc(body);
}

static void fuzz_rerun(cmd_client_t *client)
{
}

static void fuzz_no_stop(void)
{
}

static void fuzz_keepalive_cb(uv_prepare_t *h)
{
}

/* A command that yielded on its fiber (a suspended operation) still reads
 * its request: as the server keeps the request until then (conn.c), run it
 * to its end on the loop before the request is freed, or, should it not
 * end, interrupt it as a client that disconnects does (conn_close). */
static void fuzz_finish_op(void)
{
    uv_prepare_start(&fuzz_keepalive, fuzz_keepalive_cb);
    for (int i = 0; fuzz_client.op && i < 100000; i++)
        uv_run(server.loop, UV_RUN_NOWAIT);
    uv_prepare_stop(&fuzz_keepalive);
    if (fuzz_client.op)
        op_client_closed(&fuzz_client);
}

static void fuzz_client_init(void)
{
    memset(&fuzz_client, 0, sizeof fuzz_client);
    fuzz_client.id = ++fuzz_next_id;
    snprintf(fuzz_client.remote, sizeof fuzz_client.remote, "10.0.0.2:40000");
    snprintf(fuzz_client.local, sizeof fuzz_client.local, "10.0.0.1:27017");
    fuzz_client.is_local = false;
    fuzz_client.send_parked_reply = fuzz_parked_reply;
    fuzz_client.send_stream_reply = fuzz_parked_reply;
    fuzz_client.rerun_parked = fuzz_rerun;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_dir = fuzz_tmpdir_make("command");
    server.txn_lock_timeout_ms = 5;
    server.txn_lifetime_s = 60;
    server.config.bind = "127.0.0.1";
    server.config.port = 27017;
    server.config.dbpath = fuzz_dir;
    server.config.replset = "rs0";
    snprintf(server.config.advertise, sizeof server.config.advertise, "127.0.0.1:27017");
    bson_init(&server.config.argv);
    bson_init(&server.config.parsed);
    server.start_ms = server_now_ms();
    server.start_hr = uv_hrtime();
    bson_oid_init(&server.process_id, NULL);
    bson_oid_init_from_string(&server.election_id, "7fffffff0000000000000001");
    server.loop = uv_default_loop();
    server.request_stop = fuzz_no_stop;
    server.catalog = catalog_new();
    server.cursors = cursors_new();
    journal_options_t jopts = {.dbpath = fuzz_dir, .mode = JOURNAL_NONE};
    dberr_t err = {0};
    if (!journal_open(server.loop, &jopts, server.catalog, &err))
        abort();
    lease_init(server.loop, server.catalog);
    uv_prepare_init(server.loop, &fuzz_keepalive);
    fuzz_client_init();
    return 0;
}

/* Runs `cmd` on `db`; checks the reply. */
static void fuzz_run(const bson_t *cmd, const char *db)
{
    wire_request_t req;
    memset(&req, 0, sizeof req);
    req.request_id = 1;
    req.opcode = WIRE_OP_MSG;
    req.compressor = -1;
    bson_copy_to(cmd, &req.cmd);
    snprintf(req.db, sizeof req.db, "%s", db);
    req.has_db = true;
    if (!bson_has_field(&req.cmd, "$db"))
        BSON_APPEND_UTF8(&req.cmd, "$db", db);
    bson_t reply = BSON_INITIALIZER;
    cmd_status_t st = cmd_run(&fuzz_client, &req, &reply);
    if (st == CMD_PARKED && fuzz_client.op)
        fuzz_finish_op();
    if (st == CMD_REPLIED) {
        fuzz_check_doc(&reply);
        if (!bson_has_field(&reply, "ok"))
            abort(); /* every reply says ok: 1 or ok: 0 */
    }
    bson_destroy(&reply);
    wire_request_destroy(&req);
    uv_run(server.loop, UV_RUN_NOWAIT);
}

static void fuzz_collect_db(const char *db, void *ctx)
{
    bson_t *names = ctx;
    char key[16];
    const char *k;
    bson_uint32_to_string(bson_count_keys(names), &k, key, sizeof key);
    bson_append_utf8(names, k, -1, db, -1);
}

/* Undoes what an input did: a new client (the old one closed), every
 * session killed, fsync locks released, every database dropped. */
static void fuzz_reset(void)
{
    op_client_closed(&fuzz_client); /* as conn_close: the operation ends first */
    cmd_client_closed(&fuzz_client);
    fuzz_client_init();
    bson_t cmd;
    bson_init(&cmd);
    bson_t empty;
    bson_append_array_begin(&cmd, "killAllSessions", -1, &empty);
    bson_append_array_end(&cmd, &empty);
    fuzz_run(&cmd, "admin");
    bson_destroy(&cmd);
    for (int i = 0; i < 4; i++) {
        bson_init(&cmd);
        BSON_APPEND_INT32(&cmd, "fsyncUnlock", 1);
        fuzz_run(&cmd, "admin");
        bson_destroy(&cmd);
    }
    bson_t names = BSON_INITIALIZER;
    catalog_foreach_db(server.catalog, fuzz_collect_db, &names);
    bson_iter_t it;
    bson_iter_init(&it, &names);
    while (bson_iter_next(&it)) {
        bson_init(&cmd);
        BSON_APPEND_INT32(&cmd, "dropDatabase", 1);
        fuzz_run(&cmd, bson_iter_utf8(&it, NULL));
        bson_destroy(&cmd);
    }
    bson_destroy(&names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    fuzz_docs_split(&d, data, size);
    for (int i = 0; i < d.n; i++) {
        bson_iter_t it;
        char db[128] = "test";
        if (bson_iter_init_find(&it, &d.docs[i], "$db") && BSON_ITER_HOLDS_UTF8(&it)) {
            uint32_t len;
            const char *s = bson_iter_utf8(&it, &len);
            if (len < sizeof db && strlen(s) == len)
                memcpy(db, s, len + 1);
        }
        fuzz_run(&d.docs[i], db);
    }
    fuzz_docs_free(&d);
    fuzz_reset();
    return 0;
}
