/* clock: the cluster time, advanced by commits. */
#include "store/clock.h"

#include <time.h>

static clock_ts_t clock_last;

static uint32_t clock_wall_s(void)
{
    return (uint32_t)time(NULL);
}

void clock_init(void)
{
    clock_ts_t start = {clock_wall_s(), 0};
    clock_advance_to(start);
}

clock_ts_t clock_now(void)
{
    return clock_last;
}

clock_ts_t clock_tick(void)
{
    uint32_t now = clock_wall_s();
    if (now > clock_last.t) {
        clock_last.t = now;
        clock_last.i = 1;
    } else if (clock_last.i == UINT32_MAX) {
        clock_last.t++; /* four billion commits in one second: borrow the next */
        clock_last.i = 1;
    } else {
        clock_last.i++;
    }
    return clock_last;
}

int clock_cmp(clock_ts_t a, clock_ts_t b)
{
    if (a.t != b.t)
        return a.t < b.t ? -1 : 1;
    if (a.i != b.i)
        return a.i < b.i ? -1 : 1;
    return 0;
}

void clock_advance_to(clock_ts_t ts)
{
    if (clock_cmp(ts, clock_last) > 0)
        clock_last = ts;
}
