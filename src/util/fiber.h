/* fiber: cooperative coroutines on the loop thread, so a long operation
 * (a scan, an aggregate, an updateMany) runs in slices of at most
 * `fiber_slice_ms` and lets other requests run between them. A fiber owns
 * a stack; the code it runs calls fiber_check() inside its long loops,
 * which yields back to the loop when the slice is used up and fails when
 * the operation was killed or ran past its maxTimeMS. Everything still
 * happens on the loop thread: nothing here is thread-safe, and nothing
 * needs to be. See docs/design.md ("Long operations"). */
#ifndef ATOMDB_FIBER_H
#define ATOMDB_FIBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/dberr.h"

typedef struct fiber fiber_t;

/* A new fiber that will run fn(arg) on its own stack; not started. NULL
 * when no stack could be had. */
fiber_t *fiber_new(void (*fn)(void *arg), void *arg);
/* Runs `f` until it yields (false) or returns (true). Loop stack only. */
bool fiber_resume(fiber_t *f);
/* Frees a finished (or never started) fiber; accepts NULL. */
void fiber_destroy(fiber_t *f);

/* The fiber running now, or NULL on the loop's own stack. */
fiber_t *fiber_current(void);

/* Interrupts `f` at its next check with `code` and `msg` (killOp:
 * Interrupted 11601; a closed connection). The first kill wins. */
void fiber_kill(fiber_t *f, int code, const char *msg);
/* Makes `f` fail with MaxTimeMSExpired (50) once uv_hrtime() passes
 * `deadline_ns` (0: no deadline). */
void fiber_set_deadline(fiber_t *f, uint64_t deadline_ns);
/* True once `f` has been killed (fiber_kill). */
bool fiber_killed(const fiber_t *f);
/* How many times `f` has yielded: a caller that holds pointers into the
 * store compares this before and after a check to know whether others ran. */
uint64_t fiber_yields(const fiber_t *f);
/* uv_hrtime() when `f` was created, and nanoseconds it has run so far. */
uint64_t fiber_started_ns(const fiber_t *f);

/* The current fiber may not yield (a single-document write, a commit, a
 * statement of a retryable batch: each must be one step) until the
 * matching _end; nests. Kill and deadline checks still apply. No effect
 * off a fiber. */
void fiber_no_yield_begin(void);
void fiber_no_yield_end(void);

/* The slice length in microseconds (setParameter atomdbYieldPeriodMicros,
 * or internalQueryExecYieldPeriodMS in ms); 0 yields at every check. */
void fiber_set_slice_us(int64_t us);
int64_t fiber_slice_us(void);
/* The length of `f`'s next slices, at most fiber_slice_us() (op.c shortens
 * them while other clients' requests are arriving). */
void fiber_set_slice(fiber_t *f, int64_t us);

/* The check inside long loops. True to go on. False with `err` set when
 * the current fiber was killed or passed its deadline. When the slice is
 * used up and yielding is allowed, yields first: other requests run, and
 * pointers into the store may be stale on return (see fiber_yields). Off
 * a fiber, always true. */
bool fiber_check_slow(dberr_t *err);
extern fiber_t *fiber_running;
static inline bool fiber_check(dberr_t *err)
{
    return !fiber_running || fiber_check_slow(err);
}

/* Kill and deadline checks only, never a yield: for loops that may run
 * where the caller holds pointers into the store (an expression inside a
 * scan's filter). True off a fiber. */
bool fiber_alive_slow(dberr_t *err);
static inline bool fiber_alive(dberr_t *err)
{
    return !fiber_running || fiber_alive_slow(err);
}

/* For cleanup loops (freeing a large result): yields when the slice is
 * used up and the fiber may; never fails, even once killed. */
void fiber_tick(void);

/* Yields now whatever the slice (a wait that polls, such as a document
 * lock held by a transaction); then as fiber_check. */
bool fiber_yield_now(dberr_t *err);

/* True when the current fiber's next fiber_check would yield or fail: a
 * loop that must save its position first asks this. */
bool fiber_due(void);

/* Frees `p` with fn(p) now, or once no fiber is suspended part-way (a
 * suspended scan may still point into a dropped collection or index). */
void fiber_defer_free(void (*fn)(void *p), void *p);
/* Fibers that have yielded and not finished. */
size_t fiber_suspended(void);

#endif
