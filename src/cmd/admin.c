/* admin: server-level commands — ping, buildInfo, parameters, command-line
 * options, logs, host and connection information, serverStatus, shutdown,
 * session bookkeeping and listCommands. */
#include "cmd/cmd-private.h"
#include "cmd/access.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cmd/stats.h"
#include "cmd/memory.h"
#include "cmd/op.h"
#include "doc/pipeline.h"
#include "journal/journal.h"
#include "lease/lease.h"
#include "store/catalog.h"
#include "store/cursor.h"
#include "store/mvcc.h"
#include "txn/lockmgr.h"
#include "txn/txn.h"
#include "util/fiber.h"
#include "util/log.h"

bool cmd_ping(cmd_ctx_t *ctx, dberr_t *err)
{
    return true;
}

bool cmd_build_info(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_t arr, doc;
    BSON_APPEND_UTF8(ctx->reply, "version", SERVER_MONGODB_VERSION);
    BSON_APPEND_UTF8(ctx->reply, "gitVersion", "atomdb-" ATOMDB_VERSION);
    bson_append_array_begin(ctx->reply, "versionArray", -1, &arr);
    BSON_APPEND_INT32(&arr, "0", 7);
    BSON_APPEND_INT32(&arr, "1", 0);
    BSON_APPEND_INT32(&arr, "2", 0);
    BSON_APPEND_INT32(&arr, "3", 0);
    bson_append_array_end(ctx->reply, &arr);
    BSON_APPEND_UTF8(ctx->reply, "atomdbVersion", ATOMDB_VERSION);
    BSON_APPEND_UTF8(ctx->reply, "javascriptEngine", "none");
    BSON_APPEND_UTF8(ctx->reply, "sysInfo", "deprecated");
    BSON_APPEND_UTF8(ctx->reply, "allocator", "system");
    bson_append_array_begin(ctx->reply, "storageEngines", -1, &arr);
    BSON_APPEND_UTF8(&arr, "0", "atomdb");
    bson_append_array_end(ctx->reply, &arr);
    bson_append_array_begin(ctx->reply, "modules", -1, &arr);
    bson_append_array_end(ctx->reply, &arr);
    bson_append_document_begin(ctx->reply, "openssl", -1, &doc);
    BSON_APPEND_UTF8(&doc, "running", "disabled");
    bson_append_document_end(ctx->reply, &doc);
    BSON_APPEND_INT32(ctx->reply, "bits", 64);
    BSON_APPEND_BOOL(ctx->reply, "debug", false);
    BSON_APPEND_INT32(ctx->reply, "maxBsonObjectSize", WIRE_MAX_BSON_OBJECT_SIZE);
    return true;
}

bool cmd_get_cmd_line_opts(cmd_ctx_t *ctx, dberr_t *err)
{
    BSON_APPEND_ARRAY(ctx->reply, "argv", &server.config.argv);
    BSON_APPEND_DOCUMENT(ctx->reply, "parsed", &server.config.parsed);
    return true;
}

bool cmd_get_log(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_UTF8(&ctx->arg))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "Argument to getLog must be of type String; "
                                                   "found %s",
                         shellfmt_type_name(bson_iter_type(&ctx->arg)));
    const char *which = bson_iter_utf8(&ctx->arg, NULL);
    bson_t arr;
    if (strcmp(which, "*") == 0) {
        bson_append_array_begin(ctx->reply, "names", -1, &arr);
        BSON_APPEND_UTF8(&arr, "0", "global");
        BSON_APPEND_UTF8(&arr, "1", "startupWarnings");
        bson_append_array_end(ctx->reply, &arr);
        return true;
    }
    bool startup = strcmp(which, "startupWarnings") == 0;
    if (!startup && strcmp(which, "global") != 0)
        return dberr_set(err, DBERR_INVALID_OPTIONS, "No log named '%s'", which);
    bson_t lines = BSON_INITIALIZER;
    int64_t total = 0;
    log_append_recent(&lines, startup, &total);
    BSON_APPEND_INT32(ctx->reply, "totalLinesWritten", (int32_t)total);
    BSON_APPEND_ARRAY(ctx->reply, "log", &lines);
    bson_destroy(&lines);
    return true;
}

bool cmd_host_info(cmd_ctx_t *ctx, dberr_t *err)
{
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    struct utsname u;
    uname(&u);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    bson_t doc;
    bson_append_document_begin(ctx->reply, "system", -1, &doc);
    BSON_APPEND_DATE_TIME(&doc, "currentTime", server_now_ms());
    BSON_APPEND_UTF8(&doc, "hostname", host);
    BSON_APPEND_INT32(&doc, "cpuAddrSize", 64);
    BSON_APPEND_INT64(&doc, "memSizeMB", (int64_t)pages * page / (1024 * 1024));
    BSON_APPEND_INT64(&doc, "memLimitMB", (int64_t)pages * page / (1024 * 1024));
    BSON_APPEND_INT32(&doc, "numCores", (int32_t)sysconf(_SC_NPROCESSORS_ONLN));
    BSON_APPEND_UTF8(&doc, "cpuArch", u.machine);
    BSON_APPEND_BOOL(&doc, "numaEnabled", false);
    bson_append_document_end(ctx->reply, &doc);
    bson_append_document_begin(ctx->reply, "os", -1, &doc);
    BSON_APPEND_UTF8(&doc, "type", u.sysname);
    BSON_APPEND_UTF8(&doc, "name", u.sysname);
    BSON_APPEND_UTF8(&doc, "version", u.release);
    bson_append_document_end(ctx->reply, &doc);
    bson_append_document_begin(ctx->reply, "extra", -1, &doc);
    BSON_APPEND_UTF8(&doc, "versionString", u.version);
    BSON_APPEND_INT64(&doc, "pageSize", page);
    bson_append_document_end(ctx->reply, &doc);
    return true;
}

bool cmd_whatsmyuri(cmd_ctx_t *ctx, dberr_t *err)
{
    BSON_APPEND_UTF8(ctx->reply, "you", ctx->client->remote);
    return true;
}

bool cmd_connection_status(cmd_ctx_t *ctx, dberr_t *err)
{
    bool show_privs = false;
    if (!cmd_opt_bool(ctx, "showPrivileges", &show_privs, err))
        return false;
    cmd_auth_t *a = ctx->client->auth;
    bool authed = a && a->authenticated;
    bson_t doc, arr, one, roles = BSON_INITIALIZER;
    priv_set_t privs;
    priv_set_init(&privs);
    uint32_t n = 0;
    if (authed) {
        access_allowed(ctx, PRIV_TARGET_CLUSTER, NULL, NULL, ACT_FIND); /* refresh */
        access_resolve_roles(&a->roles, &privs, &roles, &n);
    }
    bson_append_document_begin(ctx->reply, "authInfo", -1, &doc);
    bson_append_array_begin(&doc, "authenticatedUsers", -1, &arr);
    if (authed) {
        bson_append_document_begin(&arr, "0", -1, &one);
        BSON_APPEND_UTF8(&one, "user", a->user);
        BSON_APPEND_UTF8(&one, "db", a->db);
        bson_append_document_end(&arr, &one);
    }
    bson_append_array_end(&doc, &arr);
    BSON_APPEND_ARRAY(&doc, "authenticatedUserRoles", &roles);
    if (show_privs) {
        bson_append_array_begin(&doc, "authenticatedUserPrivileges", -1, &arr);
        priv_set_append(&privs, &arr);
        bson_append_array_end(&doc, &arr);
    }
    bson_append_document_end(ctx->reply, &doc);
    bson_destroy(&roles);
    priv_set_destroy(&privs);
    return true;
}

void cmd_process_memory(int64_t *resident, int64_t *virt)
{
    *resident = *virt = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return;
    long vm = 0, rss = 0;
    if (fscanf(f, "%ld %ld", &vm, &rss) == 2) {
        long page = sysconf(_SC_PAGE_SIZE);
        *resident = (int64_t)rss * page;
        *virt = (int64_t)vm * page;
    }
    fclose(f);
}

/* Page faults of this process (serverStatus extra_info.page_faults). */
static int64_t admin_page_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_majflt : 0;
}

static void admin_lease_waiting(const lease_info_t *info, void *arg)
{
    *(int64_t *)arg += (int64_t)info->waiting;
}

/* The sections mongostat reads beyond connections, opcounters and mem:
 * asserts, network, globalLock (its queue is the requests parked on a
 * document lock or a lease), extra_info and opcountersRepl, with mongod's
 * names and types (docs/operations.md). */
static void admin_status_mongostat(bson_t *reply, uint64_t up_ms)
{
    bson_t doc, sub;
    bson_append_document_begin(reply, "asserts", -1, &doc);
    BSON_APPEND_INT32(&doc, "regular", 0);
    BSON_APPEND_INT32(&doc, "warning", 0);
    BSON_APPEND_INT32(&doc, "msg", 0);
    BSON_APPEND_INT32(&doc, "user", (int32_t)cmd_stats_user_asserts());
    BSON_APPEND_INT32(&doc, "tripwire", 0);
    BSON_APPEND_INT32(&doc, "rollovers", 0);
    bson_append_document_end(reply, &doc);
    bson_append_document_begin(reply, "network", -1, &doc);
    BSON_APPEND_INT64(&doc, "bytesIn", server.net_bytes_in);
    BSON_APPEND_INT64(&doc, "bytesOut", server.net_bytes_out);
    BSON_APPEND_INT64(&doc, "physicalBytesIn", server.net_bytes_in);
    BSON_APPEND_INT64(&doc, "physicalBytesOut", server.net_bytes_out);
    BSON_APPEND_INT64(&doc, "numSlowDNSOperations", 0);
    BSON_APPEND_INT64(&doc, "numSlowSSLOperations", 0);
    BSON_APPEND_INT64(&doc, "numRequests", server.net_requests);
    bson_append_document_end(reply, &doc);
    int64_t lease_waiting = 0;
    lease_foreach(admin_lease_waiting, &lease_waiting);
    int64_t writers = lockmgr_get_stats()->waiting + lease_waiting;
    bson_append_document_begin(reply, "globalLock", -1, &doc);
    BSON_APPEND_INT64(&doc, "totalTime", (int64_t)up_ms * 1000);
    bson_append_document_begin(&doc, "currentQueue", -1, &sub);
    BSON_APPEND_INT32(&sub, "total", (int32_t)writers);
    BSON_APPEND_INT32(&sub, "readers", 0);
    BSON_APPEND_INT32(&sub, "writers", (int32_t)writers);
    bson_append_document_end(&doc, &sub);
    /* one command runs at a time, on the loop thread: this one */
    bson_append_document_begin(&doc, "activeClients", -1, &sub);
    BSON_APPEND_INT32(&sub, "total", 1);
    BSON_APPEND_INT32(&sub, "readers", 1);
    BSON_APPEND_INT32(&sub, "writers", 0);
    bson_append_document_end(&doc, &sub);
    bson_append_document_end(reply, &doc);
    bson_append_document_begin(reply, "extra_info", -1, &doc);
    BSON_APPEND_UTF8(&doc, "note", "fields vary by platform");
    BSON_APPEND_INT64(&doc, "page_faults", admin_page_faults());
    bson_append_document_end(reply, &doc);
    bson_append_document_begin(reply, "opcountersRepl", -1, &doc);
    static const char *names[] = {"insert", "query", "update", "delete", "getmore", "command"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        BSON_APPEND_INT64(&doc, names[i], 0);
    bson_append_document_end(reply, &doc);
}

bool cmd_server_status(cmd_ctx_t *ctx, dberr_t *err)
{
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    int64_t now = server_now_ms();
    uint64_t up_ms = (uv_hrtime() - server.start_hr) / 1000000;
    bson_t doc, arr;
    BSON_APPEND_UTF8(ctx->reply, "host", host);
    BSON_APPEND_UTF8(ctx->reply, "version", SERVER_MONGODB_VERSION);
    BSON_APPEND_UTF8(ctx->reply, "atomdbVersion", ATOMDB_VERSION);
    BSON_APPEND_UTF8(ctx->reply, "process", "atomdb");
    BSON_APPEND_INT64(ctx->reply, "pid", (int64_t)getpid());
    BSON_APPEND_DOUBLE(ctx->reply, "uptime", (double)(up_ms / 1000));
    BSON_APPEND_INT64(ctx->reply, "uptimeMillis", (int64_t)up_ms);
    BSON_APPEND_INT64(ctx->reply, "uptimeEstimate", (int64_t)(up_ms / 1000));
    BSON_APPEND_DATE_TIME(ctx->reply, "localTime", now);
    admin_status_mongostat(ctx->reply, up_ms);
    bson_append_document_begin(ctx->reply, "connections", -1, &doc);
    BSON_APPEND_INT32(&doc, "current", (int32_t)server.connections_current);
    int64_t avail = (server.config.max_conns > 0 ? server.config.max_conns : 1000000) -
                    server.connections_current;
    BSON_APPEND_INT32(&doc, "available", (int32_t)(avail > 0 ? avail : 0));
    BSON_APPEND_INT32(&doc, "totalCreated", (int32_t)server.connections_total);
    BSON_APPEND_INT32(&doc, "active", 1);
    bson_append_document_end(ctx->reply, &doc);
    bson_append_document_begin(ctx->reply, "opcounters", -1, &doc);
    BSON_APPEND_INT64(&doc, "insert", server.ops.insert);
    BSON_APPEND_INT64(&doc, "query", server.ops.query);
    BSON_APPEND_INT64(&doc, "update", server.ops.update);
    BSON_APPEND_INT64(&doc, "delete", server.ops.delete_);
    BSON_APPEND_INT64(&doc, "getmore", server.ops.getmore);
    BSON_APPEND_INT64(&doc, "command", server.ops.command);
    bson_append_document_end(ctx->reply, &doc);
    int64_t res, virt;
    cmd_process_memory(&res, &virt);
    bson_append_document_begin(ctx->reply, "mem", -1, &doc);
    BSON_APPEND_INT32(&doc, "bits", 64);
    BSON_APPEND_INT64(&doc, "resident", res / (1024 * 1024)); /* MiB, as mongod */
    BSON_APPEND_INT64(&doc, "virtual", virt / (1024 * 1024));
    BSON_APPEND_BOOL(&doc, "supported", true);
    bson_append_document_end(ctx->reply, &doc);
    bson_append_document_begin(ctx->reply, "repl", -1, &doc);
    BSON_APPEND_UTF8(&doc, "setName", server.config.replset);
    BSON_APPEND_BOOL(&doc, "isWritablePrimary", true);
    /* the legacy name too: mongostat's repl column reads `ismaster` */
    BSON_APPEND_BOOL(&doc, "ismaster", true);
    BSON_APPEND_BOOL(&doc, "secondary", false);
    bson_append_array_begin(&doc, "hosts", -1, &arr);
    BSON_APPEND_UTF8(&arr, "0", server.config.advertise);
    bson_append_array_end(&doc, &arr);
    BSON_APPEND_UTF8(&doc, "primary", server.config.advertise);
    BSON_APPEND_UTF8(&doc, "me", server.config.advertise);
    bson_append_document_end(ctx->reply, &doc);
    bson_append_document_begin(ctx->reply, "storageEngine", -1, &doc);
    BSON_APPEND_UTF8(&doc, "name", "atomdb");
    BSON_APPEND_BOOL(&doc, "supportsCommittedReads", true);
    BSON_APPEND_BOOL(&doc, "persistent", false);
    bson_append_document_end(ctx->reply, &doc);
    const txn_stats_t *ts = txn_get_stats();
    bson_append_document_begin(ctx->reply, "transactions", -1, &doc);
    BSON_APPEND_INT64(&doc, "currentOpen", (int64_t)(ts->started - ts->committed - ts->aborted));
    BSON_APPEND_INT64(&doc, "totalStarted", (int64_t)ts->started);
    BSON_APPEND_INT64(&doc, "totalCommitted", (int64_t)ts->committed);
    BSON_APPEND_INT64(&doc, "totalAborted", (int64_t)ts->aborted);
    /* atomdb's own: refused writes and commits, and the versions kept for
     * open snapshots (docs/concurrency.md) */
    BSON_APPEND_INT64(&doc, "writeConflicts", (int64_t)ts->write_conflicts);
    BSON_APPEND_INT64(&doc, "serializationFailures", (int64_t)ts->serialization_failures);
    BSON_APPEND_INT64(&doc, "snapshotWindowChanges", (int64_t)mvcc_window_len());
    BSON_APPEND_UTF8(&doc, "defaultIsolation",
                     txn_isolation_name((txn_isolation_t)server.txn_isolation));
    bson_append_document_end(ctx->reply, &doc);
    /* atomdb's own: memory use against --max-memory, and long operations
     * run in slices (docs/design.md) */
    bson_append_document_begin(ctx->reply, "atomdbMemory", -1, &doc);
    memory_append_status(&doc);
    bson_append_document_end(ctx->reply, &doc);
    bson_append_document_begin(ctx->reply, "atomdbOperations", -1, &doc);
    op_append_status(&doc);
    bson_append_document_end(ctx->reply, &doc);
    bson_t metrics, cur, open;
    bson_append_document_begin(ctx->reply, "metrics", -1, &metrics);
    bson_append_document_begin(&metrics, "cursor", -1, &cur);
    bson_append_document_begin(&cur, "open", -1, &open);
    BSON_APPEND_INT64(&open, "total", (int64_t)cursors_count(server.cursors));
    bson_append_document_end(&cur, &open);
    bson_append_document_end(&metrics, &cur);
    bson_append_document_end(ctx->reply, &metrics);
    return true;
}

bool cmd_shutdown(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!server.auth && !ctx->client->is_local)
        return dberr_set(err, DBERR_UNAUTHORIZED,
                         "shutdown must run from localhost when running db without auth");
    log_info("CONTROL", "shutdown command received from connection %lld",
             (long long)ctx->client->id);
    server.stopping = true;
    if (server.request_stop)
        server.request_stop();
    ctx->close = true;
    return true;
}

bool cmd_list_commands(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_append_commands(ctx->reply);
    return true;
}

bool cmd_atomdb_fault(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!BSON_ITER_HOLDS_UTF8(&ctx->arg))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "atomdbFault takes the fault point's name");
    int64_t times = 1;
    if (!cmd_opt_int64(ctx, "times", &times, err))
        return false;
    const char *point = bson_iter_utf8(&ctx->arg, NULL);
    if (txn_inject_fault(point, times > 0))
        return true;
    return journal_inject_fault(point, (int)times, err);
}

/* ---- top and profile ---- */

bool cmd_top(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_t totals;
    bson_append_document_begin(ctx->reply, "totals", -1, &totals);
    stats_top_append(&totals);
    bson_append_document_end(ctx->reply, &totals);
    return true;
}

/* profile: mongod's profiling level and the slow-operation log's settings.
 * Level 0 (log slow operations, profile nothing) is the one atomdb has:
 * levels 1 and 2 write every (slow) operation to system.profile, which
 * atomdb does not write yet. */
bool cmd_profile(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"slowms", "sampleRate", "filter"};
    if (!cmd_only_fields(ctx, known, sizeof known / sizeof known[0], err))
        return false;
    if (!BSON_ITER_HOLDS_NUMBER(&ctx->arg))
        return cmd_wrong_type(err, &ctx->arg, "types '[long, int, decimal, double]'",
                              "profile.profile");
    int64_t level = bson_iter_as_int64(&ctx->arg);
    if (level < -1 || level > 2)
        return dberr_set(err, DBERR_BAD_VALUE, "Bad profiling level value: %lld",
                         (long long)level);
    if (level == 1 || level == 2)
        return dberr_set(err, DBERR_ILLEGAL_OPERATION,
                         "profiling level %lld is not supported by atomdb yet: atomdb does "
                         "not write system.profile; level 0 with slowms logs slow "
                         "operations",
                         (long long)level);
    bson_iter_t it;
    if (cmd_find(ctx, "filter", &it))
        return dberr_set(err, DBERR_ILLEGAL_OPERATION,
                         "profile's filter is not supported by atomdb yet");
    int64_t slowms = stats_slow.slowms;
    if (!cmd_opt_int64(ctx, "slowms", &slowms, err))
        return false;
    double rate = stats_slow.sample_rate;
    if (cmd_find(ctx, "sampleRate", &it)) {
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            return cmd_wrong_type(err, &it, "type 'double'", "profile.sampleRate");
        rate = bson_iter_as_double(&it);
        if (!(rate >= 0.0 && rate <= 1.0))
            return dberr_set(err, DBERR_BAD_VALUE, "'sampleRate' must be between 0.0 and 1.0 "
                                                   "inclusive");
    }
    if (slowms < INT32_MIN || slowms > INT32_MAX)
        return dberr_set(err, DBERR_BAD_VALUE, "slowms %lld is out of range",
                         (long long)slowms);
    BSON_APPEND_INT32(ctx->reply, "was", 0);
    BSON_APPEND_INT32(ctx->reply, "slowms", stats_slow.slowms);
    BSON_APPEND_DOUBLE(ctx->reply, "sampleRate", stats_slow.sample_rate);
    /* as mongod: slowms and sampleRate apply with level -1 too */
    bool changes = level != -1 || cmd_find(ctx, "slowms", &it) || cmd_find(ctx, "sampleRate", &it);
    if (!changes)
        return true;
    bson_t from = BSON_INITIALIZER, to = BSON_INITIALIZER;
    BSON_APPEND_INT32(&from, "level", 0);
    BSON_APPEND_INT32(&from, "slowms", stats_slow.slowms);
    BSON_APPEND_DOUBLE(&from, "sampleRate", stats_slow.sample_rate);
    stats_slow.slowms = (int32_t)slowms;
    stats_slow.sample_rate = rate;
    BSON_APPEND_INT32(&to, "level", 0);
    BSON_APPEND_INT32(&to, "slowms", stats_slow.slowms);
    BSON_APPEND_DOUBLE(&to, "sampleRate", stats_slow.sample_rate);
    log_event(LOG_INFO, "COMMAND", 48742, "Profiler settings changed", LOG_DOC("from", &from),
              LOG_DOC("to", &to));
    bson_destroy(&from);
    bson_destroy(&to);
    return true;
}
