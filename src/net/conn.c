/* conn: one client connection — reads bytes into a growing buffer, cuts
 * them into frames, runs each request through the command layer and queues
 * the reply. A malformed frame closes only this connection. */
#include "net/net-private.h"

#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/op.h"
#include "cmd/server.h"
#include "util/log.h"
#include "wire/wire.h"

/* Stop reading from a client whose unsent replies pass this many bytes. */
#define CONN_WRITE_HIGH_WATER (64u * 1024 * 1024)
#define CONN_READ_CHUNK (64 * 1024)
/* Replies up to this size are framed without an allocation (conn_reply). */
#define CONN_REPLY_SCRATCH (256 * 1024)

/* A queued write: the frame bytes and libuv's request. */
typedef struct conn_write {
    uv_write_t req;
    conn_t *conn;
    uint8_t *data;
    size_t len;
} conn_write_t;

static void conn_process(conn_t *c);
static bool conn_run(conn_t *c);
static void conn_on_durable(journal_waiter_t *w, bool ok, const char *errmsg);

static void conn_on_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    buf_destroy(&c->in);
    buf_destroy(&c->raw);
    tls_session_free(c->tls);
    bson_free(c);
}

void conn_close(conn_t *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = true;
    op_client_closed(&c->client); /* a suspended operation ends before its request is freed */
    if (why)
        log_info("NETWORK", "connection %lld from %s closed: %s", (long long)c->client.id,
                 c->client.remote, why);
    char ctx[32];
    snprintf(ctx, sizeof ctx, "conn%lld", (long long)c->client.id);
    log_event_n(LOG_INFO, "NETWORK", &(log_line_opts_t){.id = 22944, .ctx = ctx, .routine = true},
                "Connection ended",
                (const log_attr_t[]){LOG_STR("remote", c->client.remote),
                                     LOG_BOOL("isLoadBalanced", false),
                                     LOG_INT("connectionId", c->client.id),
                                     LOG_INT("connectionCount", server.connections_current - 1)},
                4);
    journal_cancel(&c->waiter);
    if (c->held_reply) {
        bson_destroy(c->held_reply);
        c->held_reply = NULL;
    }
    if (c->has_pending) {
        wire_request_destroy(&c->pending);
        c->has_pending = false;
    }
    cmd_client_closed(&c->client);
    conn_list_remove(c);
    server.connections_current--;
    uv_close((uv_handle_t *)&c->tcp, conn_on_closed);
}

static void conn_on_written(uv_write_t *req, int status)
{
    conn_write_t *w = (conn_write_t *)req;
    conn_t *c = w->conn;
    c->write_queued -= w->len;
    bson_free(w->data);
    bson_free(w);
    if (status < 0) {
        conn_close(c, uv_strerror(status));
        return;
    }
    if (c->read_paused && !c->closing && c->write_queued < CONN_WRITE_HIGH_WATER / 2) {
        c->read_paused = false;
        conn_start_reading(c);
        if (!c->has_pending)
            conn_process(c); /* requests read before the pause are still buffered */
    }
}

/* Queues the bytes in `frame` (taken over) for the socket. */
static void conn_send_raw(conn_t *c, buf_t *frame)
{
    if (c->closing || frame->len == 0) {
        buf_destroy(frame);
        return;
    }
    server.net_bytes_out += (int64_t)frame->len;
    /* nothing queued: write now, and only queue what the socket refused
     * (saves libuv's write-request round trip and an epoll_ctl per reply) */
    size_t skip = 0;
    if (c->write_queued == 0) {
        uv_buf_t now = uv_buf_init((char *)frame->data, (unsigned)frame->len);
        int n = uv_try_write((uv_stream_t *)&c->tcp, &now, 1);
        if (n == (int)frame->len) {
            buf_destroy(frame);
            return;
        }
        if (n > 0)
            skip = (size_t)n;
        else if (n != UV_EAGAIN && n != UV_ENOSYS) {
            buf_destroy(frame);
            conn_close(c, uv_strerror(n));
            return;
        }
    }
    if (skip)
        buf_consume(frame, skip);
    conn_write_t *w = bson_malloc(sizeof *w);
    w->conn = c;
    w->data = buf_steal(frame, &w->len);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)w->len);
    c->write_queued += w->len;
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, conn_on_written);
    if (rc < 0) {
        c->write_queued -= w->len;
        bson_free(w->data);
        bson_free(w);
        conn_close(c, uv_strerror(rc));
        return;
    }
    if (c->write_queued > CONN_WRITE_HIGH_WATER && !c->read_paused) {
        c->read_paused = true;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* Queues the frame bytes in `frame` (taken over), encrypted on a TLS
 * connection. */
static void conn_send(conn_t *c, buf_t *frame)
{
    if (c->tls_state != CONN_TLS || c->closing) {
        conn_send_raw(c, frame);
        return;
    }
    buf_t out;
    buf_init(&out);
    char why[300];
    bool ok = tls_session_write(c->tls, frame->data, frame->len, &out, why, sizeof why);
    buf_destroy(frame);
    conn_send_raw(c, &out);
    if (!ok)
        conn_close(c, why);
}

/* Sends `body` as the reply to `req` unless the client asked for none.
 * The frame is built in one loop-wide scratch buffer (a reply the socket
 * takes at once, the usual case, costs no allocation; conn_send_raw copies
 * out what it must queue), so replies do not churn the heap. */
static void conn_reply(conn_t *c, const wire_request_t *req, const bson_t *body)
{
    static uint8_t scratch[CONN_REPLY_SCRATCH];
    if (req->opcode == WIRE_OP_MSG && (req->flags & WIRE_MSG_MORE_TO_COME))
        return; /* w: 0 / fire-and-forget: no reply at all */
    buf_t frame;
    buf_init_fixed(&frame, scratch, sizeof scratch);
    int compressor =
        req->compressor >= 0 && wire_command_compressible(&req->cmd) ? req->compressor : -1;
    wire_reply_append(&frame, req, ++c->last_reply_id, body, 0, compressor);
    conn_send(c, &frame);
}

/* Sends one streamed reply (exhaust): moreToCome is set, the request stays
 * parked, and the next reply answers this one. */
static void conn_send_stream_reply(cmd_client_t *client, const bson_t *body)
{
    conn_t *c = (conn_t *)((char *)client - offsetof(conn_t, client));
    if (!c->has_pending || c->closing)
        return;
    buf_t frame;
    buf_init(&frame);
    int32_t id = ++c->last_reply_id;
    int compressor = wire_command_compressible(&c->pending.cmd) ? c->pending.compressor : -1;
    wire_reply_append(&frame, &c->pending, id, body, WIRE_MSG_MORE_TO_COME, compressor);
    c->pending.request_id = id; /* the next streamed reply responds to this one */
    conn_send(c, &frame);
}

/* The command layer's callback for a parked request. */
static void conn_send_parked_reply(cmd_client_t *client, const bson_t *body)
{
    conn_t *c = (conn_t *)((char *)client - offsetof(conn_t, client));
    if (!c->has_pending)
        return;
    if (client->wait_lsn && !journal_is_durable(client->wait_lsn, client->wait_sync) &&
        !c->closing &&
        !(c->pending.opcode == WIRE_OP_MSG && (c->pending.flags & WIRE_MSG_MORE_TO_COME))) {
        /* a woken request wrote (a lock's token): hold the reply until its
         * log record is durable, as conn_run does */
        c->held_reply = bson_copy(body);
        c->waiter.lsn = client->wait_lsn;
        c->waiter.sync = client->wait_sync;
        c->waiter.done = conn_on_durable;
        journal_wait(&c->waiter);
        return;
    }
    conn_reply(c, &c->pending, body);
    wire_request_destroy(&c->pending);
    c->has_pending = false;
    if (!c->closing)
        conn_process(c);
}

/* The command layer's callback: run the parked request again (a lock it
 * waited for was released, or its wait timed out). */
static void conn_rerun_parked(cmd_client_t *client)
{
    conn_t *c = (conn_t *)((char *)client - offsetof(conn_t, client));
    if (!c->has_pending || c->closing)
        return;
    if (!conn_run(c)) {
        conn_close(c, NULL);
        return;
    }
    if (!c->has_pending && !c->closing)
        conn_process(c);
}

/* One emptied reply document kept for the next request (conn_run). */
static bson_t *conn_reply_spare;

/* Empties `reply` and keeps it as the spare, or frees it (a large reply's
 * buffer is not held on to). */
static void conn_reply_release(bson_t *reply)
{
    if (!conn_reply_spare && reply->len <= 4096) {
        bson_reinit(reply);
        conn_reply_spare = reply;
        return;
    }
    bson_destroy(reply);
}

/* The held reply's log record is durable (or failed): answer and go on. */
static void conn_on_durable(journal_waiter_t *w, bool ok, const char *errmsg)
{
    conn_t *c = (conn_t *)((char *)w - offsetof(conn_t, waiter));
    bson_t *reply = c->held_reply;
    c->held_reply = NULL;
    if (ok) {
        conn_reply(c, &c->pending, reply);
    } else {
        dberr_t err;
        dberr_set(&err, 42, "the write was applied but could not be made durable: %s", errmsg);
        bson_t body = BSON_INITIALIZER;
        cmd_error_reply(&body, &err);
        conn_reply(c, &c->pending, &body);
        bson_destroy(&body);
    }
    conn_reply_release(reply);
    wire_request_destroy(&c->pending);
    c->has_pending = false;
    if (!c->closing)
        conn_process(c);
}

/* Runs the request parsed into c->pending. False when the connection must
 * close. The request stays in c->pending while parked (a bson_t must not be
 * moved once built). */
static bool conn_run(conn_t *c)
{
    /* the reply buffer of the previous request, emptied: a reply with
     * $clusterTime outgrows bson_t's inline bytes, and this saves its
     * malloc/free per request */
    bson_t *reply = conn_reply_spare ? conn_reply_spare : bson_sized_new(256);
    conn_reply_spare = NULL;
    c->has_pending = true;
    cmd_status_t st = cmd_run(&c->client, &c->pending, reply);
    switch (st) {
    case CMD_REPLIED:
        if (c->client.wait_lsn && !journal_is_durable(c->client.wait_lsn, c->client.wait_sync) &&
            !(c->pending.opcode == WIRE_OP_MSG && (c->pending.flags & WIRE_MSG_MORE_TO_COME))) {
            /* hold the reply (and this connection's next requests) until
             * the log record is durable (it takes the reply over) */
            c->held_reply = reply;
            c->waiter.lsn = c->client.wait_lsn;
            c->waiter.sync = c->client.wait_sync;
            c->waiter.done = conn_on_durable;
            journal_wait(&c->waiter);
            return true;
        }
        conn_reply(c, &c->pending, reply);
        wire_request_destroy(&c->pending);
        c->has_pending = false;
        break;
    case CMD_PARKED:
        break;
    case CMD_CLOSE:
        wire_request_destroy(&c->pending);
        c->has_pending = false;
        conn_reply_release(reply);
        return false;
    }
    conn_reply_release(reply);
    return true;
}

/* Cuts and runs every whole frame buffered, until one parks. */
static void conn_process(conn_t *c)
{
    size_t off = 0;
    /* a client that does not read its replies: run nothing more until they
     * drain (the requests stay buffered), so memory stays bounded */
    while (!c->closing && !c->has_pending && !c->read_paused) {
        dberr_t err;
        dberr_clear(&err);
        int32_t len = 0;
        wire_frame_status_t fs = wire_frame_peek(c->in.data + off, c->in.len - off, &len, &err);
        if (fs == WIRE_FRAME_NEED_MORE)
            break;
        if (fs == WIRE_FRAME_BAD) {
            conn_close(c, err.msg);
            return;
        }
        wire_request_t *req = &c->pending;
        server.net_requests++;
        wire_parse_status_t ps = wire_request_parse(c->in.data + off, (size_t)len, req, &err);
        off += (size_t)len;
        if (ps == WIRE_PARSE_CLOSE) {
            wire_request_destroy(req);
            conn_close(c, err.msg);
            return;
        }
        if (ps == WIRE_PARSE_REPLY_ERROR) {
            log_info("NETWORK", "connection %lld: bad request: %s", (long long)c->client.id,
                     err.msg);
            if (!(req->opcode == WIRE_OP_MSG && (req->flags & WIRE_MSG_MORE_TO_COME))) {
                buf_t frame;
                buf_init(&frame);
                wire_error_reply_append(&frame, req, ++c->last_reply_id, &err, req->compressor);
                conn_send(c, &frame);
            }
            wire_request_destroy(req);
            continue;
        }
        if (!conn_run(c)) {
            conn_close(c, NULL);
            return;
        }
    }
    if (!c->closing) {
        buf_consume(&c->in, off);
        if (c->in.len == 0 && c->raw.len == 0)
            c->partial_since = 0;
        else if (off > 0) /* the frame after the ones run began arriving now, at the latest */
            c->partial_since = uv_now(c->tcp.loop);
    }
}

/* Idle connections keep no read buffer beyond this. */
#define CONN_IDLE_BUFFER 4096

void conn_sweep(conn_t *c, uint64_t now)
{
    if (c->closing)
        return;
    uint64_t limit = (uint64_t)server.frame_timeout_s * 1000;
    bool partial = c->in.len > 0 || c->raw.len > 0; /* a frame, or a TLS record */
    if (partial && c->partial_since && !c->has_pending && !c->read_paused &&
        now - c->partial_since > limit) {
        char why[128];
        snprintf(why, sizeof why,
                 "a request frame did not arrive whole within %d s (atomdbFrameTimeoutSecs)",
                 (int)server.frame_timeout_s);
        log_warn("NETWORK", "connection %lld from %s: %s", (long long)c->client.id,
                 c->client.remote, why);
        conn_close(c, why);
        return;
    }
    if (c->in.len == 0 && c->in.cap > CONN_IDLE_BUFFER && now - c->last_read >= 1000) {
        buf_destroy(&c->in);
        buf_init(&c->in);
    }
}

static void conn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
    conn_t *c = h->data;
    buf_t *b = c->tls_state == CONN_PLAIN ? &c->in : &c->raw;
    buf_reserve(b, CONN_READ_CHUNK);
    *out = uv_buf_init((char *)b->data + b->len, (unsigned)(b->cap - b->len));
}

/* Bytes arrived on a connection that may speak TLS: decide from the first
 * byte (a TLS handshake record is 0x16; a wire frame starts with its
 * length), then decrypt into c->in. False when the connection closed. */
static bool conn_tls_input(conn_t *c)
{
    if (c->tls_state == CONN_TLS_UNDECIDED) {
        if (c->raw.len == 0)
            return true;
        if (c->raw.data[0] != 0x16) {
            if (tls_mode() == TLS_REQUIRE) {
                conn_close(c, "plaintext connection refused: the server runs with --tlsMode "
                              "requireTLS");
                return false;
            }
            c->tls_state = CONN_PLAIN;
            buf_append(&c->in, c->raw.data, c->raw.len);
            buf_destroy(&c->raw);
            buf_init(&c->raw);
            return true;
        }
        c->tls = tls_session_new();
        if (!c->tls) {
            conn_close(c, "cannot start a TLS session");
            return false;
        }
        c->tls_state = CONN_TLS;
    }
    buf_t out;
    buf_init(&out);
    char why[300];
    bool was_ready = tls_session_ready(c->tls);
    bool ok = tls_session_read(c->tls, c->raw.data, c->raw.len, &c->in, &out, why, sizeof why);
    c->raw.len = 0;
    conn_send_raw(c, &out);
    if (!ok) {
        conn_close(c, why);
        return false;
    }
    if (!was_ready && tls_session_ready(c->tls))
        log_debug("NETWORK", "connection %lld: %s established", (long long)c->client.id,
                  tls_session_version(c->tls));
    return true;
}

static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    conn_t *c = s->data;
    if (nread < 0) {
        conn_close(c, nread == UV_EOF ? NULL : uv_strerror((int)nread));
        return;
    }
    uint64_t now = uv_now(c->tcp.loop);
    if (c->in.len == 0 && c->raw.len == 0 && nread > 0)
        c->partial_since = now; /* a frame (or, over TLS, a record) begins */
    c->last_read = now;
    if (c->tls_state == CONN_PLAIN) {
        c->in.len += (size_t)nread;
    } else {
        c->raw.len += (size_t)nread;
        if (!conn_tls_input(c))
            return;
    }
    server.net_bytes_in += (int64_t)nread;
    conn_process(c);
}

void conn_start_reading(conn_t *c)
{
    uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read);
}

static void conn_format_addr(const struct sockaddr_storage *sa, char *out, size_t size,
                             bool *is_local)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    bool local = false;
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        uv_ip4_name(in, host, sizeof host);
        port = ntohs(in->sin_port);
        local = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        uv_ip6_name(in6, host, sizeof host);
        port = ntohs(in6->sin6_port);
        local = strcmp(host, "::1") == 0 || strncmp(host, "::ffff:127.", 11) == 0;
    }
    snprintf(out, size, "%s:%d", host, port);
    if (is_local)
        *is_local = local;
}

conn_t *conn_accept(uv_stream_t *listener)
{
    conn_t *c = bson_malloc0(sizeof *c);
    uv_tcp_init(listener->loop, &c->tcp);
    c->tcp.data = c;
    buf_init(&c->in);
    buf_init(&c->raw);
    c->tls_state = tls_mode() == TLS_DISABLED ? CONN_PLAIN : CONN_TLS_UNDECIDED;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, conn_on_closed);
        return NULL;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    /* half-open connections (a peer that vanished without a FIN) are found
     * by TCP keepalive, probing after 300 s idle as mongod does */
    uv_tcp_keepalive(&c->tcp, 1, 300);
    struct sockaddr_storage sa;
    int salen = sizeof sa;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &salen) == 0)
        conn_format_addr(&sa, c->client.remote, sizeof c->client.remote, &c->client.is_local);
    salen = sizeof sa;
    if (uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&sa, &salen) == 0)
        conn_format_addr(&sa, c->client.local, sizeof c->client.local, NULL);
    c->client.id = ++server.next_connection_id;
    c->client.send_parked_reply = conn_send_parked_reply;
    c->client.rerun_parked = conn_rerun_parked;
    c->client.send_stream_reply = conn_send_stream_reply;
    server.connections_current++;
    server.connections_total++;
    conn_list_add(c);
    log_event_n(LOG_INFO, "NETWORK",
                &(log_line_opts_t){.id = 22943, .ctx = "listener", .routine = true},
                "Connection accepted",
                (const log_attr_t[]){LOG_STR("remote", c->client.remote),
                                     LOG_BOOL("isLoadBalanced", false),
                                     LOG_INT("connectionId", c->client.id),
                                     LOG_INT("connectionCount", server.connections_current)},
                4);
    conn_start_reading(c);
    return c;
}
