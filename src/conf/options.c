/* options: the table of atomdb's settings (one row: command-line flag,
 * mongod.conf path, kind, setter, help), the table of mongod settings atomdb
 * refuses by name, and the command-line parser. conffile.c feeds the same
 * table from YAML. To add a setting, add one row and one setter. */
#include "conf/options.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/vec.h"

/* How a setting's value is read. */
typedef enum option_kind {
    OPT_STRING, /* --flag VALUE; key: text */
    OPT_INT,    /* --flag N; key: integer */
    OPT_BOOL,   /* config file only: true/false */
    OPT_SWITCH, /* --flag (no value); key: true/false */
} option_kind_t;

/* A setting's value, as the setter gets it. */
typedef struct option_value {
    const char *name; /* as the user spelled it: "--port" or "net.port" */
    const char *s;    /* OPT_STRING */
    int64_t i;        /* OPT_INT */
    bool b;           /* OPT_BOOL, OPT_SWITCH */
} option_value_t;

typedef bool (*option_set_fn)(options_t *o, const option_value_t *v, dberr_t *err);

/* One setting. */
typedef struct option_def {
    const char *flag;  /* command-line name without "--"; NULL: config file only */
    const char *flag2; /* a second spelling (atomdb's older name), or NULL */
    const char *path;  /* mongod.conf key and getCmdLineOpts path; NULL: command line only */
    option_kind_t kind;
    option_set_fn set;
    const char *help;  /* one line for --help; NULL: not shown */
} option_def_t;

/* One recorded setting, for getCmdLineOpts' "parsed". */
typedef struct option_given {
    char *path;
    bson_value_t value;
} option_given_t;

typedef struct option_givens {
    option_given_t *v;
    size_t n, cap;
} option_givens_t;

/* ---- value helpers ---- */

static char *options_dup(char **slot, const char *s)
{
    bson_free(*slot);
    *slot = bson_strdup(s);
    return *slot;
}

static bool options_parse_int(const char *name, const char *text, int64_t *out, dberr_t *err)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    if (!*text || *end || errno)
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be an integer, got '%s'", name, text);
    *out = n;
    return true;
}

static bool options_parse_bool(const char *name, const char *text, bool *out, dberr_t *err)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(text, yes[i]) == 0)
            return (*out = true, true);
        if (strcmp(text, no[i]) == 0)
            return (*out = false, true);
    }
    return dberr_set(err, DBERR_BAD_VALUE, "%s must be true or false, got '%s'", name, text);
}

static bool options_range(const option_value_t *v, int64_t lo, int64_t hi, dberr_t *err)
{
    if (v->i < lo || v->i > hi)
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be %lld..%lld, got %lld", v->name,
                         (long long)lo, (long long)hi, (long long)v->i);
    return true;
}

/* Records `path` = `value` for getCmdLineOpts (a later setting of the same
 * path replaces the earlier). */
static void options_record(options_t *o, const char *path, const bson_value_t *value)
{
    option_givens_t *g = o->given;
    for (size_t i = 0; i < g->n; i++) {
        if (strcmp(g->v[i].path, path) == 0) {
            bson_value_destroy(&g->v[i].value);
            bson_value_copy(value, &g->v[i].value);
            return;
        }
    }
    VEC_RESERVE_ONE(g->v, g->n, g->cap, 16);
    g->v[g->n].path = bson_strdup(path);
    bson_value_copy(value, &g->v[g->n].value);
    g->n++;
}

static void options_record_str(options_t *o, const char *path, const char *s)
{
    bson_value_t v = {.value_type = BSON_TYPE_UTF8};
    v.value.v_utf8.str = (char *)s;
    v.value.v_utf8.len = (uint32_t)strlen(s);
    options_record(o, path, &v);
}

/* ---- setters ---- */

/* A setting kept as text, and one that names a file or directory (not empty). */
#define OPTIONS_STRING_SETTER(fn, field)                                       \
    static bool fn(options_t *o, const option_value_t *v, dberr_t *err)        \
    {                                                                          \
        (void)err;                                                             \
        options_dup(&o->field, v->s);                                          \
        return true;                                                           \
    }
#define OPTIONS_PATH_SETTER(fn, field)                                         \
    static bool fn(options_t *o, const option_value_t *v, dberr_t *err)        \
    {                                                                          \
        if (!*v->s)                                                            \
            return dberr_set(err, DBERR_BAD_VALUE, "%s must not be empty", v->name); \
        options_dup(&o->field, v->s);                                          \
        return true;                                                           \
    }

/* The settings that are a plain switch: one setter each, made alike. */
#define OPTIONS_SWITCH_SETTER(fn, field)                                       \
    static bool fn(options_t *o, const option_value_t *v, dberr_t *err)        \
    {                                                                          \
        (void)err;                                                             \
        o->field = v->b;                                                       \
        return true;                                                           \
    }

/* A whole number in [lo, hi], stored times scale (1, or 1 MiB for the _mb settings). */
#define OPTIONS_INT_SETTER(fn, field, lo, hi, scale)                           \
    static bool fn(options_t *o, const option_value_t *v, dberr_t *err)        \
    {                                                                          \
        if (!options_range(v, lo, hi, err))                                    \
            return false;                                                      \
        o->field = v->i * (scale);                                             \
        return true;                                                           \
    }

OPTIONS_PATH_SETTER(set_dbpath, dbpath)
OPTIONS_PATH_SETTER(set_log_path, log_path)
OPTIONS_STRING_SETTER(set_advertise, advertise)
OPTIONS_STRING_SETTER(set_pidfile, pidfile)

OPTIONS_SWITCH_SETTER(set_bind_ip_all, bind_ip_all)
OPTIONS_SWITCH_SETTER(set_ipv6, ipv6)
OPTIONS_SWITCH_SETTER(set_repair, journal.repair)
OPTIONS_SWITCH_SETTER(set_log_append, log_append)
OPTIONS_SWITCH_SETTER(set_quiet, quiet)
OPTIONS_SWITCH_SETTER(set_fork, fork)

OPTIONS_INT_SETTER(set_port, port, 0, 65535, 1)
OPTIONS_INT_SETTER(set_metrics_port, metrics_port, 0, 65535, 1)
OPTIONS_INT_SETTER(set_max_conns, max_conns, 0, INT_MAX, 1)
OPTIONS_INT_SETTER(set_slowms, slowms, INT_MIN, INT_MAX, 1)
OPTIONS_INT_SETTER(set_snapshot_interval, journal.snapshot_interval_s, 0, INT64_MAX / 1000, 1)
OPTIONS_INT_SETTER(set_snapshot_wal_mb, journal.snapshot_wal_bytes, 0, INT64_MAX / (1024 * 1024),
                   1024 * 1024)
OPTIONS_INT_SETTER(set_change_stream_history, journal.history_s, 0, INT64_MAX / 1000, 1)
OPTIONS_INT_SETTER(set_change_stream_history_mb, journal.history_bytes, 0,
                   INT64_MAX / (1024 * 1024), 1024 * 1024)

static bool set_bind_ip(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (!*v->s)
        return dberr_set(err, DBERR_BAD_VALUE, "%s must name at least one address", v->name);
    options_dup(&o->bind_ip, v->s);
    o->bind_ip_given = true;
    return true;
}

static bool set_slow_sample_rate(options_t *o, const option_value_t *v, dberr_t *err)
{
    char *end;
    double d = strtod(v->s, &end);
    if (!*v->s || *end || !(d >= 0.0 && d <= 1.0))
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be a number between 0 and 1, got '%s'",
                         v->name, v->s);
    o->slow_sample_rate = d;
    return true;
}

static bool set_profile(options_t *o, const option_value_t *v, dberr_t *err)
{
    /* --profile takes 0/1/2, operationProfiling.mode off/slowOp/all */
    if (!strcmp(v->s, "0") || !strcmp(v->s, "off"))
        return true;
    if (!strcmp(v->s, "1") || !strcmp(v->s, "2") || !strcmp(v->s, "slowOp") ||
        !strcmp(v->s, "all"))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "%s %s is not supported by atomdb yet: atomdb does not write "
                         "system.profile; slow operations are logged with level 0 "
                         "(--slowms)",
                         v->name, v->s);
    return dberr_set(err, DBERR_BAD_VALUE, "%s must be 0, 1 or 2 (off, slowOp, all), got '%s'",
                     v->name, v->s);
}

OPTIONS_PATH_SETTER(set_metrics_bind, metrics_bind) /* an address: not empty either */

static bool set_storage_engine(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (strcmp(v->s, "wiredTiger") != 0 && strcmp(v->s, "inMemory") != 0 &&
        strcmp(v->s, "ephemeralForTest") != 0)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "%s '%s' is not supported by atomdb: use wiredTiger (atomdb's "
                         "write-ahead log and snapshots) or inMemory / ephemeralForTest (no "
                         "journal: data is lost when the server stops)",
                         v->name, v->s);
    options_dup(&o->storage_engine, v->s);
    return true;
}

static bool set_journal_enabled(options_t *o, const option_value_t *v, dberr_t *err)
{
    o->journal_enabled = v->b ? 1 : 0;
    return true;
}

static bool set_journal(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (!journal_parse_mode(v->s, &o->journal.mode))
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be fsync, write or none, got '%s'",
                         v->name, v->s);
    o->journal_mode_set = true;
    return true;
}

/* --max-memory SIZE: bytes, or a number with KB/MB/GB (K/M/G, KiB...; powers of 1024). */
static bool set_max_memory(options_t *o, const option_value_t *v, dberr_t *err)
{
    char *end = NULL;
    errno = 0;
    double n = strtod(v->s, &end);
    int64_t unit = 1;
    if (end && *end) {
        char u = (char)(*end | 0x20);
        unit = u == 'k' ? 1024 : u == 'm' ? 1024 * 1024 : u == 'g' ? 1024ll * 1024 * 1024 : 0;
        const char *rest = end + 1;
        if (unit && (!strcasecmp(rest, "") || !strcasecmp(rest, "b") || !strcasecmp(rest, "ib")))
            ;
        else
            unit = 0;
    }
    if (errno || end == v->s || !unit || n < 1 || n * (double)unit > 9.0e18)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "%s must be a size such as 512MB or 2GB (bytes when no unit), got '%s'",
                         v->name, v->s);
    o->max_memory = (int64_t)(n * (double)unit);
    return true;
}

static bool set_replset(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (!*v->s || strchr(v->s, '/') || strchr(v->s, ','))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "%s must be a replica set name (no seed list: atomdb is a single "
                         "node), got '%s'",
                         v->name, v->s);
    options_dup(&o->replset, v->s);
    o->replset_explicit = true;
    return true;
}

static bool set_log_destination(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (strcmp(v->s, "file") == 0)
        return true; /* systemLog.path says which; checked in options_check */
    if (strcmp(v->s, "syslog") == 0)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "%s: syslog is not supported by atomdb; log to a file "
                         "(systemLog.destination: file, systemLog.path) or to stdout",
                         v->name);
    return dberr_set(err, DBERR_BAD_VALUE, "%s must be file or syslog, got '%s'", v->name, v->s);
}

static bool set_verbosity(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (!options_range(v, 0, 5, err))
        return false;
    /* atomdb has one debug level: any verbosity above 0 turns it on */
    o->log_level = v->i > 0 ? LOG_DEBUG : LOG_INFO;
    return true;
}

static bool set_log_level(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (!log_parse_level(v->s, &o->log_level))
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be debug, info, warn or error, got '%s'",
                         v->name, v->s);
    return true;
}

static bool set_log_format(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (!log_parse_format(v->s, &o->log_format))
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be json or text, got '%s'", v->name,
                         v->s);
    return true;
}

static bool set_noauth(options_t *o, const option_value_t *v, dberr_t *err)
{
    o->auth = false;
    options_record_str(o, "security.authorization", "disabled");
    return true;
}

static bool set_auth(options_t *o, const option_value_t *v, dberr_t *err)
{
    o->auth = v->b;
    options_record_str(o, "security.authorization", v->b ? "enabled" : "disabled");
    return true;
}

static bool set_protected_mode(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (strcmp(v->s, "on") == 0 || strcmp(v->s, "yes") == 0)
        o->protected_mode = true;
    else if (strcmp(v->s, "off") == 0 || strcmp(v->s, "no") == 0)
        o->protected_mode = false;
    else
        return dberr_set(err, DBERR_BAD_VALUE, "%s must be on or off, got '%s'", v->name, v->s);
    return true;
}

static bool set_authorization(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (strcmp(v->s, "disabled") == 0) {
        o->auth = false;
        return true;
    }
    if (strcmp(v->s, "enabled") == 0) {
        o->auth = true;
        return true;
    }
    return dberr_set(err, DBERR_BAD_VALUE, "%s must be enabled or disabled, got '%s'", v->name,
                     v->s);
}

static bool set_tls_mode(options_t *o, const option_value_t *v, dberr_t *err)
{
    static const char *const modes[] = {"disabled", "allowTLS", "preferTLS", "requireTLS"};
    for (size_t i = 0; i < 4; i++)
        if (strcmp(v->s, modes[i]) == 0) {
            options_dup(&o->tls_mode, v->s);
            return true;
        }
    return dberr_set(err, DBERR_BAD_VALUE,
                     "%s must be disabled, allowTLS, preferTLS or requireTLS, got '%s'", v->name,
                     v->s);
}

OPTIONS_PATH_SETTER(set_tls_cert_key_file, tls_cert_key_file)
OPTIONS_PATH_SETTER(set_tls_ca_file, tls_ca_file)
OPTIONS_SWITCH_SETTER(set_tls_allow_no_cert, tls_allow_no_cert)

static bool set_unix_socket(options_t *o, const option_value_t *v, dberr_t *err)
{
    if (v->b)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "%s: atomdb listens on TCP only (it opens no Unix domain socket)",
                         v->name);
    return true;
}

static bool set_nounixsocket(options_t *o, const option_value_t *v, dberr_t *err)
{
    return true; /* atomdb never opens a Unix domain socket: honoured as it is */
}

/* --setParameter name=value and setParameter: {name: value}: kept as
 * {name: value} (numbers and booleans typed), applied by main through the
 * setParameter command's code, which refuses unknown names. */
static bool options_add_parameter(options_t *o, const char *name, const char *text,
                                  dberr_t *err)
{
    if (!*name)
        return dberr_set(err, DBERR_BAD_VALUE, "setParameter needs name=value, got '=%s'", text);
    bson_iter_t it;
    if (bson_iter_init_find(&it, &o->set_parameters, name))
        return dberr_set(err, DBERR_BAD_VALUE, "setParameter '%s' is given twice", name);
    char *end = NULL;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    bool b;
    dberr_t ignore;
    if (*text && !*end && !errno)
        BSON_APPEND_INT64(&o->set_parameters, name, n);
    else if (options_parse_bool(name, text, &b, &ignore))
        BSON_APPEND_BOOL(&o->set_parameters, name, b);
    else
        BSON_APPEND_UTF8(&o->set_parameters, name, text);
    char path[300];
    snprintf(path, sizeof path, "setParameter.%s", name);
    options_record_str(o, path, text);
    return true;
}

static bool set_parameter(options_t *o, const option_value_t *v, dberr_t *err)
{
    const char *eq = strchr(v->s, '=');
    if (!eq)
        return dberr_set(err, DBERR_BAD_VALUE, "%s needs name=value, got '%s'", v->name, v->s);
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - v->s), v->s);
    return options_add_parameter(o, name, eq + 1, err);
}

/* --txn-isolation L: the atomdbTransactionIsolation parameter, checked
 * at start by the same code as setParameter. */
static bool set_txn_isolation(options_t *o, const option_value_t *v, dberr_t *err)
{
    return options_add_parameter(o, "atomdbTransactionIsolation", v->s, err);
}

static bool set_action_version(options_t *o, const option_value_t *v, dberr_t *err)
{
    o->action = OPTIONS_VERSION;
    return true;
}

static bool set_action_help(options_t *o, const option_value_t *v, dberr_t *err)
{
    o->action = OPTIONS_HELP;
    return true;
}

static bool set_action_shutdown(options_t *o, const option_value_t *v, dberr_t *err)
{
    o->action = OPTIONS_SHUTDOWN;
    return true;
}

static bool set_config(options_t *o, const option_value_t *v, dberr_t *err)
{
    return true; /* read before every other option, in options_parse */
}

/* ---- the tables ---- */

static const option_def_t options_table[] = {
    /* mongod's settings */
    {"config", "f", NULL, OPT_STRING, set_config,
     "--config, -f FILE     read settings from a mongod.conf YAML file"},
    {"port", NULL, "net.port", OPT_INT, set_port, "--port N              TCP port (default 27017)"},
    {"bind_ip", "bind", "net.bindIp", OPT_STRING, set_bind_ip,
     "--bind_ip LIST        comma-separated addresses to listen on (default 127.0.0.1)"},
    {"bind_ip_all", NULL, "net.bindIpAll", OPT_SWITCH, set_bind_ip_all,
     "--bind_ip_all         listen on 0.0.0.0 (and :: with --ipv6)"},
    {"ipv6", NULL, "net.ipv6", OPT_SWITCH, set_ipv6, "--ipv6                also listen on :: with --bind_ip_all"},
    {"maxConns", "max-conns", "net.maxIncomingConnections", OPT_INT, set_max_conns,
     "--maxConns N          close connections beyond N at once (default unlimited)"},
    {"nounixsocket", NULL, NULL, OPT_SWITCH, set_nounixsocket, NULL},
    {"tlsMode", NULL, "net.tls.mode", OPT_STRING, set_tls_mode,
     "--tlsMode M           disabled (default), allowTLS, preferTLS or requireTLS"},
    {"tlsCertificateKeyFile", NULL, "net.tls.certificateKeyFile", OPT_STRING,
     set_tls_cert_key_file, "--tlsCertificateKeyFile F  PEM with the server's certificate and key"},
    {"tlsCAFile", NULL, "net.tls.CAFile", OPT_STRING, set_tls_ca_file,
     "--tlsCAFile F         CAs for client certificates (then required, see below)"},
    {"tlsAllowConnectionsWithoutCertificates", NULL, "net.tls.allowConnectionsWithoutCertificates",
     OPT_SWITCH, set_tls_allow_no_cert,
     "--tlsAllowConnectionsWithoutCertificates  with --tlsCAFile: certificates optional"},
    {NULL, NULL, "net.unixDomainSocket.enabled", OPT_BOOL, set_unix_socket, NULL},
    {"dbpath", NULL, "storage.dbPath", OPT_STRING, set_dbpath,
     "--dbpath DIR          data directory, created if missing (default ./data)"},
    {"storageEngine", NULL, "storage.engine", OPT_STRING, set_storage_engine,
     "--storageEngine E     wiredTiger (journal, the default) or inMemory/ephemeralForTest"},
    {NULL, NULL, "storage.journal.enabled", OPT_BOOL, set_journal_enabled, NULL},
    {"replSet", NULL, "replication.replSetName", OPT_STRING, set_replset,
     "--replSet NAME        replica set name presented to drivers (default rs0)"},
    {"logpath", NULL, "systemLog.path", OPT_STRING, set_log_path,
     "--logpath FILE        log to FILE instead of stdout"},
    {NULL, NULL, "systemLog.destination", OPT_STRING, set_log_destination, NULL},
    {"logappend", NULL, "systemLog.logAppend", OPT_SWITCH, set_log_append,
     "--logappend           append to --logpath instead of renaming the old file"},
    {"quiet", NULL, "systemLog.quiet", OPT_SWITCH, set_quiet,
     "--quiet               leave out connection and other routine lines"},
    {NULL, NULL, "systemLog.verbosity", OPT_INT, set_verbosity, NULL},
    {"fork", NULL, "processManagement.fork", OPT_SWITCH, set_fork,
     "--fork                run in the background once listening (needs --logpath)"},
    {"pidfilepath", NULL, "processManagement.pidFilePath", OPT_STRING, set_pidfile,
     "--pidfilepath FILE    write the server's pid to FILE"},
    {"noauth", NULL, NULL, OPT_SWITCH, set_noauth, "--noauth              no access control (the default)"},
    {"auth", NULL, NULL, OPT_SWITCH, set_auth,
     "--auth                access control: clients log in (SCRAM), commands are authorized"},
    {NULL, NULL, "security.authorization", OPT_STRING, set_authorization, NULL},
    {"slowms", NULL, "operationProfiling.slowOpThresholdMs", OPT_INT, set_slowms,
     "--slowms N            log operations slower than N ms as \"Slow query\" (default 100)"},
    {"slowOpSampleRate", NULL, "operationProfiling.slowOpSampleRate", OPT_STRING,
     set_slow_sample_rate, "--slowOpSampleRate R fraction of slow operations logged (default 1.0)"},
    {"profile", NULL, "operationProfiling.mode", OPT_STRING, set_profile,
     "--profile 0           profiling level; 1 and 2 (system.profile) are not supported yet"},
    {"setParameter", NULL, NULL, OPT_STRING, set_parameter,
     "--setParameter N=V    set a server parameter at start (as the setParameter command)"},
    {"shutdown", NULL, NULL, OPT_SWITCH, set_action_shutdown,
     "--shutdown            stop the server that runs on --dbpath and exit"},
    {"version", NULL, NULL, OPT_SWITCH, set_action_version, "--version             print the version and exit"},
    {"help", "h", NULL, OPT_SWITCH, set_action_help, "--help, -h            print this help and exit"},
    /* atomdb's own settings */
    {"advertise", NULL, "atomdb.advertise", OPT_STRING, set_advertise,
     "--advertise H:P       address given to drivers in hosts/me (default first address:port)"},
    {"journal", NULL, "atomdb.journal", OPT_STRING, set_journal,
     "--journal MODE        fsync, write or none (default write; docs/durability.md)"},
    {"max-memory", NULL, "atomdb.maxMemory", OPT_STRING, set_max_memory,
     "--max-memory SIZE     refuse writes that add data once memory use passes SIZE\n"
     "                      (512MB, 2GB; default: no limit; reads and deletes go on)"},
    {"snapshot-interval", NULL, "atomdb.snapshotIntervalSecs", OPT_INT, set_snapshot_interval,
     "--snapshot-interval S snapshot every S seconds of writes (default 300, 0 off)"},
    {"snapshot-wal-mb", NULL, "atomdb.snapshotWalMB", OPT_INT, set_snapshot_wal_mb,
     "--snapshot-wal-mb N   snapshot when the log grew by N MiB (default 256)"},
    {"change-stream-history", NULL, "atomdb.changeStreamHistorySecs", OPT_INT,
     set_change_stream_history,
     "--change-stream-history S  keep S seconds of changes for change streams (default 86400)"},
    {"change-stream-history-mb", NULL, "atomdb.changeStreamHistoryMB", OPT_INT,
     set_change_stream_history_mb,
     "--change-stream-history-mb N  ... and at most N MiB of them (default 64)"},
    {"repair", NULL, "atomdb.repair", OPT_SWITCH, set_repair,
     "--repair              start despite a damaged log (keeps a copy, truncates at the damage)"},
    {"log-level", NULL, "atomdb.logLevel", OPT_STRING, set_log_level,
     "--log-level LEVEL     debug, info, warn or error (default info; -v is debug)"},
    {"log-format", NULL, "atomdb.logFormat", OPT_STRING, set_log_format,
     "--log-format F        json (mongod's structured log, the default) or text"},
    {"metrics-port", NULL, "atomdb.metricsPort", OPT_INT, set_metrics_port,
     "--metrics-port N      serve Prometheus /metrics and the status page / over HTTP\n"
     "                      on port N (default off; with --auth it asks for HTTP Basic\n"
     "                      credentials of a clusterMonitor user; docs/operations.md)"},
    {"metrics-bind", NULL, "atomdb.metricsBind", OPT_STRING, set_metrics_bind,
     "--metrics-bind ADDR   address of the metrics port (default 127.0.0.1)"},
    {"protected-mode", NULL, "atomdb.protectedMode", OPT_STRING, set_protected_mode,
     "--protected-mode M    on (default): refuse to listen beyond loopback without --auth;\n"
     "                      off: allow it (docs/security.md)"},
    {"txn-isolation", NULL, "atomdb.txnIsolation", OPT_STRING, set_txn_isolation,
     "--txn-isolation L     snapshot (default, as mongod) or serializable: transactions'\n"
     "                      level when they choose none (docs/concurrency.md)"},
};
#define OPTIONS_N (sizeof options_table / sizeof options_table[0])

/* mongod settings atomdb cannot honour, refused naming them and saying why:
 * one row per reason. A key under a listed path is refused too. */
typedef struct option_refused {
    const char *why;
    const char *const *flags; /* command-line names without "--", NULL-terminated, or NULL */
    const char *const *paths; /* config-file keys, NULL-terminated, or NULL */
} option_refused_t;

/* A NULL-terminated list of names. */
#define OPTION_NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

static const option_refused_t options_refused[] = {
    {"atomdb is a single node: there is no replication between nodes",
     OPTION_NAMES("keyFile", "clusterAuthMode", "enableMajorityReadConcern"),
     OPTION_NAMES("security.keyFile", "security.clusterAuthMode",
                  "replication.enableMajorityReadConcern")},
    {"atomdb runs no JavaScript", OPTION_NAMES("noscripting"),
     OPTION_NAMES("security.javascriptEnabled")},
    {"atomdb keeps no oplog (it is a single node)", OPTION_NAMES("oplogSize"),
     OPTION_NAMES("replication.oplogSizeMB")},
    {"atomdb keeps no oplog", OPTION_NAMES("oplogMinRetentionHours"),
     OPTION_NAMES("storage.oplogMinRetentionHours")},
    {"atomdb is not a member of a sharded cluster", OPTION_NAMES("shardsvr", "configsvr"),
     OPTION_NAMES("sharding")},
    {"atomdb's storage is not WiredTiger (see --journal, --snapshot-interval)",
     OPTION_NAMES("wiredTigerCacheSizeGB", "wiredTigerJournalCompressor",
                  "wiredTigerCollectionBlockCompressor", "wiredTigerIndexPrefixCompression",
                  "wiredTigerDirectoryForIndexes", "inMemorySizeGB", "directoryperdb", "syncdelay",
                  "journalCommitInterval"),
     OPTION_NAMES("storage.wiredTiger", "storage.inMemory", "storage.directoryPerDB",
                  "storage.syncPeriodSecs", "storage.journal.commitIntervalMs")},
    {"atomdb listens on TCP only", OPTION_NAMES("unixSocketPrefix", "filePermissions"),
     OPTION_NAMES("net.unixDomainSocket")},
    {"atomdb supports --tlsMode, --tlsCertificateKeyFile, --tlsCAFile and "
     "--tlsAllowConnectionsWithoutCertificates only",
     OPTION_NAMES("tlsAllowInvalidCertificates", "tlsAllowInvalidHostnames",
                  "tlsCertificateKeyFilePassword", "tlsClusterFile", "tlsCRLFile",
                  "tlsDisabledProtocols", "tlsFIPSMode", "tlsCertificateSelector", "sslMode",
                  "sslPEMKeyFile"),
     OPTION_NAMES("net.tls", "net.ssl")},
    {"syslog is not supported by atomdb; use --logpath or stdout", OPTION_NAMES("syslog"), NULL},
    {"syslog is not supported by atomdb", OPTION_NAMES("syslogFacility"),
     OPTION_NAMES("systemLog.syslogFacility")},
    {"auditing is not supported by atomdb", OPTION_NAMES("auditDestination"),
     OPTION_NAMES("auditLog")},
    {"it is not supported by atomdb yet",
     OPTION_NAMES("transitionToAuth", "networkMessageCompressors", "transportLayer",
                  "serviceExecutor", "timeStampFormat", "logRotate", "timeZoneInfo", "sysinfo",
                  "upgrade", "restore", "outputConfig", "cpu", "notablescan",
                  "enableFreeMonitoring"),
     OPTION_NAMES("security.transitionToAuth", "operationProfiling.filter", "net.compression",
                  "net.transportLayer", "net.serviceExecutor", "systemLog.timeStampFormat",
                  "systemLog.logRotate", "systemLog.component", "processManagement.timeZoneInfo",
                  "cloud", "snmp")},
};
#define OPTIONS_NREFUSED (sizeof options_refused / sizeof options_refused[0])

static const option_def_t *options_by_flag(const char *flag)
{
    for (size_t i = 0; i < OPTIONS_N; i++) {
        const option_def_t *d = &options_table[i];
        if ((d->flag && strcmp(d->flag, flag) == 0) || (d->flag2 && strcmp(d->flag2, flag) == 0))
            return d;
    }
    return NULL;
}

static const option_def_t *options_by_path(const char *path)
{
    for (size_t i = 0; i < OPTIONS_N; i++)
        if (options_table[i].path && strcmp(options_table[i].path, path) == 0)
            return &options_table[i];
    return NULL;
}

/* The refusal for `path`: a listed key, or a key under one. */
static const option_refused_t *options_refused_path(const char *path)
{
    for (size_t i = 0; i < OPTIONS_NREFUSED; i++) {
        for (const char *const *p = options_refused[i].paths; p && *p; p++) {
            size_t n = strlen(*p);
            if (strncmp(path, *p, n) == 0 && (path[n] == '\0' || path[n] == '.'))
                return &options_refused[i];
        }
    }
    return NULL;
}

/* The refusal for command-line option `flag`, NULL when none. */
static const option_refused_t *options_refused_flag(const char *flag)
{
    for (size_t i = 0; i < OPTIONS_NREFUSED; i++)
        for (const char *const *f = options_refused[i].flags; f && *f; f++)
            if (strcmp(*f, flag) == 0)
                return &options_refused[i];
    return NULL;
}

/* Converts `text` as `d` expects, records it and calls the setter. */
static bool options_apply(options_t *o, const option_def_t *d, const char *name,
                          const char *text, dberr_t *err)
{
    option_value_t v = {.name = name};
    bson_value_t rec = {0};
    switch (d->kind) {
    case OPT_STRING:
        v.s = text;
        rec.value_type = BSON_TYPE_UTF8;
        rec.value.v_utf8.str = (char *)text;
        rec.value.v_utf8.len = (uint32_t)strlen(text);
        break;
    case OPT_INT:
        if (!options_parse_int(name, text, &v.i, err))
            return false;
        if (v.i >= INT32_MIN && v.i <= INT32_MAX) {
            rec.value_type = BSON_TYPE_INT32;
            rec.value.v_int32 = (int32_t)v.i;
        } else {
            rec.value_type = BSON_TYPE_INT64;
            rec.value.v_int64 = v.i;
        }
        break;
    case OPT_BOOL:
    case OPT_SWITCH:
        if (!options_parse_bool(name, text, &v.b, err))
            return false;
        rec.value_type = BSON_TYPE_BOOL;
        rec.value.v_bool = v.b;
        break;
    }
    if (!d->set(o, &v, err))
        return false;
    if (d->path)
        options_record(o, d->path, &rec);
    return true;
}

bool options_set_path(options_t *o, const char *path, const char *value, const char *file,
                      dberr_t *err)
{
    if (strncmp(path, "setParameter.", 13) == 0)
        return options_add_parameter(o, path + 13, value, err);
    const option_def_t *d = options_by_path(path);
    if (d) {
        if (!options_apply(o, d, path, value, err)) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return dberr_set(err, err->code, "%s: %s", file, msg);
        }
        return true;
    }
    const option_refused_t *r = options_refused_path(path);
    if (r)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "%s: '%s' is a mongod setting atomdb cannot honour: %s", file, path,
                         r->why);
    return dberr_set(err, DBERR_BAD_VALUE, "%s: unrecognised option '%s'", file, path);
}

/* ---- command line ---- */

void options_init(options_t *o)
{
    memset(o, 0, sizeof *o);
    o->action = OPTIONS_RUN;
    o->bind_ip = bson_strdup("127.0.0.1");
    o->protected_mode = true;
    o->port = 27017;
    o->dbpath = bson_strdup("./data");
    o->replset = bson_strdup("rs0");
    o->journal_enabled = -1;
    o->journal.mode = JOURNAL_WRITE;
    o->journal.snapshot_interval_s = 300;
    o->journal.snapshot_wal_bytes = 256ll * 1024 * 1024;
    o->journal.history_s = 86400;
    o->journal.history_bytes = 64ll * 1024 * 1024;
    o->log_level = LOG_INFO;
    o->log_format = LOG_FORMAT_JSON;
    o->slowms = 100;
    o->slow_sample_rate = 1.0;
    o->metrics_bind = bson_strdup("127.0.0.1");
    bson_init(&o->set_parameters);
    bson_init(&o->argv);
    bson_init(&o->parsed);
    o->given = bson_malloc0(sizeof(option_givens_t));
}

/* The settings held as heap strings (options_dup): options_destroy frees them. */
static const size_t options_strings[] = {
    offsetof(options_t, config_path),    offsetof(options_t, bind_ip),
    offsetof(options_t, advertise),      offsetof(options_t, dbpath),
    offsetof(options_t, storage_engine), offsetof(options_t, replset),
    offsetof(options_t, log_path),       offsetof(options_t, pidfile),
    offsetof(options_t, tls_mode),       offsetof(options_t, tls_cert_key_file),
    offsetof(options_t, tls_ca_file),    offsetof(options_t, metrics_bind),
};

void options_destroy(options_t *o)
{
    if (!o->given)
        return;
    option_givens_t *g = o->given;
    for (size_t i = 0; i < g->n; i++) {
        bson_free(g->v[i].path);
        bson_value_destroy(&g->v[i].value);
    }
    bson_free(g->v);
    bson_free(g);
    for (size_t i = 0; i < sizeof options_strings / sizeof options_strings[0]; i++)
        bson_free(*(char **)((char *)o + options_strings[i]));
    bson_destroy(&o->set_parameters);
    bson_destroy(&o->argv);
    bson_destroy(&o->parsed);
    memset(o, 0, sizeof *o);
}

void options_usage(FILE *out)
{
    fprintf(out, "Usage: atomdb [options]\n"
                 "A document database server that speaks the MongoDB wire protocol; takes\n"
                 "mongod's command line and mongod.conf (README: Flags).\n\n");
    for (size_t i = 0; i < OPTIONS_N; i++) {
        if (!options_table[i].help)
            continue;
        if (strcmp(options_table[i].flag, "advertise") == 0)
            fprintf(out, "\natomdb's own:\n");
        fprintf(out, "  %s\n", options_table[i].help);
    }
    fprintf(out, "  -v, -vv ...           debug logging (systemLog.verbosity)\n");
}

/* A -v/-vv/--verbose[=vvv] switch: verbosity is the count of v's. */
static bool options_verbose(options_t *o, const char *arg)
{
    const char *p = NULL;
    if (arg[0] == '-' && arg[1] == 'v')
        p = arg + 1;
    else if (strcmp(arg, "--verbose") == 0)
        p = "v";
    else if (strncmp(arg, "--verbose=", 10) == 0)
        p = arg + 10;
    if (!p)
        return false;
    for (const char *q = p; *q; q++)
        if (*q != 'v')
            return false;
    o->log_level = *p ? LOG_DEBUG : LOG_INFO;
    bson_value_t v = {.value_type = BSON_TYPE_INT32};
    v.value.v_int32 = (int32_t)strlen(p);
    options_record(o, "systemLog.verbosity", &v);
    return true;
}

/* Splits "--name=value" / "--name" / "-f"; `*value` is NULL without '='. */
static bool options_split(const char *arg, char *name, size_t size, const char **value)
{
    const char *p;
    if (arg[0] == '-' && arg[1] == '-' && arg[2])
        p = arg + 2;
    else if (arg[0] == '-' && arg[1] && arg[1] != '-' && !arg[2])
        p = arg + 1;
    else
        return false;
    const char *eq = strchr(p, '=');
    size_t n = eq ? (size_t)(eq - p) : strlen(p);
    if (n >= size)
        n = size - 1;
    memcpy(name, p, n);
    name[n] = '\0';
    *value = eq ? eq + 1 : NULL;
    return true;
}

/* One pass over argv: `config_only` picks --config out (first pass), the
 * second pass applies everything else. */
static bool options_scan(options_t *o, int argc, char **argv, bool config_only, dberr_t *err)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char name[128], shown[136];
        const char *value;
        if (!config_only && options_verbose(o, arg))
            continue;
        if (!options_split(arg, name, sizeof name, &value)) {
            if (config_only)
                continue; /* the second pass says what is wrong with it */
            return dberr_set(err, DBERR_BAD_VALUE, "unexpected argument '%s'", arg);
        }
        snprintf(shown, sizeof shown, "%s%s", arg[1] == '-' ? "--" : "-", name);
        const option_def_t *d = options_by_flag(name);
        if (!d) {
            if (config_only)
                continue;
            const option_refused_t *r = options_refused_flag(name);
            if (r)
                return dberr_set(err, DBERR_BAD_VALUE,
                                 "%s is a mongod option atomdb cannot honour: %s", shown, r->why);
            return dberr_set(err, DBERR_BAD_VALUE, "unrecognised option '%s'", shown);
        }
        if (d->kind == OPT_SWITCH) {
            if (value)
                return dberr_set(err, DBERR_BAD_VALUE, "%s takes no value", shown);
            value = "true";
        } else if (!value) {
            if (i + 1 >= argc)
                return dberr_set(err, DBERR_BAD_VALUE, "%s needs a value", shown);
            value = argv[++i];
        }
        if (d->set == set_config) {
            if (config_only)
                options_dup(&o->config_path, value);
            continue;
        }
        if (!config_only && !options_apply(o, d, shown, value, err))
            return false;
    }
    return true;
}

/* Nests the recorded dotted paths into `out`, mongod's "parsed" shape. */
static void options_build_parsed(const option_givens_t *g, const char *prefix, bson_t *out)
{
    size_t plen = strlen(prefix);
    /* each distinct next component under prefix, in first-given order */
    for (size_t i = 0; i < g->n; i++) {
        const char *p = g->v[i].path;
        if (strncmp(p, prefix, plen) != 0)
            continue;
        const char *rest = p + plen;
        const char *dot = strchr(rest, '.');
        size_t clen = dot ? (size_t)(dot - rest) : strlen(rest);
        /* skip when an earlier entry already produced this component */
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const char *q = g->v[j].path;
            seen = strncmp(q, prefix, plen) == 0 && strncmp(q + plen, rest, clen) == 0 &&
                   (q[plen + clen] == '.' || q[plen + clen] == '\0');
        }
        if (seen)
            continue;
        char comp[128];
        snprintf(comp, sizeof comp, "%.*s", (int)clen, rest);
        if (!dot) {
            bson_append_value(out, comp, -1, &g->v[i].value);
        } else {
            char sub_prefix[300];
            snprintf(sub_prefix, sizeof sub_prefix, "%s%s.", prefix, comp);
            bson_t sub;
            bson_append_document_begin(out, comp, -1, &sub);
            options_build_parsed(g, sub_prefix, &sub);
            bson_append_document_end(out, &sub);
        }
    }
}

/* Checks the combination and derives what depends on several settings. */
static bool options_check(options_t *o, dberr_t *err)
{
    if (o->storage_engine) {
        bool in_memory = strcmp(o->storage_engine, "wiredTiger") != 0;
        if (in_memory && o->journal_enabled == 1)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "storage engine %s keeps no journal: storage.journal.enabled: true "
                             "contradicts it",
                             o->storage_engine);
        if (in_memory && o->journal_mode_set && o->journal.mode != JOURNAL_NONE)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "storage engine %s keeps no journal: --journal must be none",
                             o->storage_engine);
        if (in_memory)
            o->journal.mode = JOURNAL_NONE;
    }
    if (o->journal_enabled == 0) {
        if (o->journal_mode_set && o->journal.mode != JOURNAL_NONE)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "storage.journal.enabled: false contradicts --journal %s",
                             o->journal.mode == JOURNAL_FSYNC ? "fsync" : "write");
        o->journal.mode = JOURNAL_NONE;
    }
    if (o->bind_ip_all && o->bind_ip_given)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "--bind_ip (net.bindIp) and --bind_ip_all (net.bindIpAll) are mutually "
                         "exclusive");
    bool tls_on = o->tls_mode && strcmp(o->tls_mode, "disabled") != 0;
    if (tls_on && !o->tls_cert_key_file)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "--tlsMode %s (net.tls.mode) needs --tlsCertificateKeyFile "
                         "(net.tls.certificateKeyFile)",
                         o->tls_mode);
    if (!tls_on && (o->tls_cert_key_file || o->tls_ca_file || o->tls_allow_no_cert))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "--tlsCertificateKeyFile, --tlsCAFile and "
                         "--tlsAllowConnectionsWithoutCertificates need --tlsMode allowTLS, "
                         "preferTLS or requireTLS");
    if (o->fork && !o->log_path)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "--fork needs --logpath (systemLog.path): a background server has no "
                         "terminal to log to");
    option_givens_t *g = o->given;
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->v[i].path, "systemLog.destination") == 0 && !o->log_path)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "systemLog.destination: file needs systemLog.path");
    return true;
}

bool options_parse(options_t *o, int argc, char **argv, dberr_t *err)
{
    char key[16];
    const char *k;
    for (int i = 0; i < argc; i++) {
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        bson_append_utf8(&o->argv, k, -1, argv[i], -1);
    }
    if (!options_scan(o, argc, argv, true, err))
        return false;
    if (o->config_path) {
        options_record_str(o, "config", o->config_path);
        if (!options_load_file(o, o->config_path, err))
            return false;
    }
    if (!options_scan(o, argc, argv, false, err))
        return false;
    if (!options_check(o, err))
        return false;
    bson_reinit(&o->parsed);
    options_build_parsed(o->given, "", &o->parsed);
    return true;
}
