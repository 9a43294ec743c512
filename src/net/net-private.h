/* net-private: what the listener and the connections share inside net. */
#ifndef ATOMDB_NET_PRIVATE_H
#define ATOMDB_NET_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "cmd/cmd.h"
#include "journal/journal.h"
#include "net/net.h"
#include "net/tls.h"
#include "util/buf.h"
#include "wire/wire.h"

/* One client connection (loop thread only). */
typedef struct conn {
    uv_tcp_t tcp;             /* must stay first: handle data points back here */
    cmd_client_t client;      /* what the command layer sees */
    buf_t in;                 /* bytes read and not yet consumed */
    size_t write_queued;      /* reply bytes handed to libuv, not yet written */
    bool read_paused;         /* reading stopped until replies drain */
    bool closing;             /* uv_close called; no more work */
    bool has_pending;         /* a parked request waits for its reply */
    wire_request_t pending;   /* the parked request */
    int32_t last_reply_id;    /* requestID of our last reply */
    journal_waiter_t waiter;  /* linked while a reply waits for its log record */
    bson_t *held_reply;       /* that reply, sent once the record is durable */
    struct conn *prev, *next; /* list of open connections */
    /* -- TLS (net/tls.c) -- */
    int tls_state;            /* CONN_PLAIN, CONN_TLS_UNDECIDED, CONN_TLS */
    tls_session_t *tls;       /* when CONN_TLS */
    buf_t raw;                /* bytes read and not yet decrypted */
    uint64_t partial_since;   /* uv_now when the unfinished frame in `in` began, or 0 */
    uint64_t last_read;       /* uv_now of the last read */
} conn_t;

/* conn_t.tls_state */
enum {
    CONN_PLAIN,          /* plaintext (TLS disabled, or the client chose it) */
    CONN_TLS_UNDECIDED,  /* TLS on: the first byte read decides */
    CONN_TLS,            /* a TLS session */
};

/* Accepts a pending connection on `listener`; NULL when accept failed. */
conn_t *conn_accept(uv_stream_t *listener);
/* Closes `c` (idempotent); `why` is logged at info level when not NULL. */
void conn_close(conn_t *c, const char *why);
/* (Re)starts reading. */
void conn_start_reading(conn_t *c);
/* Once a second (listener.c): drops `c` when a frame has been arriving for
 * longer than atomdbFrameTimeoutSecs (slowloris), and gives back the read
 * buffer of a connection idle for a second (10,000 idle connections must
 * not hold 64 KiB each). */
void conn_sweep(conn_t *c, uint64_t now);
/* The open-connection list, kept by the listener. */
void conn_list_add(conn_t *c);
void conn_list_remove(conn_t *c);

#endif
