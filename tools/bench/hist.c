/* hist.c: a log-linear latency histogram (1 us buckets below 1 ms, 64 per
 * power of two above) that lives in shared memory and merges by addition. */
#include "bench.h"

/* Bucket index of a value in microseconds. */
static int hist_index(uint64_t v)
{
    if (v < 1024)
        return (int)v;
    int msb = 63 - __builtin_clzll(v);
    int idx = 1024 + (msb - 10) * 64 + (int)((v >> (msb - 6)) & 63);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* Lower bound in microseconds of a bucket. */
static double hist_value(int idx)
{
    if (idx < 1024)
        return idx;
    int msb = (idx - 1024) / 64 + 10;
    int sub = (idx - 1024) % 64;
    return (double)((1ULL << msb) + ((uint64_t)sub << (msb - 6)));
}

void hist_add(hist_t *h, uint64_t us)
{
    h->b[hist_index(us)]++;
}

void hist_merge(hist_t *dst, const hist_t *src)
{
    for (int i = 0; i < HIST_BUCKETS; i++)
        dst->b[i] += src->b[i];
}

double hist_quantile(const hist_t *h, double q)
{
    uint64_t total = 0;
    for (int i = 0; i < HIST_BUCKETS; i++)
        total += h->b[i];
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total);
    if (want >= total)
        want = total - 1;
    uint64_t seen = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen > want)
            return hist_value(i);
    }
    return hist_value(HIST_BUCKETS - 1);
}
