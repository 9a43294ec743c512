/* test_lease: the lock table (src/lease) without a server — tokens that
 * only increase and are stored in config.atomdb.leases, stale tokens that
 * change nothing, fencing, FIFO hand-over with one wake-up per release,
 * wait deadlines, expiry, and release at disconnect and session end. */
#include <string.h>
#include <uv.h>

#include "lease/lease.h"
#include "store/catalog.h"
#include "store/collection.h"
#include "unit.h"

static uv_loop_t *loop;
static catalog_t *cat;

/* What the wake callbacks saw, in order. */
static struct {
    int n;
    int who[16];
    bool acquired[16];
    int64_t token[16];
} woken;

static void on_wake(void *ctx, const lease_grant_t *g)
{
    if (woken.n < 16) {
        woken.who[woken.n] = (int)(intptr_t)ctx;
        woken.acquired[woken.n] = g->acquired;
        woken.token[woken.n] = g->token;
    }
    woken.n++;
}

static void setup(void)
{
    memset(&woken, 0, sizeof woken);
    cat = catalog_new();
    lease_init(loop, cat);
}

static void teardown(void)
{
    lease_stop();
    uv_run(loop, UV_RUN_NOWAIT); /* close the timers */
    lease_destroy();
    catalog_destroy(cat);
}

/* Runs the loop until `n` wake-ups arrived or `ms` passed. */
static void run_until_woken(int n, int ms)
{
    uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000u;
    while (woken.n < n && uv_hrtime() < end) {
        uv_run(loop, UV_RUN_NOWAIT); /* ONCE would block until the next lease deadline */
        uv_sleep(1);
    }
}

static lease_status_t take(const char *name, const char *owner, int64_t lease_ms,
                           int64_t wait_ms, int64_t conn, int who, lease_grant_t *g)
{
    lease_request_t req = {.name = name, .owner = owner, .lease_ms = lease_ms,
                           .wait_ms = wait_ms, .conn_id = conn};
    dberr_t err = {0};
    return lease_acquire(&req, on_wake, (void *)(intptr_t)who, g, &err);
}

static int64_t stored_token(const char *name)
{
    collection_t *c = catalog_get(cat, LEASE_DB, LEASE_COLL);
    if (!c)
        return -1;
    bson_value_t id = {.value_type = BSON_TYPE_UTF8};
    id.value.v_utf8.str = (char *)name;
    id.value.v_utf8.len = (uint32_t)strlen(name);
    record_t *r = collection_find_id(c, &id);
    if (!r)
        return -1;
    bson_t doc;
    bson_iter_t it;
    record_view(r, &doc);
    return bson_iter_init_find(&it, &doc, "token") ? bson_iter_as_int64(&it) : -1;
}

static void test_tokens_increase_per_name_and_are_stored(void)
{
    setup();
    lease_grant_t g;
    dberr_t err = {0};
    CHECK(take("a", "o", 1000, 0, 1, 0, &g) == LEASE_GRANTED && g.token == 1, "first token is 1");
    CHECK(stored_token("a") == 1, "token 1 is stored in config.atomdb.leases");
    CHECK(lease_release("a", 1, &err), "the holder releases");
    CHECK(take("a", "o", 1000, 0, 1, 0, &g) == LEASE_GRANTED && g.token == 2, "next token is 2");
    CHECK(take("b", "o", 1000, 0, 1, 0, &g) == LEASE_GRANTED && g.token == 1,
          "another name counts on its own");
    /* a new table over the same data (a restart) continues from the store */
    lease_stop();
    uv_run(loop, UV_RUN_NOWAIT);
    lease_destroy();
    lease_init(loop, cat);
    lease_info_t info;
    lease_get_info("a", &info);
    CHECK(!info.held && info.token == 2, "after a restart the lock is free and remembers token 2");
    CHECK(take("a", "p", 1000, 0, 1, 0, &g) == LEASE_GRANTED && g.token == 3,
          "the first token after a restart is larger");
    teardown();
}

static void test_stale_tokens_change_nothing(void)
{
    setup();
    lease_grant_t g;
    dberr_t err = {0};
    take("s", "a", 1, 0, 1, 0, &g);
    uv_sleep(5);
    CHECK(!lease_check_fence("s", 1, &err) && err.code == DBERR_STALE_FENCING_TOKEN,
          "a token whose lease ran out does not fence");
    CHECK(take("s", "b", 10000, 0, 2, 0, &g) == LEASE_GRANTED && g.token == 2,
          "an expired lock goes to the next owner with the next token");
    CHECK(!lease_release("s", 1, &err) && err.code == DBERR_STALE_FENCING_TOKEN,
          "releasing with the old token fails");
    int64_t exp;
    CHECK(!lease_renew("s", 1, 1000, NULL, 0, &exp, &err), "renewing with the old token fails");
    CHECK(!lease_check_fence("s", 3, &err), "a token never issued does not fence");
    lease_info_t info;
    lease_get_info("s", &info);
    CHECK(info.held && strcmp(info.owner, "b") == 0 && info.token == 2,
          "the new holder is untouched");
    CHECK(lease_check_fence("s", 2, &err), "the current token fences");
    CHECK(take("s", "c", 1000, 0, 3, 0, &g) == LEASE_BUSY, "a held lock with waitMs 0 is busy");
    CHECK(take("s", "b", 1000, 0, 2, 0, &g) == LEASE_GRANTED && g.token == 2,
          "the holder's retry gets the same token");
    teardown();
}

static void test_waiters_are_served_first_come_one_per_release(void)
{
    setup();
    lease_grant_t g;
    dberr_t err = {0};
    take("q", "h", 10000, 0, 1, 0, &g);
    for (int i = 1; i <= 3; i++)
        CHECK(take("q", i == 1 ? "w1" : i == 2 ? "w2" : "w3", 10000, 10000, 10 + i, i, &g) ==
                  LEASE_PARKED,
              "waiter %d parks", i);
    lease_info_t info;
    lease_get_info("q", &info);
    CHECK(info.waiting == 3, "three waiters queued");
    int64_t token = g.token = 1;
    for (int k = 0; k < 3; k++) {
        CHECK(lease_release("q", token, &err), "release %d", k);
        run_until_woken(k + 1, 1000);
        uv_run(loop, UV_RUN_NOWAIT);
        CHECK(woken.n == k + 1, "release %d woke exactly one waiter (woken %d)", k, woken.n);
        CHECK(woken.who[k] == k + 1 && woken.acquired[k], "waiter %d got it in arrival order",
              k + 1);
        CHECK(woken.token[k] == token + 1, "with the next token");
        token = woken.token[k];
    }
    teardown();
}

static void test_deadlines_expiry_disconnect_and_session_end(void)
{
    setup();
    lease_grant_t g;
    take("d", "h", 60000, 0, 1, 0, &g);
    CHECK(take("d", "w", 1000, 30, 2, 7, &g) == LEASE_PARKED, "a waiter parks");
    run_until_woken(1, 2000);
    CHECK(woken.n == 1 && woken.who[0] == 7 && !woken.acquired[0],
          "its wait ran out: acquired false");

    take("e", "h", 30, 0, 1, 0, &g);
    CHECK(take("e", "w", 1000, 5000, 2, 8, &g) == LEASE_PARKED, "a waiter parks behind a short lease");
    run_until_woken(2, 2000);
    CHECK(woken.n == 2 && woken.who[1] == 8 && woken.acquired[1], "the expiry woke it with the lock");

    lease_request_t req = {.name = "r", .owner = "x", .lease_ms = 60000, .conn_id = 5,
                           .release_on_disconnect = true};
    dberr_t err = {0};
    lease_acquire(&req, on_wake, NULL, &g, &err);
    CHECK(take("r", "y", 1000, 60000, 6, 9, &g) == LEASE_PARKED, "a waiter on connection 6");
    CHECK(take("r", "z", 1000, 60000, 7, 10, &g) == LEASE_PARKED, "a waiter on connection 7");
    lease_connection_closed(6);
    lease_info_t info;
    lease_get_info("r", &info);
    CHECK(info.held && info.waiting == 1, "closing connection 6 dropped its waiter only");
    lease_connection_closed(5);
    run_until_woken(3, 1000);
    CHECK(woken.n == 3 && woken.who[2] == 10 && woken.acquired[2],
          "closing the holder's connection released it to the next waiter (not the dropped one)");

    uint8_t lsid[16] = {1, 2, 3};
    lease_request_t sreq = {.name = "s", .owner = "x", .lease_ms = 60000, .lsid = lsid,
                            .lsid_len = 16, .conn_id = 8};
    lease_acquire(&sreq, on_wake, NULL, &g, &err);
    lease_session_ended((const uint8_t *)"other-session-id", 16);
    lease_get_info("s", &info);
    CHECK(info.held, "another session's end leaves the lock");
    lease_session_ended(lsid, 16);
    lease_get_info("s", &info);
    CHECK(!info.held, "the session's end released its lock");
    teardown();
}

static void test_bad_requests_fail_cleanly(void)
{
    setup();
    lease_grant_t g;
    dberr_t err = {0};
    lease_request_t req = {.name = "", .owner = "o", .lease_ms = 10};
    CHECK(lease_acquire(&req, on_wake, NULL, &g, &err) == LEASE_FAILED &&
              err.code == DBERR_BAD_VALUE,
          "an empty name is BadValue");
    req.name = "n";
    req.lease_ms = 0;
    CHECK(lease_acquire(&req, on_wake, NULL, &g, &err) == LEASE_FAILED, "leaseMs 0 fails");
    req.lease_ms = 10;
    req.owner = "";
    CHECK(lease_acquire(&req, on_wake, NULL, &g, &err) == LEASE_FAILED, "an empty owner fails");
    CHECK(!lease_check_fence("never-used", 1, &err), "a lock never used fences nothing");
    teardown();
}

int main(void)
{
    loop = uv_default_loop();
    UNIT_RUN(test_tokens_increase_per_name_and_are_stored);
    UNIT_RUN(test_stale_tokens_change_nothing);
    UNIT_RUN(test_waiters_are_served_first_come_one_per_release);
    UNIT_RUN(test_deadlines_expiry_disconnect_and_session_end);
    UNIT_RUN(test_bad_requests_fail_cleanly);
    return unit_finish();
}
