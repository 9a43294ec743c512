/* clock: the cluster time — a logical clock of Timestamp(seconds,
 * increment) values, one per commit (each log record), that never goes
 * backwards: not within a run (seconds follow the wall clock, the
 * increment orders commits within a second) and not across restarts
 * (recovery advances it to the newest time in the log or snapshot).
 * Replies carry it as $clusterTime and operationTime, as a replica-set
 * member's do; change streams (their resume tokens) and the oplog view
 * order events by it. Loop thread only. */
#ifndef ATOMDB_CLOCK_H
#define ATOMDB_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

/* A BSON Timestamp value. */
typedef struct clock_ts {
    uint32_t t; /* seconds since the epoch */
    uint32_t i; /* increment within the second, from 1 */
} clock_ts_t;

/* The cluster time of the newest commit (or of the clock's start when
 * nothing was committed yet). */
clock_ts_t clock_now(void);

/* A new cluster time for a commit, later than every earlier one. */
clock_ts_t clock_tick(void);

/* Moves the clock forward to `ts` if it is later (recovery, or a read
 * that asks for afterClusterTime ahead of the clock); never back. */
void clock_advance_to(clock_ts_t ts);

/* -1, 0, 1 as a is before, equal to or after b. */
int clock_cmp(clock_ts_t a, clock_ts_t b);

/* Starts the clock at the wall clock's second (at start-up). */
void clock_init(void);

#endif
