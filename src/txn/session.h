/* session: logical sessions (lsid) — the table of live sessions, each with
 * its transaction number and state, the durable record of retryable writes
 * (collection config.transactions, written in the same log record as the
 * write it describes), expiry after logicalSessionTimeoutMinutes, and the
 * transaction lifetime limit. */
#ifndef ATOMDB_SESSION_H
#define ATOMDB_SESSION_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/catalog.h"
#include "txn/txn.h"
#include "util/dberr.h"
#include "util/fiber.h"

#define SESSION_TIMEOUT_MINUTES 30

/* Where a session's transaction stands. */
typedef enum session_txn_state {
    SESSION_TXN_NONE,
    SESSION_TXN_IN_PROGRESS,
    SESSION_TXN_COMMITTED,
    SESSION_TXN_ABORTED,
} session_txn_state_t;

typedef struct session {
    uint8_t id[16];              /* lsid.id */
    int64_t last_used_ms;
    int64_t txn_number;          /* highest txnNumber seen, -1 when none */
    session_txn_state_t state;   /* of transaction txn_number */
    txn_t *txn;                  /* while in progress */
    char abort_reason[200];      /* why it was aborted, when the server did it */
    int64_t noop_txn;            /* the retryable write that changed nothing ... */
    bson_t *noop_reply;          /* ... and its reply (memory only), or NULL */
    int64_t txn_opid;            /* currentOp's opid for the transaction while it is
                                  * idle (cmd/op.c assigns it), 0: none yet */
    uint64_t txn_active_ns;      /* time the transaction's statements ran */
    char txn_read_concern[24];   /* readConcern level its first statement gave, "" */
    /* -- checkout: a statement of the session that may yield (a
     * transaction's statement, a retryable batch) holds the session while
     * it runs; another request on it waits, and what would end the
     * session or its transaction meanwhile is recorded and done when the
     * statement checks in (docs/concurrency.md "Transactions in slices") */
    fiber_t *checkout;           /* the fiber running it, or NULL: idle */
    int kill_code;               /* the statement must end with this error, 0: no */
    char kill_msg[160];          /* ... and this message */
    char kill_abort[200];        /* why its transaction is then aborted */
    bool end_pending;            /* the session ends when the statement checks in */
    uint64_t owner;              /* under --auth: the user who first used it (an
                                  * opaque id, cmd/access.c), 0: not yet */
} session_t;

/* Marks `s` in use by the statement running on fiber `f` (which may
 * yield): until session_checkin, session_end, session_abort_txn and
 * session_reap only record what they would do and interrupt `f`. */
void session_checkout(session_t *s, fiber_t *f);

/* The statement of `s` ended. False with `err` (the code and message the
 * kill recorded) when something ended the session or its transaction
 * while it ran: the transaction is then aborted here. A pending session
 * end is left to session_end_pending, once the reply is built. */
bool session_checkin(session_t *s, dberr_t *err);

/* Ends `s` when an end arrived while it was checked out; true when it did
 * (`s` is then freed). */
bool session_end_pending(session_t *s);

/* Reads lsid.id from the `lsid` document. False with err when malformed. */
bool session_parse_lsid(const bson_iter_t *lsid, uint8_t id[16], dberr_t *err);

/* The session `id`, created when missing; its last use is now. */
session_t *session_get(const uint8_t id[16], int64_t now_ms);

/* The session `id` or NULL. */
session_t *session_find(const uint8_t id[16]);

/* Ends a session: aborts its transaction, releases its locks and leases,
 * forgets it. A checked-out session's statement is interrupted
 * (Interrupted 11601) and the session ends when it checks in. */
void session_end(const uint8_t id[16]);

/* Ends every session. */
void session_end_all(void);

/* Starts transaction `number` on `s` (aborting an older one in progress). */
void session_begin_txn(session_t *s, int64_t number, int64_t now_ms);

/* Aborts the transaction in progress (if any), remembering `reason`.
 * While a statement has the session checked out (and the caller is not
 * that statement), the statement is interrupted with NoSuchTransaction
 * (251) and the abort happens when it checks in. */
void session_abort_txn(session_t *s, const char *reason);

/* Interrupts the statement that has `s` checked out with `code` and `msg`
 * and, when it checks in, aborts its transaction for `why` (nothing when
 * `s` is idle or already interrupted). */
void session_interrupt(session_t *s, int code, const char *msg, const char *why);

/* Expires idle sessions and aborts transactions past `lifetime_s` (a
 * checked-out session is in use, not idle; its transaction past the limit
 * has its statement interrupted with TransactionExceededLifetimeLimitSeconds
 * (290)). */
void session_reap(int64_t now_ms, int64_t lifetime_s);

/* The stored reply of retryable write (`id`, `txn_number`), copied into
 * `reply` (initialised); returns 1 when found, 0 when this number is new
 * (nothing stored for it), 2 when it was begun and not finished (its
 * progress, if any, is in session_retry_progress), -1 with
 * TransactionTooOld in err when a newer number was already used. */
int session_retry_lookup(catalog_t *cat, const uint8_t id[16], int64_t txn_number, bson_t *reply,
                         dberr_t *err);

/* Durably records `reply` as the outcome of retryable write (`id`,
 * `txn_number`) — call it inside the command, so the record and the write
 * share one log record. */
bool session_retry_record(catalog_t *cat, const uint8_t id[16], int64_t txn_number,
                          const bson_t *reply, dberr_t *err);

/* Durably records that retryable write (`id`, `txn_number`), a batch,
 * has run its first `stmts_done` statements with result `partial` (n,
 * writeErrors): written before the batch gives the loop back, so it
 * shares a log record with those statements' writes. A retry (after a
 * crash, a kill or a disconnect) runs only the statements after them, as
 * mongod does with its per-statement records; session_retry_lookup does
 * not answer from it. */
bool session_retry_progress_record(catalog_t *cat, const uint8_t id[16], int64_t txn_number,
                                   uint32_t stmts_done, const bson_t *partial, dberr_t *err);
/* The progress session_retry_progress_record left for (`id`,
 * `txn_number`): its statement count and partial result (appended to
 * `partial`, initialised). False when there is none. */
bool session_retry_progress(catalog_t *cat, const uint8_t id[16], int64_t txn_number,
                            uint32_t *stmts_done, bson_t *partial);

/* Remembers, in memory only, `reply` as the outcome of retryable write
 * `txn_number` that changed nothing: a retry in this process gets the
 * same reply; one after a restart runs it again, which is harmless since
 * the first run wrote nothing. Saves the durable record and the log write
 * a sold-out flash sale would otherwise pay on every attempt. */
void session_retry_remember(session_t *s, int64_t txn_number, const bson_t *reply);

/* The remembered reply of no-op retryable write `txn_number` appended to
 * `reply`; false when there is none. */
bool session_retry_recall(const session_t *s, int64_t txn_number, bson_t *reply);

/* Calls `fn` for every live session. */
void session_foreach(void (*fn)(const session_t *s, void *ctx), void *ctx);

/* Number of live sessions and of transactions in progress. */
size_t session_count(void);
size_t session_active_txns(void);

/* Called when a session ends (for lease locks taken with it). */
void session_set_end_hook(void (*hook)(const uint8_t id[16]));

#endif
