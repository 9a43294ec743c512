/* main: atomdb's command line, start-up and shutdown. Parses flags, prepares
 * --dbpath, starts the libuv loop with the listener and the housekeeping
 * timer, and stops cleanly on SIGINT/SIGTERM or the shutdown command. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "cmd/cmd-private.h"
#include "cmd/plancache.h"
#include "cmd/server.h"
#include "journal/journal.h"
#include "lease/lease.h"
#include "net/net.h"
#include "store/catalog.h"
#include "store/cursor.h"
#include "txn/session.h"
#include "txn/txn.h"
#include "util/log.h"

static uv_signal_t main_sigint, main_sigterm;
static uv_timer_t main_tick;

static void main_usage(FILE *out)
{
    fprintf(out,
            "Usage: atomdb [options]\n"
            "A document database server that speaks the MongoDB wire protocol.\n\n"
            "  --bind ADDR          address to listen on (default 127.0.0.1)\n"
            "  --port N             TCP port (default 27017)\n"
            "  --dbpath DIR         data directory, created if missing (default ./data)\n"
            "  --replSet NAME       replica set name presented to drivers (default rs0)\n"
            "  --advertise H:P      address given to drivers in hosts/me (default bind:port)\n"
            "  --max-conns N        refuse connections beyond N (default unlimited)\n"
            "  --log-level LEVEL    debug, info, warn or error (default info)\n"
            "  --journal MODE       fsync, write or none (default write; see docs/durability.md)\n"
            "  --snapshot-interval S  take a snapshot every S seconds of writes (default 300, 0 off)\n"
            "  --snapshot-wal-mb N  take a snapshot when the log grows by N MiB (default 256)\n"
            "  --repair             truncate a damaged log after keeping a copy of the files\n"
            "  --txn-isolation L    snapshot (default, as mongod) or serializable: the level of\n"
            "                       transactions that do not choose one (docs/concurrency.md)\n"
            "  --version            print the version and exit\n"
            "  --help               print this help and exit\n");
}

/* Creates `path` and its parents; false with errno set on failure. */
static bool main_mkdirs(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return false;
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return false;
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return false;
    }
    return access(tmp, W_OK) == 0;
}

static void main_on_closed_handle(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Stops the server: closes connections, timers and signals, so the loop
 * ends. */
static void main_stop(void)
{
    static bool stopped;
    if (stopped)
        return;
    stopped = true;
    server.stopping = true;
    log_info("CONTROL", "shutting down");
    net_stop();
    uv_timer_stop(&main_tick);
    lease_stop();
    journal_close();
    uv_walk(server.loop, main_on_closed_handle, NULL);
}

static void main_on_signal(uv_signal_t *s, int signum)
{
    log_info("CONTROL", "received signal %d (%s)", signum, strsignal(signum));
    main_stop();
}

static void main_ttl_one(collection_t *c, void *ctx)
{
    size_t *total = ctx;
    *total += collection_ttl_reap(c, server_now_ms());
}

/* Once a second: expire idle cursors and TTL-indexed documents. */
static void main_on_tick(uv_timer_t *t)
{
    int64_t now = server_now_ms();
    size_t closed = cursors_reap(server.cursors, now, admin_cursor_timeout());
    if (closed)
        log_info("QUERY", "closed %zu idle cursors", closed);
    session_reap(now, server.txn_lifetime_s);
    size_t expired = 0;
    catalog_foreach_all(server.catalog, main_ttl_one, &expired);
    if (expired)
        log_debug("INDEX", "TTL monitor deleted %zu documents", expired);
}

/* A session ended (endSessions, killSessions, expiry): the lease locks
 * taken under it are released (docs/locks.md). */
static void main_on_session_end(const uint8_t id[16])
{
    lease_session_ended(id, 16);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"bind", required_argument, NULL, 'b'},      {"bind_ip", required_argument, NULL, 'b'},
        {"port", required_argument, NULL, 'p'},      {"dbpath", required_argument, NULL, 'd'},
        {"replSet", required_argument, NULL, 'r'},   {"advertise", required_argument, NULL, 'a'},
        {"max-conns", required_argument, NULL, 'm'}, {"log-level", required_argument, NULL, 'l'},
        {"version", no_argument, NULL, 'V'},         {"help", no_argument, NULL, 'h'},
        {"journal", required_argument, NULL, 'j'},   {"snapshot-interval", required_argument, NULL, 'i'},
        {"snapshot-wal-mb", required_argument, NULL, 'w'}, {"repair", no_argument, NULL, 'R'},
        {"txn-isolation", required_argument, NULL, 'I'},
        {NULL, 0, NULL, 0}};
    server_config_t *cfg = &server.config;
    cfg->bind = "127.0.0.1";
    cfg->port = 27017;
    cfg->dbpath = "./data";
    cfg->replset = "rs0";
    cfg->max_conns = 0;
    const char *advertise = NULL;
    journal_options_t jopts = {.mode = JOURNAL_WRITE,
                               .snapshot_interval_s = 300,
                               .snapshot_wal_bytes = 256ll * 1024 * 1024};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'b':
            cfg->bind = optarg;
            break;
        case 'p':
            cfg->port = (int)strtol(optarg, &end, 10);
            if (*end || cfg->port < 0 || cfg->port > 65535) {
                fprintf(stderr, "atomdb: --port must be 0..65535, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'd':
            cfg->dbpath = optarg;
            break;
        case 'r':
            cfg->replset = optarg;
            break;
        case 'a':
            advertise = optarg;
            break;
        case 'm':
            cfg->max_conns = (int)strtol(optarg, &end, 10);
            if (*end || cfg->max_conns < 0) {
                fprintf(stderr, "atomdb: --max-conns must be a non-negative number\n");
                return 2;
            }
            break;
        case 'l': {
            log_level_t level;
            if (!log_parse_level(optarg, &level)) {
                fprintf(stderr, "atomdb: --log-level must be debug, info, warn or error\n");
                return 2;
            }
            log_set_level(level);
            break;
        }
        case 'j':
            if (!journal_parse_mode(optarg, &jopts.mode)) {
                fprintf(stderr, "atomdb: --journal must be fsync, write or none\n");
                return 2;
            }
            break;
        case 'i':
            jopts.snapshot_interval_s = strtoll(optarg, &end, 10);
            if (*end || jopts.snapshot_interval_s < 0) {
                fprintf(stderr, "atomdb: --snapshot-interval must be a number of seconds\n");
                return 2;
            }
            break;
        case 'w':
            jopts.snapshot_wal_bytes = strtoll(optarg, &end, 10) * 1024 * 1024;
            if (*end || jopts.snapshot_wal_bytes < 0) {
                fprintf(stderr, "atomdb: --snapshot-wal-mb must be a number of MiB\n");
                return 2;
            }
            break;
        case 'R':
            jopts.repair = true;
            break;
        case 'I': {
            txn_isolation_t level;
            if (!txn_parse_isolation(optarg, &level)) {
                fprintf(stderr, "atomdb: --txn-isolation must be snapshot or serializable\n");
                return 2;
            }
            server.txn_isolation = level;
            break;
        }
        case 'V':
            printf("atomdb %s (MongoDB wire protocol %s, maxWireVersion %d)\n", ATOMDB_VERSION,
                   SERVER_MONGODB_VERSION, SERVER_MAX_WIRE_VERSION);
            return 0;
        case 'h':
            main_usage(stdout);
            return 0;
        default:
            main_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "atomdb: unexpected argument '%s'\n", argv[optind]);
        main_usage(stderr);
        return 2;
    }
    if (advertise)
        snprintf(cfg->advertise, sizeof cfg->advertise, "%s", advertise);
    else
        snprintf(cfg->advertise, sizeof cfg->advertise, "%s:%d",
                 strcmp(cfg->bind, "0.0.0.0") == 0 ? "127.0.0.1" : cfg->bind, cfg->port);

    bson_init(&cfg->argv);
    for (int i = 0; i < argc; i++) {
        char key[16];
        BSON_APPEND_UTF8(&cfg->argv, cmd_index_key((uint32_t)i, key, sizeof key), argv[i]);
    }
    bson_init(&cfg->parsed);
    bson_t sub;
    bson_append_document_begin(&cfg->parsed, "net", -1, &sub);
    BSON_APPEND_UTF8(&sub, "bindIp", cfg->bind);
    BSON_APPEND_INT32(&sub, "port", cfg->port);
    bson_append_document_end(&cfg->parsed, &sub);
    bson_append_document_begin(&cfg->parsed, "replication", -1, &sub);
    BSON_APPEND_UTF8(&sub, "replSet", cfg->replset);
    bson_append_document_end(&cfg->parsed, &sub);
    bson_append_document_begin(&cfg->parsed, "storage", -1, &sub);
    BSON_APPEND_UTF8(&sub, "dbPath", cfg->dbpath);
    bson_t jdoc;
    bson_append_document_begin(&sub, "journal", -1, &jdoc);
    BSON_APPEND_UTF8(&jdoc, "mode", jopts.mode == JOURNAL_NONE    ? "none"
                                    : jopts.mode == JOURNAL_FSYNC ? "fsync"
                                                                  : "write");
    BSON_APPEND_BOOL(&jdoc, "enabled", jopts.mode != JOURNAL_NONE);
    bson_append_document_end(&sub, &jdoc);
    bson_append_document_end(&cfg->parsed, &sub);

    signal(SIGPIPE, SIG_IGN);
    srand((unsigned)(uv_hrtime() ^ (uint64_t)getpid()));
    server.start_ms = server_now_ms();
    server.start_hr = uv_hrtime();
    bson_oid_init(&server.process_id, NULL);
    bson_oid_init_from_string(&server.election_id, "7fffffff0000000000000001");
    server.txn_lock_timeout_ms = 5;
    server.txn_lifetime_s = 60;
    server.loop = uv_default_loop();
    server.request_stop = main_stop;
    log_info("CONTROL", "atomdb %s starting: pid %d, dbpath %s, replSet %s", ATOMDB_VERSION,
             (int)getpid(), cfg->dbpath, cfg->replset);

    if (!main_mkdirs(cfg->dbpath)) {
        log_error("STORAGE", "cannot use --dbpath %s: %s", cfg->dbpath, strerror(errno));
        return 1;
    }
    if (jopts.mode == JOURNAL_NONE)
        log_startup_warning("--journal none: data is kept in memory only and is lost when the "
                            "server stops");
    if (strcmp(cfg->bind, "127.0.0.1") != 0 && strcmp(cfg->bind, "::1") != 0 &&
        strcmp(cfg->bind, "localhost") != 0)
        log_startup_warning("atomdb has no access control: anyone who can reach %s may read "
                            "and write all data",
                            cfg->bind);

    server.catalog = catalog_new();
    server.cursors = cursors_new();
    dberr_t err = {0};
    jopts.dbpath = cfg->dbpath;
    if (!journal_open(server.loop, &jopts, server.catalog, &err)) {
        log_error("STORAGE", "%s", err.msg);
        return err.code == 98 ? 100 : 1;
    }
    lease_init(server.loop, server.catalog); /* after recovery: stored tokens count */
    session_set_end_hook(main_on_session_end);
    if (!net_listen(server.loop, cfg->bind, cfg->port, cfg->max_conns, &err)) {
        log_error("NETWORK", "%s", err.msg);
        return 1;
    }
    log_info("NETWORK", "listening on %s:%d", cfg->bind, cfg->port);

    uv_signal_init(server.loop, &main_sigint);
    uv_signal_start(&main_sigint, main_on_signal, SIGINT);
    uv_signal_init(server.loop, &main_sigterm);
    uv_signal_start(&main_sigterm, main_on_signal, SIGTERM);
    uv_timer_init(server.loop, &main_tick);
    uv_timer_start(&main_tick, main_on_tick, 1000, 1000);

    uv_run(server.loop, UV_RUN_DEFAULT);
    uv_loop_close(server.loop);
    lease_destroy();
    cursors_destroy(server.cursors);
    plancache_clear();
    catalog_destroy(server.catalog);
    bson_destroy(&cfg->argv);
    bson_destroy(&cfg->parsed);
    log_info("CONTROL", "atomdb stopped");
    return 0;
}
