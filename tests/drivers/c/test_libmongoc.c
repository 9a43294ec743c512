/* test_libmongoc: a libmongoc 1.23 client run against a live atomdb.
 * Usage: test_libmongoc URI [COMPRESSOR]. Runs ping, buildInfo, listDatabases,
 * create/drop, serverStatus and a session; prints one "ok"/"not ok" line per
 * check and exits non-zero if any check failed or libmongoc logged a warning. */
#include <mongoc/mongoc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int passed;
static int failed;
static int warnings;

/* Records one check: prints "ok - what" or "not ok - what: detail". */
static bool check(bool cond, const char *what, const char *fmt, ...)
{
    if (cond) {
        printf("ok - %s\n", what);
        passed++;
    } else {
        va_list ap;
        printf("not ok - %s: ", what);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        failed++;
    }
    fflush(stdout);
    return cond;
}

/* Counts libmongoc log lines at warning level or worse and prints them all. */
static void log_handler(mongoc_log_level_t level, const char *domain, const char *message,
                        void *user_data)
{
    if (level <= MONGOC_LOG_LEVEL_WARNING) {
        warnings++;
        printf("libmongoc %s [%s]: %s\n", mongoc_log_level_str(level), domain, message);
    }
}

/* Runs `cmd` (destroyed here) on `db` with optional `opts`; fills `reply`
 * (always initialised). */
static bool run(mongoc_client_t *client, const char *db, bson_t *cmd, const bson_t *opts,
                bson_t *reply, bson_error_t *error)
{
    bool ok = mongoc_client_command_with_opts(client, db, cmd, NULL, opts, reply, error);
    bson_destroy(cmd);
    return ok;
}

static bool has_string(char **strv, const char *s)
{
    for (size_t i = 0; strv && strv[i]; i++) {
        if (strcmp(strv[i], s) == 0) {
            return true;
        }
    }
    return false;
}

static void test_ping(mongoc_client_t *client)
{
    bson_t reply;
    bson_error_t error;
    bool ok = run(client, "admin", BCON_NEW("ping", BCON_INT32(1)), NULL, &reply, &error);
    check(ok, "ping answers ok: 1", "%s", error.message);
    bson_destroy(&reply);
}

static void test_primary(mongoc_client_t *client)
{
    bson_error_t error;
    mongoc_server_description_t *sd = mongoc_client_select_server(client, true, NULL, &error);
    if (!check(sd != NULL, "a writable server is selected", "%s", error.message)) {
        return;
    }
    const char *type = mongoc_server_description_type(sd);
    check(strcmp(type, "RSPrimary") == 0, "the server is an RSPrimary", "type is %s", type);
    const bson_t *hello = mongoc_server_description_hello_response(sd);
    bson_iter_t it;
    check(bson_iter_init_find(&it, hello, "setName") && BSON_ITER_HOLDS_UTF8(&it) &&
              strcmp(bson_iter_utf8(&it, NULL), "rs0") == 0,
          "hello.setName is rs0", "hello was %s", bson_as_relaxed_extended_json(hello, NULL));
    check(bson_iter_init_find(&it, hello, "maxWireVersion") && bson_iter_as_int64(&it) == 21,
          "hello.maxWireVersion is 21", "hello was %s", bson_as_relaxed_extended_json(hello, NULL));
    mongoc_server_description_destroy(sd);
}

static void test_build_info(mongoc_client_t *client)
{
    bson_t reply;
    bson_error_t error;
    bson_iter_t it;
    bool ok = run(client, "admin", BCON_NEW("buildInfo", BCON_INT32(1)), NULL, &reply, &error);
    if (check(ok, "buildInfo answers ok: 1", "%s", error.message)) {
        const char *v = bson_iter_init_find(&it, &reply, "version") && BSON_ITER_HOLDS_UTF8(&it)
                            ? bson_iter_utf8(&it, NULL)
                            : "";
        check(strncmp(v, "7.0.", 4) == 0, "buildInfo.version is 7.0.x", "version is '%s'", v);
        check(bson_iter_init_find(&it, &reply, "versionArray") && BSON_ITER_HOLDS_ARRAY(&it),
              "buildInfo.versionArray is an array", "reply %s",
              bson_as_relaxed_extended_json(&reply, NULL));
    }
    bson_destroy(&reply);
}

static void test_create_list_drop(mongoc_client_t *client)
{
    bson_error_t error;
    mongoc_database_t *db = mongoc_client_get_database(client, "c_driver");
    mongoc_database_drop(db, NULL);
    mongoc_collection_t *coll = mongoc_database_create_collection(db, "things", NULL, &error);
    check(coll != NULL, "create collection c_driver.things", "%s", error.message);

    char **names = mongoc_database_get_collection_names_with_opts(db, NULL, &error);
    check(has_string(names, "things"), "listCollections shows the new collection", "%s",
          names ? "not listed" : error.message);
    bson_strfreev(names);

    char **dbs = mongoc_client_get_database_names_with_opts(client, NULL, &error);
    check(has_string(dbs, "c_driver"), "listDatabases shows the new database", "%s",
          dbs ? "not listed" : error.message);
    bson_strfreev(dbs);

    if (coll) {
        check(mongoc_collection_drop(coll, &error), "drop collection c_driver.things", "%s",
              error.message);
        mongoc_collection_destroy(coll);
    }
    names = mongoc_database_get_collection_names_with_opts(db, NULL, &error);
    check(names && !has_string(names, "things"), "the dropped collection is gone", "%s",
          names ? "still listed" : error.message);
    bson_strfreev(names);
    check(mongoc_database_drop(db, &error), "dropDatabase c_driver", "%s", error.message);
    mongoc_database_destroy(db);
}

static void test_server_status(mongoc_client_t *client)
{
    bson_t reply;
    bson_error_t error;
    bson_iter_t it;
    bool ok = run(client, "admin", BCON_NEW("serverStatus", BCON_INT32(1)), NULL, &reply, &error);
    if (check(ok, "serverStatus answers ok: 1", "%s", error.message)) {
        const char *fields[] = {"host", "version", "uptime", "connections.current",
                                "opcounters.command", "mem"};
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            char what[96];
            snprintf(what, sizeof what, "serverStatus has %s", fields[i]);
            bson_iter_t found;
            check(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, fields[i], &found),
                  what, "reply %s", bson_as_relaxed_extended_json(&reply, NULL));
        }
    }
    bson_destroy(&reply);
}

static void test_session(mongoc_client_t *client)
{
    bson_error_t error;
    mongoc_client_session_t *session = mongoc_client_start_session(client, NULL, &error);
    if (!check(session != NULL, "a session starts", "%s", error.message)) {
        return;
    }
    bson_t opts = BSON_INITIALIZER;
    check(mongoc_client_session_append(session, &opts, &error), "the session's lsid is appended",
          "%s", error.message);
    bson_t reply;
    bool ok = run(client, "admin", BCON_NEW("ping", BCON_INT32(1)), &opts, &reply, &error);
    check(ok, "ping inside the session answers ok: 1", "%s", error.message);
    bson_destroy(&reply);
    mongoc_database_t *db = mongoc_client_get_database(client, "c_driver_sess");
    char **names = mongoc_database_get_collection_names_with_opts(db, &opts, &error);
    check(names != NULL, "listCollections inside the session works", "%s", error.message);
    bson_strfreev(names);
    mongoc_database_destroy(db);
    bson_destroy(&opts);
    mongoc_client_session_destroy(session);
}

static void test_unknown_command(mongoc_client_t *client)
{
    bson_t reply;
    bson_error_t error;
    bool ok = run(client, "admin", BCON_NEW("nope", BCON_INT32(1)), NULL, &reply, &error);
    check(!ok && error.code == 59, "an unknown command fails with code 59", "ok=%d code=%u",
          ok, error.code);
    check(!ok && strcmp(error.message, "no such command: 'nope'") == 0,
          "the error message is mongod's", "message '%s'", error.message);
    bson_destroy(&reply);
}

static void test_compressor(mongoc_client_t *client, const char *compressor)
{
    bson_error_t error;
    mongoc_server_description_t *sd = mongoc_client_select_server(client, true, NULL, &error);
    if (!check(sd != NULL, "a server is selected for the compressor check", "%s", error.message)) {
        return;
    }
    uint32_t id = mongoc_server_description_id(sd);
    mongoc_server_description_destroy(sd);
    sd = mongoc_client_get_handshake_description(client, id, NULL, &error);
    if (!check(sd != NULL, "the handshake description is available", "%s", error.message)) {
        return;
    }
    const bson_t *hello = mongoc_server_description_hello_response(sd);
    bson_iter_t it, child;
    bool found = false;
    if (bson_iter_init_find(&it, hello, "compression") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
            if (BSON_ITER_HOLDS_UTF8(&child) && strcmp(bson_iter_utf8(&child, NULL), compressor) == 0) {
                found = true;
            }
        }
    }
    char what[96];
    snprintf(what, sizeof what, "the handshake negotiated %s", compressor);
    check(found, what, "hello was %s", bson_as_relaxed_extended_json(hello, NULL));
    mongoc_server_description_destroy(sd);
    /* A command big enough to be worth compressing. */
    char *big = bson_malloc(100001);
    memset(big, 'x', 100000);
    big[100000] = '\0';
    bson_t reply;
    bool ok = run(client, "admin", BCON_NEW("ping", BCON_INT32(1), "comment", BCON_UTF8(big)), NULL,
                  &reply, &error);
    check(ok, "a 100 KB compressible command answers ok: 1", "%s", error.message);
    bson_destroy(&reply);
    bson_free(big);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s URI [COMPRESSOR]\n", argv[0]);
        return 2;
    }
    mongoc_init();
    mongoc_log_set_handler(log_handler, NULL);

    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(argv[1], &error);
    if (!uri) {
        fprintf(stderr, "bad URI %s: %s\n", argv[1], error.message);
        return 2;
    }
    mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 10000);
    mongoc_client_t *client = mongoc_client_new_from_uri(uri);
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    mongoc_client_set_appname(client, "atomdb-test-libmongoc");

    test_ping(client);
    test_primary(client);
    test_build_info(client);
    test_create_list_drop(client);
    test_server_status(client);
    test_session(client);
    test_unknown_command(client);
    if (argc > 2) {
        test_compressor(client, argv[2]);
    }

    mongoc_client_destroy(client);
    mongoc_uri_destroy(uri);
    mongoc_cleanup();

    check(warnings == 0, "libmongoc logged no warnings or errors", "%d logged", warnings);
    printf("libmongoc checks: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
