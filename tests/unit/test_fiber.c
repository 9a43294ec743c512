/* test_fiber: src/util/fiber.c, the coroutines long operations run on —
 * yielding when the slice is used up, kill and deadline checks, sections
 * that may not yield, frees deferred while a fiber is suspended, and deep
 * recursion on a fiber's own stack. */
#include <string.h>
#include <uv.h>

#include "unit.h"
#include "util/fiber.h"

/* Runs until `n` checks were made, counting its yields. */
typedef struct spin {
    int checks;
    int done;
    int code; /* the error code a failed check gave, 0 when none */
    bool no_yield;
} spin_t;

static void spin_body(void *arg)
{
    spin_t *s = arg;
    dberr_t err;
    dberr_clear(&err);
    if (s->no_yield)
        fiber_no_yield_begin();
    for (; s->done < s->checks; s->done++)
        if (!fiber_check(&err)) {
            s->code = err.code;
            break;
        }
    if (s->no_yield)
        fiber_no_yield_end();
}

static void test_a_fiber_that_yields_at_every_check_is_resumed_to_its_end(void)
{
    fiber_set_slice_us(0);
    spin_t s = {.checks = 100};
    fiber_t *f = fiber_new(spin_body, &s);
    int resumes = 0;
    CHECK(f != NULL, "a fiber gets a stack");
    while (!fiber_resume(f))
        resumes++;
    CHECK(s.done == 100 && s.code == 0, "every check passed (%d done)", s.done);
    CHECK(resumes >= 5, "it gave the loop back many times (%d)", resumes);
    CHECK(fiber_yields(f) == (uint64_t)resumes, "yields are counted (%d)", resumes);
    CHECK(fiber_suspended() == 0, "no fiber is suspended once it finished");
    fiber_destroy(f);
    fiber_set_slice_us(1000);
}

static void test_a_fiber_inside_a_no_yield_section_runs_in_one_slice(void)
{
    fiber_set_slice_us(0);
    spin_t s = {.checks = 1000, .no_yield = true};
    fiber_t *f = fiber_new(spin_body, &s);
    CHECK(fiber_resume(f), "it finished without yielding");
    CHECK(s.done == 1000 && fiber_yields(f) == 0, "all checks, no yield");
    fiber_destroy(f);
    fiber_set_slice_us(1000);
}

static void test_a_killed_fiber_fails_its_next_check_with_the_kill_code(void)
{
    fiber_set_slice_us(0);
    spin_t s = {.checks = 1000000};
    fiber_t *f = fiber_new(spin_body, &s);
    CHECK(!fiber_resume(f), "it yields first");
    fiber_kill(f, DBERR_INTERRUPTED, "operation was interrupted");
    fiber_kill(f, 279, "ignored: the first kill wins");
    CHECK(fiber_resume(f), "it ends at its next check");
    CHECK(s.code == DBERR_INTERRUPTED && s.done < 1000000, "Interrupted (11601), early (%d)",
          s.code);
    fiber_destroy(f);
    fiber_set_slice_us(1000);
}

static void test_a_fiber_past_its_deadline_fails_with_max_time_ms_expired(void)
{
    spin_t s = {.checks = 2000000000};
    fiber_t *f = fiber_new(spin_body, &s);
    fiber_set_deadline(f, uv_hrtime() + 2000000); /* 2 ms */
    while (!fiber_resume(f))
        ;
    CHECK(s.code == DBERR_MAX_TIME_MS_EXPIRED, "MaxTimeMSExpired (50), got %d", s.code);
    fiber_destroy(f);
}

static int freed;
static void count_free(void *p)
{
    freed += *(int *)p;
}

static void test_frees_wait_until_no_fiber_is_suspended(void)
{
    int one = 1;
    freed = 0;
    fiber_defer_free(count_free, &one);
    CHECK(freed == 1, "with no fiber suspended the free happens at once");
    fiber_set_slice_us(0);
    spin_t s = {.checks = 50};
    fiber_t *f = fiber_new(spin_body, &s);
    CHECK(!fiber_resume(f) && fiber_suspended() == 1, "one fiber suspended");
    fiber_defer_free(count_free, &one);
    fiber_defer_free(count_free, &one);
    CHECK(freed == 1, "frees wait while it is suspended");
    while (!fiber_resume(f))
        ;
    CHECK(freed == 3, "both ran once it finished (%d)", freed);
    fiber_destroy(f);
    fiber_set_slice_us(1000);
}

static int depth_sum(int n)
{
    volatile char pad[512];
    pad[0] = (char)n;
    return n == 0 ? pad[0] : depth_sum(n - 1) + 1 + pad[0] - (char)n;
}

static void deep_body(void *arg)
{
    *(int *)arg = depth_sum(4000); /* ~2 MB of stack */
}

static void test_deep_recursion_fits_on_a_fiber_stack(void)
{
    int r = 0;
    fiber_t *f = fiber_new(deep_body, &r);
    CHECK(fiber_resume(f) && r == 4000, "4000 frames of 512 bytes ran (%d)", r);
    fiber_destroy(f);
}

static void test_checks_off_a_fiber_always_pass(void)
{
    dberr_t err;
    dberr_clear(&err);
    CHECK(fiber_current() == NULL && fiber_check(&err) && fiber_alive(&err) && !fiber_due(),
          "the loop's own stack is never interrupted");
}

int main(void)
{
    UNIT_RUN(test_a_fiber_that_yields_at_every_check_is_resumed_to_its_end);
    UNIT_RUN(test_a_fiber_inside_a_no_yield_section_runs_in_one_slice);
    UNIT_RUN(test_a_killed_fiber_fails_its_next_check_with_the_kill_code);
    UNIT_RUN(test_a_fiber_past_its_deadline_fails_with_max_time_ms_expired);
    UNIT_RUN(test_frees_wait_until_no_fiber_is_suspended);
    UNIT_RUN(test_deep_recursion_fits_on_a_fiber_stack);
    UNIT_RUN(test_checks_off_a_fiber_always_pass);
    return unit_finish();
}
