/* lease: the lock table behind acquireLock / renewLock / releaseLock —
 * named leases with fencing tokens, first-come first-served wait queues of
 * parked requests, and expiry by the monotonic clock. Tokens strictly
 * increase per name, across restarts: the last one issued is written to
 * config.atomdb.leases, so the journal logs it like any other document.
 * Loop thread only. See docs/locks.md. */
#ifndef ATOMDB_LEASE_H
#define ATOMDB_LEASE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "store/catalog.h"
#include "util/dberr.h" /* DBERR_STALE_FENCING_TOKEN: refused fence, renew, release */

/* Where the last token of every lock name is kept: {_id: name, token}. */
#define LEASE_DB "config"
#define LEASE_COLL "atomdb.leases"

/* Longest lock name, owner string and session id accepted, in bytes. */
#define LEASE_NAME_MAX 1024
#define LEASE_OWNER_MAX 1024
#define LEASE_LSID_MAX 64

/* What an acquire asks for. Strings are borrowed for the call. */
typedef struct lease_request {
    const char *name;            /* lock name, 1..LEASE_NAME_MAX bytes, no NUL */
    const char *owner;           /* who holds it, 1..LEASE_OWNER_MAX bytes */
    int64_t lease_ms;            /* > 0 */
    int64_t wait_ms;             /* >= 0; 0 answers at once */
    const uint8_t *lsid;         /* the session's id bytes, or NULL */
    uint32_t lsid_len;           /* <= LEASE_LSID_MAX */
    int64_t conn_id;             /* the connection the request came on */
    bool release_on_disconnect;  /* release when that connection closes */
    bool sync;                   /* handed back in the grant (the caller's j: true) */
} lease_request_t;

/* A granted (or refused) acquire. */
typedef struct lease_grant {
    bool acquired;
    int64_t token;      /* the fencing token, when acquired */
    int64_t expires;    /* lease end, lease_now_ms() clock */
    uint64_t lsn;       /* log record that made the token durable; 0 when
                         * the caller's own command seals it (immediate grants) */
    bool sync;          /* copied from the request */
} lease_grant_t;

/* Called once when a parked acquire ends: granted, timed out (acquired
 * false), never both. Not called for waiters cancelled by
 * lease_connection_closed. May be called from inside any lease_* call or
 * from the module's timer; the lock table is consistent when it runs, and
 * it may call lease_* functions itself. */
typedef void (*lease_wake_fn)(void *ctx, const lease_grant_t *grant);

/* What lease_acquire did. */
typedef enum lease_status {
    LEASE_GRANTED, /* *out holds the token */
    LEASE_BUSY,    /* held by another owner and wait_ms was 0 */
    LEASE_PARKED,  /* queued: `wake` will be called with the outcome */
    LEASE_FAILED,  /* bad request or the token could not be stored: see err */
} lease_status_t;

/* How many waiters lease_info_t names. */
#define LEASE_INFO_QUEUE 8

/* One lock as lockInfo / listLocks show it. Strings borrowed until the
 * next lease_* call. */
typedef struct lease_info {
    const char *name;
    bool held;                   /* a holder whose lease has not run out */
    const char *owner;           /* when held */
    int64_t token;               /* last token issued, 0 when never */
    int64_t expires;             /* when held: lease end, lease_now_ms() clock */
    int64_t conn_id;             /* when held */
    bool release_on_disconnect;  /* when held */
    const uint8_t *lsid;         /* when held with a session, else NULL */
    uint32_t lsid_len;
    size_t waiting;              /* parked acquires */
    const char *queue[LEASE_INFO_QUEUE]; /* owners of the first parked acquires, oldest first */
    int64_t queue_deadline[LEASE_INFO_QUEUE]; /* ... and when each stops waiting */
    size_t nqueue;
} lease_info_t;

/* Counters since start, for the metrics. */
typedef struct lease_stats {
    int64_t expired;         /* leases that ran out while held */
    int64_t fenced_refused;  /* fenced writes refused for a stale token */
} lease_stats_t;
const lease_stats_t *lease_get_stats(void);

/* Starts the module: the lock table, its timer on `loop`, and where tokens
 * are stored. Call after journal_open (recovery) so stored tokens count. */
void lease_init(uv_loop_t *loop, catalog_t *cat);

/* Stops the timer (shutdown); parked waiters are left to their
 * connections' close. Idempotent. */
void lease_stop(void);

/* Frees the lock table and any waiter left (after the loop ended). */
void lease_destroy(void);

/* The monotonic clock leases run on, in milliseconds. */
int64_t lease_now_ms(void);

/* Checks a lock name (BadValue 2 when empty, too long or holding a NUL). */
bool lease_valid_name(const char *name, uint32_t len, dberr_t *err);

/* Takes `req->name` for `req->owner`: granted at once when free (or when
 * the same owner holds it: the lease restarts, the token stays), else
 * parked behind earlier waiters until a release or expiry reaches it or
 * wait_ms passes. An immediate grant's token write is left for the
 * caller's command to seal; a later grant seals its own log record. */
lease_status_t lease_acquire(const lease_request_t *req, lease_wake_fn wake, void *ctx,
                             lease_grant_t *out, dberr_t *err);

/* Extends the lease of `token` to now + lease_ms and binds it to `lsid`
 * when given. Fails with StaleFencingToken (nothing changes) unless
 * `token` is the current holder's and its lease has not run out. */
bool lease_renew(const char *name, int64_t token, int64_t lease_ms, const uint8_t *lsid,
                 uint32_t lsid_len, int64_t *expires, dberr_t *err);

/* Releases `token` and hands the lock to the next waiter. Fails with
 * StaleFencingToken (nothing changes) unless `token` is the current
 * holder's and its lease has not run out. */
bool lease_release(const char *name, int64_t token, dberr_t *err);

/* True when `token` may fence a write under `name`: it is the current
 * holder's token and the lease has not run out. Otherwise false with
 * StaleFencingToken. Changes nothing. */
bool lease_check_fence(const char *name, int64_t token, dberr_t *err);

/* Fills `out` for `name` (a lock never used reads as free, token 0, or
 * its stored token). */
void lease_get_info(const char *name, lease_info_t *out);

/* Calls `fn` for every lock that is held or waited for, in name order.
 * `fn` must not call lease_* functions. */
void lease_foreach(void (*fn)(const lease_info_t *info, void *arg), void *arg);

/* A connection closed: drops its parked waiters (their wake is not called)
 * and releases the locks it holds with release_on_disconnect. */
void lease_connection_closed(int64_t conn_id);

/* Takes the parked acquire of connection `conn_id` off its queue without
 * calling its wake (killOp answers it). False when none is queued (its
 * outcome may already be on its way). */
bool lease_cancel_wait(int64_t conn_id);

/* A session ended, was killed or expired: releases every lock taken (or
 * last renewed) under that session id. */
void lease_session_ended(const uint8_t *lsid, uint32_t lsid_len);

#endif
