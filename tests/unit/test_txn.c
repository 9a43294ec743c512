/* test_txn: the lock manager (src/txn/lockmgr.c) and deadlock detection
 * (txn_deadlock_victim) — exclusive document locks, waiters woken when the
 * holder finishes or their deadline passes, and the youngest transaction on
 * a wait-for cycle chosen as the victim — and the session checkout
 * (src/txn/session.c): what would end a session or its transaction while
 * a statement holds it is recorded and done at check-in. */
#include <string.h>

#include "txn/lockmgr.h"
#include "txn/session.h"
#include "txn/txn.h"
#include "util/fiber.h"
#include "unit.h"

static void key_of(int id, buf_t *out)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT32};
    v.value.v_int32 = id;
    buf_init(out);
    lockmgr_key("db", "c", &v, out);
}

typedef struct waiter {
    lock_waiter_t w;
    int woken;
    bool timed_out;
} waiter_t;

static void on_wake(lock_waiter_t *lw, bool timed_out)
{
    waiter_t *w = (waiter_t *)lw;
    w->woken++;
    w->timed_out = timed_out;
}

static void test_a_lock_is_exclusive_until_its_holder_releases_it(void)
{
    txn_t *a = txn_new(1, 0), *b = txn_new(2, 0), *holder = NULL;
    buf_t k;
    key_of(1, &k);
    CHECK(lockmgr_acquire(&k, a, NULL), "a takes the lock");
    CHECK(lockmgr_acquire(&k, a, NULL), "a taking it again is fine");
    CHECK(!lockmgr_acquire(&k, b, &holder) && holder == a, "b is refused and told a holds it");
    CHECK(!lockmgr_acquire(&k, NULL, &holder), "a write outside a transaction is refused too");
    CHECK(lockmgr_holder(&k) == a && lockmgr_count() == 1, "one lock, held by a");
    lockmgr_release_all(a);
    CHECK(lockmgr_holder(&k) == NULL && lockmgr_count() == 0, "released: no lock left");
    CHECK(lockmgr_acquire(&k, b, NULL), "b takes it now");
    lockmgr_release_all(b);
    buf_destroy(&k);
    txn_destroy(a);
    txn_destroy(b);
}

static void test_releasing_wakes_the_waiters_in_arrival_order(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    txn_t *a = txn_new(1, 0), *b = txn_new(2, 0);
    buf_t k;
    key_of(2, &k);
    lockmgr_acquire(&k, a, NULL);
    waiter_t w1 = {.w = {.txn = b, .wake = on_wake}}, w2 = {.w = {.wake = on_wake}};
    lockmgr_wait(&w1.w, &k, -1, &loop);
    lockmgr_wait(&w2.w, &k, -1, &loop);
    CHECK(txn_waiting_for(b) == a, "b waits for a");
    CHECK(w1.woken == 0 && w2.woken == 0, "nobody woken while a holds the lock");
    lockmgr_release_all(a);
    CHECK(w1.woken == 1 && !w1.timed_out && w2.woken == 1 && !w2.timed_out,
          "both woken once by the release, not by a deadline");
    CHECK(txn_waiting_for(b) == NULL, "b no longer waits");
    buf_destroy(&k);
    txn_destroy(a);
    txn_destroy(b);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

static void test_a_waiter_with_a_deadline_times_out(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    txn_t *a = txn_new(1, 0);
    buf_t k;
    key_of(3, &k);
    lockmgr_acquire(&k, a, NULL);
    waiter_t w = {.w = {.wake = on_wake}};
    lockmgr_wait(&w.w, &k, 5, &loop);
    uv_run(&loop, UV_RUN_ONCE);
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(w.woken == 1 && w.timed_out, "woken once, by the deadline");
    CHECK(lockmgr_holder(&k) == a, "a still holds the lock");
    lockmgr_release_all(a);
    CHECK(w.woken == 1, "the release does not wake a waiter that already left");
    CHECK(w.w.timer == NULL, "the timer was closed when it fired");
    uv_run(&loop, UV_RUN_DEFAULT);
    buf_destroy(&k);
    txn_destroy(a);
    uv_loop_close(&loop);
}

static void test_a_wait_that_closes_a_cycle_picks_the_youngest_as_victim(void)
{
    txn_t *t1 = txn_new(10, 0), *t2 = txn_new(20, 0), *t3 = txn_new(30, 0);
    /* t1 waits for t2, t2 for t3: a chain, no cycle yet */
    txn_set_waiting_for(t1, t2);
    txn_set_waiting_for(t2, t3);
    CHECK(txn_deadlock_victim(t1, t3) == NULL,
          "t1 waiting for t3 closes no cycle (t3 waits for nobody)");
    /* t3 waiting for t1 would close t3 -> t1 -> t2 -> t3 */
    CHECK(txn_deadlock_victim(t3, t1) == t3, "the youngest (highest age) on the cycle is t3");
    txn_set_waiting_for(t2, NULL);
    CHECK(txn_deadlock_victim(t3, t1) == NULL, "with t2 no longer waiting there is no cycle");
    /* two transactions waiting for each other */
    txn_set_waiting_for(t2, t1);
    CHECK(txn_deadlock_victim(t1, t2) == t2,
          "t1 waiting for t2 (which waits for t1): t2 is younger");
    txn_set_waiting_for(t1, NULL);
    txn_set_waiting_for(t2, NULL);
    txn_destroy(t1);
    txn_destroy(t2);
    txn_destroy(t3);
}


static void nothing(void *arg)
{
    (void)arg;
}

/* A session with transaction 1 in progress, checked out by fiber *f. */
static session_t *checked_out_session(uint8_t id[16], fiber_t **f)
{
    static uint8_t next = 1;
    memset(id, 0, 16);
    id[0] = next++;
    session_t *s = session_get(id, 1000);
    session_begin_txn(s, 1, 1000);
    *f = fiber_new(nothing, NULL);
    session_checkout(s, *f);
    return s;
}

static void test_ending_a_checked_out_session_waits_for_its_check_in(void)
{
    uint8_t id[16];
    fiber_t *f;
    session_t *s = checked_out_session(id, &f);
    session_end(id);
    CHECK(session_find(id) == s && s->state == SESSION_TXN_IN_PROGRESS && s->txn,
          "the session and its transaction stay while the statement holds them");
    CHECK(fiber_killed(f), "the statement is interrupted at its next check");
    dberr_t err;
    dberr_clear(&err);
    CHECK(!session_checkin(s, &err) && err.code == DBERR_INTERRUPTED,
          "its check-in reports Interrupted (got %d)", err.code);
    CHECK(s->state == SESSION_TXN_ABORTED && !s->txn, "the transaction is aborted at check-in");
    CHECK(session_end_pending(s) && !session_find(id), "then the session ends");
    fiber_destroy(f);
}

static void test_an_abort_from_elsewhere_interrupts_the_statement_with_251(void)
{
    uint8_t id[16];
    fiber_t *f;
    session_t *s = checked_out_session(id, &f);
    session_abort_txn(s, "it was chosen to break a deadlock");
    CHECK(s->state == SESSION_TXN_IN_PROGRESS && s->txn && fiber_killed(f),
          "the abort waits for the statement, which is interrupted");
    dberr_t err;
    dberr_clear(&err);
    CHECK(!session_checkin(s, &err) && err.code == DBERR_NO_SUCH_TRANSACTION &&
              (err.labels & DBERR_LABEL_TRANSIENT_TXN),
          "the statement ends with NoSuchTransaction, TransientTransactionError (got %d)",
          err.code);
    CHECK(s->state == SESSION_TXN_ABORTED && strstr(s->abort_reason, "deadlock"),
          "the transaction is aborted with the reason given");
    CHECK(!session_end_pending(s) && session_find(id) == s, "the session itself goes on");
    session_end(id);
    fiber_destroy(f);
}

static void test_the_lifetime_limit_interrupts_a_running_statement_with_290(void)
{
    uint8_t id[16];
    fiber_t *f;
    session_t *s = checked_out_session(id, &f);
    int64_t later = 1000 + 3600 * 1000; /* past the lifetime and the idle timeout */
    session_reap(later, 60);
    CHECK(session_find(id) == s, "a checked-out session is in use, never expired as idle");
    CHECK(s->state == SESSION_TXN_IN_PROGRESS && fiber_killed(f),
          "the transaction waits for its statement, which is interrupted");
    dberr_t err;
    dberr_clear(&err);
    CHECK(!session_checkin(s, &err) && err.code == DBERR_TRANSACTION_EXCEEDED_LIFETIME,
          "the statement ends with TransactionExceededLifetimeLimitSeconds (got %d)", err.code);
    CHECK(s->state == SESSION_TXN_ABORTED, "and the transaction is aborted");
    session_end(id);
    fiber_destroy(f);
}

static void test_a_statement_nothing_interrupted_checks_in_cleanly(void)
{
    uint8_t id[16];
    fiber_t *f;
    session_t *s = checked_out_session(id, &f);
    dberr_t err;
    dberr_clear(&err);
    CHECK(session_checkin(s, &err) && !fiber_killed(f) && s->state == SESSION_TXN_IN_PROGRESS,
          "check-in succeeds and the transaction goes on");
    session_end(id);
    CHECK(!session_find(id), "an idle session ends at once");
    fiber_destroy(f);
}

int main(void)
{
    UNIT_RUN(test_a_lock_is_exclusive_until_its_holder_releases_it);
    UNIT_RUN(test_releasing_wakes_the_waiters_in_arrival_order);
    UNIT_RUN(test_a_waiter_with_a_deadline_times_out);
    UNIT_RUN(test_a_wait_that_closes_a_cycle_picks_the_youngest_as_victim);
    UNIT_RUN(test_ending_a_checked_out_session_waits_for_its_check_in);
    UNIT_RUN(test_an_abort_from_elsewhere_interrupts_the_statement_with_251);
    UNIT_RUN(test_the_lifetime_limit_interrupts_a_running_statement_with_290);
    UNIT_RUN(test_a_statement_nothing_interrupted_checks_in_cleanly);
    return unit_finish();
}
