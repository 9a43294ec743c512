/* server: the process-wide state every command sees — configuration from
 * the command line, counters for serverStatus, the catalog and the loop.
 * There is one instance, `server`, touched by the loop thread only (Redis
 * keeps a global `server` the same way). */
#ifndef ATOMDB_SERVER_H
#define ATOMDB_SERVER_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define SERVER_MONGODB_VERSION "7.0.0"
#define SERVER_MAX_WIRE_VERSION 21

struct catalog;
struct cursors;

/* The configuration the commands see (from conf/options.c). Strings are
 * owned by main's options and live as long as the process. */
typedef struct server_config {
    const char *bind;        /* --bind_ip: comma-separated addresses, default 127.0.0.1 */
    int port;                /* --port, default 27017 */
    const char *dbpath;      /* --dbpath, default ./data */
    const char *replset;     /* --replSet, default rs0 */
    char advertise[300];     /* --advertise host:port, default bind:port */
    int max_conns;           /* --max-conns */
    int64_t max_memory;      /* --max-memory in bytes, 0: none (cmd/memory.c) */
    bson_t argv;             /* the raw arguments, for getCmdLineOpts */
    bson_t parsed;           /* the parsed options, for getCmdLineOpts */
} server_config_t;

/* serverStatus opcounters. */
typedef struct server_opcounters {
    int64_t insert, query, update, delete_, getmore, command;
} server_opcounters_t;

/* The server. */
typedef struct server {
    server_config_t config;
    uv_loop_t *loop;
    int64_t start_ms;            /* wall clock at start, ms since epoch */
    uint64_t start_hr;           /* uv_hrtime() at start */
    bson_oid_t process_id;       /* topologyVersion.processId */
    bson_oid_t election_id;      /* electionId (constant: one primary forever) */
    int64_t connections_current;
    int64_t connections_total;
    int64_t next_connection_id;
    server_opcounters_t ops;
    int64_t net_bytes_in;        /* serverStatus network.bytesIn: bytes read from clients */
    int64_t net_bytes_out;       /* network.bytesOut: reply bytes handed to sockets */
    int64_t net_requests;        /* network.numRequests: requests cut from the stream */
    struct catalog *catalog;     /* every database and collection */
    struct cursors *cursors;     /* open cursors by id */
    bool stopping;               /* shutdown requested */
    void (*request_stop)(void);  /* asks the network layer to stop the loop */
    int32_t txn_lock_timeout_ms; /* maxTransactionLockRequestTimeoutMillis */
    int32_t txn_lifetime_s;      /* transactionLifetimeLimitSeconds */
    bool auth;                   /* --auth: access control on (cmd/access.c) */
    int32_t frame_timeout_s;     /* atomdbFrameTimeoutSecs: a request frame must arrive
                                  * whole within this many seconds of its first byte */
    int txn_isolation;           /* txn_isolation_t of transactions that do not choose:
                                  * --txn-isolation / atomdbTransactionIsolation */
} server_t;

/* The one server instance. */
extern server_t server;

/* Milliseconds since the epoch, wall clock. */
int64_t server_now_ms(void);

#endif
