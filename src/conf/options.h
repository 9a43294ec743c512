/* options: every setting atomdb takes, from mongod's command line, from a
 * mongod.conf YAML file (--config), or from atomdb's own flags — one table
 * row per setting (options.c), so a flag and its config-file key cannot
 * drift apart. mongod settings atomdb cannot honour are refused by name. */
#ifndef ATOMDB_OPTIONS_H
#define ATOMDB_OPTIONS_H

#include <bson/bson.h>
#include <stdbool.h>

#include "journal/journal.h"
#include "util/dberr.h"
#include "util/log.h"

/* What the process is asked to do. */
typedef enum options_action {
    OPTIONS_RUN,      /* serve */
    OPTIONS_VERSION,  /* --version: print and exit */
    OPTIONS_HELP,     /* --help */
    OPTIONS_SHUTDOWN, /* --shutdown: stop the server running on --dbpath */
} options_action_t;

/* The parsed settings. Strings are owned (freed by options_destroy). */
typedef struct options {
    options_action_t action;
    char *config_path;        /* --config / -f */
    /* net */
    char *bind_ip;            /* comma-separated addresses, default 127.0.0.1 */
    bool bind_ip_given;       /* --bind_ip / net.bindIp given */
    bool bind_ip_all;         /* --bind_ip_all: 0.0.0.0 (and :: with --ipv6) */
    bool ipv6;                /* --ipv6 */
    int port;                 /* default 27017 */
    int max_conns;            /* 0: unlimited */
    int64_t max_memory;       /* --max-memory in bytes; 0: no limit */
    char *advertise;          /* NULL: derived from the first address */
    /* storage */
    char *dbpath;             /* default ./data */
    char *storage_engine;     /* NULL, "wiredTiger", "inMemory", "ephemeralForTest" */
    int journal_enabled;      /* storage.journal.enabled: -1 unset, 0, 1 */
    bool journal_mode_set;    /* --journal / atomdb.journal given */
    journal_options_t journal;/* mode and snapshots; dbpath is filled by main */
    /* replication */
    char *replset;            /* default rs0 */
    bool replset_explicit;    /* --replSet / replication.replSetName given */
    /* log */
    log_level_t log_level;
    log_format_t log_format;
    char *log_path;           /* NULL: stdout */
    bool log_append;
    bool quiet;
    /* process */
    bool fork;
    char *pidfile;
    /* security */
    bool auth;                /* --auth / security.authorization: enabled */
    char *tls_mode;           /* --tlsMode / net.tls.mode, NULL: disabled */
    char *tls_cert_key_file;  /* --tlsCertificateKeyFile */
    char *tls_ca_file;        /* --tlsCAFile */
    bool tls_allow_no_cert;   /* --tlsAllowConnectionsWithoutCertificates */
    bool protected_mode;      /* --protected-mode: refuse non-loopback addresses without auth */
    /* operations (docs/operations.md) */
    int slowms;               /* --slowms, operationProfiling.slowOpThresholdMs; default 100 */
    double slow_sample_rate;  /* --slowOpSampleRate; default 1.0 */
    int metrics_port;         /* --metrics-port: HTTP metrics and status page; 0 off */
    char *metrics_bind;       /* --metrics-bind address; default 127.0.0.1 */
    bson_t set_parameters;    /* {name: value} from --setParameter / setParameter: */
    /* for getCmdLineOpts */
    bson_t argv;              /* the raw arguments */
    bson_t parsed;            /* the settings given, nested as mongod shows them */
    /* -- internal -- */
    void *given;              /* what was given, by path, for `parsed` */
} options_t;

/* Fills `o` with the defaults. */
void options_init(options_t *o);
/* Frees what `o` owns; accepts a zeroed struct. */
void options_destroy(options_t *o);

/* Parses the command line (and the --config file it names, whose settings
 * the command line overrides), then checks the combination. False with
 * `err` saying which option is wrong and why. */
bool options_parse(options_t *o, int argc, char **argv, dberr_t *err);

/* Writes the --help text. */
void options_usage(FILE *out);

/* Loads a mongod.conf YAML file into `o` (options_parse calls it). */
bool options_load_file(options_t *o, const char *path, dberr_t *err);

/* Applies one config-file setting: `path` is its dotted key
 * ("net.port"), `value` its scalar text. Used by the YAML loader. */
bool options_set_path(options_t *o, const char *path, const char *value, const char *file,
                      dberr_t *err);

#endif
