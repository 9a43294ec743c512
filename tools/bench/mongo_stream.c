/* mongo_stream: a blocking, buffered TCP stream for libmongoc, installed
 * with mongoc_client_set_stream_initiator (`--mongoc-stream blocking`).
 *
 * libmongoc's own socket stream is non-blocking: every reply costs a
 * recv() that fails with EAGAIN, a poll() that sleeps, then one recv() for
 * the 4-byte length and one for the rest. This stream reads like hiredis:
 * one blocking recv() into a 64 KiB buffer serves the header and the body.
 * It changes nothing the server sees; it lets the bench show how much of
 * libmongoc's client cost is its transport (docs/benchmarks.md). */
#include "mongo_stream.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MSTREAM_TYPE 0x6164 /* not one of libmongoc's own stream types */
#define MSTREAM_BUF (64 * 1024)
#define MSTREAM_TIMEOUT_S 30

typedef struct mstream {
    mongoc_stream_t base; /* first: libmongoc sees a mongoc_stream_t */
    int fd;
    bool timed_out;
    size_t off, len; /* unread bytes are buf[off, len) */
    uint8_t buf[MSTREAM_BUF];
} mstream_t;

static int mstream_close(mongoc_stream_t *s)
{
    mstream_t *m = (mstream_t *)s;
    int rc = 0;
    if (m->fd >= 0)
        rc = close(m->fd);
    m->fd = -1;
    return rc;
}

static void mstream_destroy(mongoc_stream_t *s)
{
    mstream_close(s);
    free(s);
}

static int mstream_flush(mongoc_stream_t *s)
{
    return 0;
}

static ssize_t mstream_writev(mongoc_stream_t *s, mongoc_iovec_t *iov, size_t iovcnt,
                              int32_t timeout_msec)
{
    mstream_t *m = (mstream_t *)s;
    size_t total = 0;
    for (size_t i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    size_t done = 0;
    struct iovec local[16];
    while (done < total) {
        /* rebuild the iovec past what was already sent */
        size_t skip = done, n = 0;
        for (size_t i = 0; i < iovcnt && n < 16; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            local[n].iov_base = (char *)iov[i].iov_base + skip;
            local[n].iov_len = iov[i].iov_len - skip;
            skip = 0;
            n++;
        }
        struct msghdr msg = {.msg_iov = local, .msg_iovlen = n};
        ssize_t w = sendmsg(m->fd, &msg, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            m->timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

/* One blocking recv() into the buffer. False on error or end of stream. */
static bool mstream_fill(mstream_t *m)
{
    for (;;) {
        ssize_t r = recv(m->fd, m->buf, sizeof m->buf, 0);
        if (r > 0) {
            m->off = 0;
            m->len = (size_t)r;
            return true;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            m->timed_out = true;
            errno = ETIMEDOUT;
        }
        return false;
    }
}

static ssize_t mstream_readv(mongoc_stream_t *s, mongoc_iovec_t *iov, size_t iovcnt,
                             size_t min_bytes, int32_t timeout_msec)
{
    mstream_t *m = (mstream_t *)s;
    size_t got = 0;
    for (size_t i = 0; i < iovcnt; i++) {
        size_t at = 0;
        while (at < iov[i].iov_len) {
            if (m->off == m->len) {
                /* read only while min_bytes is unmet; a caller asking for
                 * "whatever is there" (min 0) gets one read */
                if (got >= min_bytes && (got > 0 || min_bytes > 0))
                    return (ssize_t)got;
                if (!mstream_fill(m))
                    return got ? (ssize_t)got : -1;
            }
            size_t n = m->len - m->off;
            if (n > iov[i].iov_len - at)
                n = iov[i].iov_len - at;
            memcpy((char *)iov[i].iov_base + at, m->buf + m->off, n);
            m->off += n;
            at += n;
            got += n;
        }
    }
    return (ssize_t)got;
}

static int mstream_setsockopt(mongoc_stream_t *s, int level, int optname, void *optval,
                              mongoc_socklen_t optlen)
{
    return setsockopt(((mstream_t *)s)->fd, level, optname, optval, optlen);
}

static bool mstream_check_closed(mongoc_stream_t *s)
{
    mstream_t *m = (mstream_t *)s;
    if (m->fd < 0)
        return true;
    if (m->off < m->len)
        return false;
    char c;
    ssize_t r = recv(m->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static ssize_t mstream_poll(mongoc_stream_poll_t *streams, size_t nstreams, int32_t timeout)
{
    struct pollfd fds[64];
    if (nstreams > 64)
        nstreams = 64;
    ssize_t ready = 0;
    for (size_t i = 0; i < nstreams; i++) {
        mstream_t *m = (mstream_t *)streams[i].stream;
        fds[i].fd = m->fd;
        fds[i].events = (short)streams[i].events;
        fds[i].revents = 0;
        streams[i].revents = 0;
        if ((streams[i].events & POLLIN) && m->off < m->len) {
            streams[i].revents = POLLIN; /* already buffered */
            ready++;
        }
    }
    if (ready)
        return ready;
    int rc = poll(fds, nstreams, timeout);
    if (rc <= 0)
        return rc;
    for (size_t i = 0; i < nstreams; i++)
        streams[i].revents = fds[i].revents;
    return rc;
}

static void mstream_failed(mongoc_stream_t *s)
{
    mstream_destroy(s);
}

static bool mstream_timed_out(mongoc_stream_t *s)
{
    return ((mstream_t *)s)->timed_out;
}

static bool mstream_should_retry(mongoc_stream_t *s)
{
    return false;
}

mongoc_stream_t *mongo_stream_initiator(const mongoc_uri_t *uri, const mongoc_host_list_t *host,
                                        void *user_data, bson_error_t *error)
{
    char port[16];
    snprintf(port, sizeof port, "%u", (unsigned)host->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host->host, port, &hints, &res);
    if (rc != 0) {
        bson_set_error(error, MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_NAME_RESOLUTION,
                       "cannot resolve %s: %s", host->host, gai_strerror(rc));
        return NULL;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        bson_set_error(error, MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_CONNECT,
                       "cannot connect to %s: %s", host->host_and_port, strerror(errno));
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {MSTREAM_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

    mstream_t *m = calloc(1, sizeof *m);
    if (!m) {
        close(fd);
        bson_set_error(error, MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_SOCKET, "out of memory");
        return NULL;
    }
    m->fd = fd;
    m->base.type = MSTREAM_TYPE;
    m->base.destroy = mstream_destroy;
    m->base.close = mstream_close;
    m->base.flush = mstream_flush;
    m->base.writev = mstream_writev;
    m->base.readv = mstream_readv;
    m->base.setsockopt = mstream_setsockopt;
    m->base.check_closed = mstream_check_closed;
    m->base.poll = mstream_poll;
    m->base.failed = mstream_failed;
    m->base.timed_out = mstream_timed_out;
    m->base.should_retry = mstream_should_retry;
    return &m->base;
}
