/* main: atomdb's start-up and shutdown. Parses mongod's command line and
 * mongod.conf (conf/options.c), prepares --dbpath and the log, forks with
 * --fork, starts the libuv loop with the listeners and the housekeeping
 * timer, and stops cleanly on SIGINT/SIGTERM or the shutdown command. */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#include <uv.h>

#include "cmd/cmd-private.h"
#include "cmd/plancache.h"
#include "cmd/server.h"
#include "cmd/stats.h"
#include "conf/options.h"
#include "journal/journal.h"
#include "http/http.h"
#include "lease/lease.h"
#include "net/net.h"
#include "net/tls.h"
#include "store/catalog.h"
#include "store/cursor.h"
#include "store/ttl.h"
#include "txn/session.h"
#include "txn/txn.h"
#include "util/log.h"

/* mongod's exit codes (src/mongo/util/exit_code.h) */
#define MAIN_EXIT_BADOPTIONS 2
#define MAIN_EXIT_NET_ERROR 48
#define MAIN_EXIT_UNCAUGHT 100

#define MAIN_MAX_ADDRS 8

static uv_signal_t main_sigint, main_sigterm, main_sighup;
static tls_config_t main_tls; /* kept for the reload on SIGHUP */
static uv_timer_t main_tick;
static uv_idle_t main_ttl_idle;

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
    sd_notify(0, "STOPPING=1");
    log_event(LOG_INFO, "NETWORK", 20562, "Shutdown: going to close listening sockets");
    net_stop();
    http_stop();
    uv_timer_stop(&main_tick);
    uv_idle_stop(&main_ttl_idle);
    ttl_pass_stop();
    journal_seal();
    lease_stop();
    journal_close();
    uv_walk(server.loop, main_on_closed_handle, NULL);
}

static void main_on_signal(uv_signal_t *s, int signum)
{
    log_event_n(LOG_INFO, "CONTROL", &(log_line_opts_t){.id = 23377, .ctx = "SignalHandler"},
                "Received signal",
                (const log_attr_t[]){LOG_INT("signal", signum), LOG_STR("error", strsignal(signum))},
                2);
    main_stop();
}

/* SIGHUP: load the TLS certificate, key and CA file again; new connections
 * use them, open ones keep theirs. A file that does not load keeps the old
 * ones in force. */
static void main_on_sighup(uv_signal_t *s, int signum)
{
    dberr_t err = {0};
    if (main_tls.mode == TLS_DISABLED) {
        log_info("CONTROL", "SIGHUP received: TLS is off, nothing to reload");
        return;
    }
    if (tls_configure(&main_tls, &err))
        log_event(LOG_INFO, "NETWORK", 4913400, "Rotated TLS certificates on SIGHUP",
                  LOG_STR("certificateKeyFile", main_tls.cert_key_file));
    else
        log_event(LOG_WARN, "NETWORK", 4913401,
                  "Certificate rotation failed; the old certificates stay in use",
                  LOG_STR("error", err.msg));
}

/* A TTL pass runs a slice per loop turn (store/ttl.h); each slice's
 * deletes are a commit of their own. */
static void main_on_ttl_idle(uv_idle_t *h)
{
    bool more = ttl_pass_step();
    journal_seal();
    if (!more)
        uv_idle_stop(h);
}

/* Once a second: expire idle cursors and TTL-indexed documents. */
static void main_on_tick(uv_timer_t *t)
{
    int64_t now = server_now_ms();
    size_t closed = cursors_reap(server.cursors, now, param_cursor_timeout());
    if (closed)
        log_info("QUERY", "closed %zu idle cursors", closed);
    session_reap(now, server.txn_lifetime_s);
    /* one pass at a time: the next is due once the last one has ended */
    if (!ttl_pass_running() && param_ttl_due(now) && ttl_pass_start(server.catalog, now) &&
        ttl_pass_running())
        uv_idle_start(&main_ttl_idle, main_on_ttl_idle);
    journal_seal(); /* the first slice's TTL deletes are a commit of their own */
}

/* A session ended (endSessions, killSessions, expiry): the lease locks
 * taken under it are released (docs/locks.md). */
static void main_on_session_end(const uint8_t id[16])
{
    lease_session_ended(id, 16);
}

/* --version: mongod's first line (which tools such as mongodb-memory-server
 * parse), then the build information. */
static void main_print_version(void)
{
    struct utsname u;
    uname(&u);
    printf("db version v%s\n"
           "Build Info: {\n"
           "    \"version\": \"%s\",\n"
           "    \"gitVersion\": \"atomdb-%s\",\n"
           "    \"atomdbVersion\": \"%s\",\n"
           "    \"maxWireVersion\": %d,\n"
           "    \"allocator\": \"system\",\n"
           "    \"environment\": {\n"
           "        \"distarch\": \"%s\",\n"
           "        \"target_arch\": \"%s\"\n"
           "    }\n"
           "}\n",
           SERVER_MONGODB_VERSION, SERVER_MONGODB_VERSION, ATOMDB_VERSION, ATOMDB_VERSION,
           SERVER_MAX_WIRE_VERSION, u.machine, u.machine);
}

/* --shutdown: stops the server holding --dbpath's lock and waits until it
 * has let go of it. */
static int main_shutdown(const options_t *o)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/atomdb.lock", o->dbpath);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) == 0) {
        fprintf(stderr, "There doesn't seem to be a server running with dbpath: %s\n", o->dbpath);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    char buf[32] = "";
    ssize_t n = read(fd, buf, sizeof buf - 1);
    long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
    if (pid <= 0) {
        fprintf(stderr, "%s holds no process id\n", path);
        close(fd);
        return 1;
    }
    printf("killing process with pid: %ld\n", pid);
    fflush(stdout);
    if (kill((pid_t)pid, SIGTERM) != 0) {
        fprintf(stderr, "failed to kill process: %s\n", strerror(errno));
        close(fd);
        return 1;
    }
    for (int i = 0; i < 6000; i++) { /* up to 60 s */
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
            close(fd);
            return 0;
        }
        usleep(10000);
    }
    fprintf(stderr, "the server (pid %ld) did not stop within 60 s\n", pid);
    close(fd);
    return 1;
}

/* Opens --logpath; without --logappend an existing file is first renamed
 * to FILE.<timestamp>, as mongod does. */
static FILE *main_open_log(const options_t *o)
{
    if (!o->log_append && access(o->log_path, F_OK) == 0) {
        char stamp[32], old[4200];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H-%M-%S", &tm);
        snprintf(old, sizeof old, "%s.%s", o->log_path, stamp);
        if (rename(o->log_path, old) != 0) {
            fprintf(stderr, "atomdb: cannot rename the old log %s: %s\n", o->log_path,
                    strerror(errno));
            return NULL;
        }
    }
    FILE *f = fopen(o->log_path, "a");
    if (!f)
        fprintf(stderr, "atomdb: cannot open --logpath %s: %s\n", o->log_path, strerror(errno));
    return f;
}

/* --fork: the parent waits until the child listens (or fails) and exits;
 * returns the write end of the ready pipe in the child. */
static int main_fork(void)
{
    int fds[2];
    if (pipe(fds) != 0) {
        fprintf(stderr, "atomdb: --fork: pipe: %s\n", strerror(errno));
        exit(1);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "atomdb: --fork: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (pid > 0) {
        close(fds[1]);
        printf("about to fork child process, waiting until server is ready for connections.\n"
               "forked process: %d\n",
               (int)pid);
        char c;
        ssize_t n;
        do
            n = read(fds[0], &c, 1);
        while (n < 0 && errno == EINTR);
        if (n == 1) {
            printf("child process started successfully, parent exiting\n");
            exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        printf("ERROR: child process failed, exited with %d\n"
               "To see additional information in this output, start without the \"--fork\" "
               "option.\n",
               code);
        exit(code ? code : 1);
    }
    close(fds[0]);
    setsid();
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2)
            close(null);
    }
    return fds[1];
}

/* Appends `addr` unless it is already listed ("localhost,127.0.0.1"). */
static void main_add_address(char addrs[][64], int *n, const char *addr, size_t len)
{
    char a[64];
    snprintf(a, sizeof a, "%.*s", (int)(len < 63 ? len : 63), addr);
    for (int i = 0; i < *n; i++)
        if (strcmp(addrs[i], a) == 0)
            return;
    snprintf(addrs[(*n)++], 64, "%s", a);
}

/* Splits --bind_ip into addresses ("localhost" is 127.0.0.1, and ::1 with
 * --ipv6); --bind_ip_all is 0.0.0.0 (and ::). Returns the count, 0 when
 * there are too many. */
static int main_addresses(const options_t *o, char addrs[][64])
{
    int n = 0;
    if (o->bind_ip_all) {
        snprintf(addrs[n++], 64, "0.0.0.0");
        if (o->ipv6)
            snprintf(addrs[n++], 64, "::");
        return n;
    }
    const char *p = o->bind_ip;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && p[len - 1] == ' ')
            len--;
        if (len) {
            if (n + 2 > MAIN_MAX_ADDRS)
                return 0;
            if (len == 9 && strncmp(p, "localhost", 9) == 0) {
                main_add_address(addrs, &n, "127.0.0.1", 9);
                if (o->ipv6)
                    main_add_address(addrs, &n, "::1", 3);
            } else {
                main_add_address(addrs, &n, p, len);
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
    return n;
}

static bool main_is_loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
}

/* A start-up failure, logged as mongod does (tools match this line), and
 * mongod's exit code for it. */
static int main_fail(int code, const char *codename, const char *msg)
{
    char text[1200];
    snprintf(text, sizeof text, "%s: %s", codename, msg);
    log_event(LOG_ERROR, "CONTROL", 20557, "DBException in initAndListen, terminating",
              LOG_STR("error", text));
    log_event(LOG_INFO, "CONTROL", 23138, "Shutting down", LOG_INT("exitCode", code));
    return code;
}

static void main_log_startup(const options_t *o)
{
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    struct utsname u;
    uname(&u);
    log_event(LOG_INFO, "CONTROL", 4615611, "MongoDB starting", LOG_INT("pid", getpid()),
              LOG_INT("port", o->port), LOG_STR("dbPath", o->dbpath),
              LOG_STR("architecture", "64-bit"), LOG_STR("host", host));
    bson_t bi = BSON_INITIALIZER, env;
    BSON_APPEND_UTF8(&bi, "version", SERVER_MONGODB_VERSION);
    BSON_APPEND_UTF8(&bi, "gitVersion", "atomdb-" ATOMDB_VERSION);
    BSON_APPEND_UTF8(&bi, "atomdbVersion", ATOMDB_VERSION);
    BSON_APPEND_UTF8(&bi, "allocator", "system");
    bson_append_document_begin(&bi, "environment", -1, &env);
    BSON_APPEND_UTF8(&env, "distarch", u.machine);
    BSON_APPEND_UTF8(&env, "target_arch", u.machine);
    bson_append_document_end(&bi, &env);
    log_event(LOG_INFO, "CONTROL", 23403, "Build Info", LOG_DOC("buildInfo", &bi));
    bson_destroy(&bi);
    log_event(LOG_INFO, "CONTROL", 21951, "Options set by command line",
              LOG_DOC("options", &o->parsed));
}

/* Applies --setParameter / setParameter: through the setParameter
 * command's code. */
static bool main_set_parameters(const options_t *o)
{
    bson_iter_t it;
    bson_iter_init(&it, &o->set_parameters);
    while (bson_iter_next(&it)) {
        dberr_t err = {0};
        if (!param_set(bson_iter_key(&it), &it, &err)) {
            fprintf(stderr, "atomdb: --setParameter %s: %s\n", bson_iter_key(&it), err.msg);
            return false;
        }
    }
    return true;
}

int main(int argc, char **argv)
{
    static options_t o;
    options_init(&o);
    dberr_t err = {0};
    if (!options_parse(&o, argc, argv, &err)) {
        fprintf(stderr, "atomdb: %s\ntry 'atomdb --help' for more information\n", err.msg);
        return MAIN_EXIT_BADOPTIONS;
    }
    switch (o.action) {
    case OPTIONS_VERSION:
        main_print_version();
        return 0;
    case OPTIONS_HELP:
        options_usage(stdout);
        return 0;
    case OPTIONS_SHUTDOWN:
        return main_shutdown(&o);
    case OPTIONS_RUN:
        break;
    }
    char addrs[MAIN_MAX_ADDRS][64];
    int naddrs = main_addresses(&o, addrs);
    if (naddrs == 0) {
        fprintf(stderr, "atomdb: --bind_ip takes 1 to %d addresses\n", MAIN_MAX_ADDRS);
        return MAIN_EXIT_BADOPTIONS;
    }
    /* protected mode (as Redis'): no listening beyond loopback without
     * access control unless asked for by name */
    for (int i = 0; i < naddrs && o.protected_mode && !o.auth; i++) {
        if (!main_is_loopback(addrs[i])) {
            fprintf(stderr,
                    "atomdb: refusing to listen on %s without access control (protected mode): "
                    "start with --auth (and create a user), or with --protected-mode off to "
                    "accept any client that can reach the port (docs/security.md)\n",
                    addrs[i]);
            return MAIN_EXIT_BADOPTIONS;
        }
    }
    /* ... the metrics port too: it shows who holds what and the slowest
     * operations' commands */
    if (o.metrics_port && o.protected_mode && !o.auth && !main_is_loopback(o.metrics_bind)) {
        fprintf(stderr,
                "atomdb: refusing to serve the metrics port on %s without access control "
                "(protected mode): start with --auth (it then asks for a user's credentials), "
                "or with --protected-mode off to show it to anyone that can reach the port "
                "(docs/security.md)\n",
                o.metrics_bind);
        return MAIN_EXIT_BADOPTIONS;
    }
    server.auth = o.auth;
    server.txn_lock_timeout_ms = 5;
    server.txn_lifetime_s = 60;
    server.frame_timeout_s = 60; /* docs/reliability.md, connection abuse */
    if (!main_set_parameters(&o))
        return MAIN_EXIT_BADOPTIONS;

    server_config_t *cfg = &server.config;
    cfg->bind = o.bind_ip_all ? (o.ipv6 ? "0.0.0.0,::" : "0.0.0.0") : o.bind_ip;
    cfg->port = o.port;
    cfg->dbpath = o.dbpath;
    cfg->replset = o.replset;
    cfg->max_conns = o.max_conns;
    stats_slow.slowms = o.slowms;
    stats_slow.sample_rate = o.slow_sample_rate;
    cfg->max_memory = o.max_memory;
    if (o.advertise) {
        snprintf(cfg->advertise, sizeof cfg->advertise, "%s", o.advertise);
    } else {
        const char *first = addrs[0];
        if (strcmp(first, "0.0.0.0") == 0 || strcmp(first, "::") == 0)
            first = "127.0.0.1";
        snprintf(cfg->advertise, sizeof cfg->advertise, strchr(first, ':') ? "[%s]:%d" : "%s:%d",
                 first, cfg->port);
    }
    bson_copy_to(&o.argv, &cfg->argv);
    bson_copy_to(&o.parsed, &cfg->parsed);

    log_set_level(o.log_level);
    log_set_format(o.log_format);
    log_set_quiet(o.quiet);
    FILE *logfile = NULL;
    if (o.log_path) {
        logfile = main_open_log(&o);
        if (!logfile)
            return 1;
        log_set_output(logfile);
    }
    int ready_fd = o.fork ? main_fork() : -1;
    if (o.pidfile) {
        FILE *pf = fopen(o.pidfile, "w");
        if (!pf || fprintf(pf, "%d\n", (int)getpid()) < 0 || fclose(pf) != 0) {
            log_error("CONTROL", "cannot write --pidfilepath %s: %s", o.pidfile, strerror(errno));
            return 1;
        }
    }

    signal(SIGPIPE, SIG_IGN);
    srand((unsigned)(uv_hrtime() ^ (uint64_t)getpid()));
    server.start_ms = server_now_ms();
    server.start_hr = uv_hrtime();
    bson_oid_init(&server.process_id, NULL);
    bson_oid_init_from_string(&server.election_id, "7fffffff0000000000000001");
    server.loop = uv_default_loop();
    server.request_stop = main_stop;
    log_set_ctx("initandlisten");
    main_log_startup(&o);

    if (!main_mkdirs(cfg->dbpath)) {
        char msg[4300];
        snprintf(msg, sizeof msg, "Data directory %s cannot be used: %s", cfg->dbpath,
                 strerror(errno));
        return main_fail(MAIN_EXIT_UNCAUGHT, "NonExistentPath", msg);
    }
    if (o.journal.mode == JOURNAL_NONE)
        log_startup_warning("--journal none: data is kept in memory only and is lost when the "
                            "server stops");
    for (int i = 0; i < naddrs && !o.auth; i++) {
        if (!main_is_loopback(addrs[i])) {
            log_startup_warning("atomdb has no access control: anyone who can reach %s may "
                                "read and write all data",
                                addrs[i]);
            break;
        }
    }

    server.catalog = catalog_new();
    server.cursors = cursors_new();
    journal_options_t jopts = o.journal;
    jopts.dbpath = cfg->dbpath;
    if (!journal_open(server.loop, &jopts, server.catalog, &err))
        return main_fail(MAIN_EXIT_UNCAUGHT, err.code == 98 ? "DBPathInUse" : "InternalError",
                         err.msg);
    catalog_drop_temporary(server.catalog); /* an $out a crash interrupted */
    /* recovery allocates and frees as it replays: give the freed heap back, so
     * a restarted server's RSS is what it holds, not replay's high-water mark */
    malloc_trim(0);
    lease_init(server.loop, server.catalog); /* after recovery: stored tokens count */
    session_set_end_hook(main_on_session_end);
    /* before "Waiting for connections": a tool may signal right after it */
    uv_signal_init(server.loop, &main_sigint);
    uv_signal_start(&main_sigint, main_on_signal, SIGINT);
    uv_signal_init(server.loop, &main_sigterm);
    uv_signal_start(&main_sigterm, main_on_signal, SIGTERM);
    const char *addr_ptrs[MAIN_MAX_ADDRS];
    for (int i = 0; i < naddrs; i++)
        addr_ptrs[i] = addrs[i];
    tls_config_t tls = {.cert_key_file = o.tls_cert_key_file, .ca_file = o.tls_ca_file,
                        .allow_no_cert = o.tls_allow_no_cert};
    if (o.tls_mode)
        tls_mode_parse(o.tls_mode, &tls.mode); /* checked by options_parse */
    main_tls = tls;
    uv_signal_init(server.loop, &main_sighup);
    uv_signal_start(&main_sighup, main_on_sighup, SIGHUP);
    if (!tls_configure(&tls, &err)) {
        journal_close();
        return main_fail(MAIN_EXIT_BADOPTIONS, "InvalidSSLConfiguration", err.msg);
    }
    if (!net_listen(server.loop, addr_ptrs, naddrs, cfg->port, cfg->max_conns, &err)) {
        log_event(LOG_ERROR, "NETWORK", 23024, "Failed to set up listener",
                  LOG_STR("error", err.msg));
        journal_close();
        log_event(LOG_INFO, "CONTROL", 23138, "Shutting down",
                  LOG_INT("exitCode", MAIN_EXIT_NET_ERROR));
        return MAIN_EXIT_NET_ERROR;
    }
    if (o.metrics_port && !http_start(server.loop, o.metrics_bind, o.metrics_port, &err)) {
        log_event(LOG_ERROR, "NETWORK", 23024, "Failed to set up listener",
                  LOG_STR("error", err.msg));
        net_stop();
        journal_close();
        log_event(LOG_INFO, "CONTROL", 23138, "Shutting down",
                  LOG_INT("exitCode", MAIN_EXIT_NET_ERROR));
        return MAIN_EXIT_NET_ERROR;
    }
    if (o.metrics_port)
        log_info("NETWORK", "metrics and status page on http://%s:%d/ (/metrics: Prometheus)",
                 o.metrics_bind, o.metrics_port);
    for (int i = 0; i < naddrs; i++)
        log_event_n(LOG_INFO, "NETWORK", &(log_line_opts_t){.id = 23015, .ctx = "listener"},
                    "Listening on", (const log_attr_t[]){LOG_STR("address", addrs[i])}, 1);
    log_event_n(LOG_INFO, "NETWORK", &(log_line_opts_t){.id = 23016, .ctx = "listener"},
                "Waiting for connections",
                (const log_attr_t[]){LOG_INT("port", cfg->port), LOG_STR("ssl", tls_mode() == TLS_DISABLED ? "off" : "on")},
                2);
    /* atomdb is its set's primary from the start (docs/testing-with-atomdb.md) */
    log_event(LOG_INFO, "REPL", 21358, "Replica set state transition",
              LOG_STR("newState", "PRIMARY"), LOG_STR("oldState", "SECONDARY"));
    log_event(LOG_INFO, "REPL", 21331,
              "Transition to primary complete; database writes are now permitted",
              LOG_INT("term", 1));
    /* Type=notify under systemd (packaging/atomdb.service); a no-op elsewhere */
    sd_notifyf(0, "READY=1\nMAINPID=%d\nSTATUS=Waiting for connections on port %d",
               (int)getpid(), cfg->port);
    if (ready_fd >= 0) {
        if (write(ready_fd, "k", 1) != 1) {
            /* the parent is gone: nobody waits for the answer */
        }
        close(ready_fd);
    }

    uv_timer_init(server.loop, &main_tick);
    uv_idle_init(server.loop, &main_ttl_idle);
    uv_timer_start(&main_tick, main_on_tick, 1000, 1000);

    uv_run(server.loop, UV_RUN_DEFAULT);
    uv_loop_close(server.loop);
    lease_destroy();
    cursors_destroy(server.cursors);
    plancache_clear();
    stats_destroy();
    catalog_destroy(server.catalog);
    bson_destroy(&cfg->argv);
    bson_destroy(&cfg->parsed);
    log_event(LOG_INFO, "CONTROL", 23138, "Shutting down", LOG_INT("exitCode", 0));
    log_set_output(stdout);
    if (logfile)
        fclose(logfile);
    options_destroy(&o);
    return 0;
}
