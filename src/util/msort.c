/* msort: a stable, interruptible merge sort (see msort.h), one for every
 * blocking stage instead of a typed copy in each. */
#include "util/msort.h"

#include <bson/bson.h>
#include <string.h>

#include "util/fiber.h"

/* The elements a[0, n) sorted, through tmp (room for n). */
static bool msort_run(char *a, char *tmp, size_t n, size_t size, msort_cmp_fn cmp, void *ctx,
                      dberr_t *err)
{
    if (n < 2)
        return true;
    size_t mid = n / 2;
    if (!msort_run(a, tmp, mid, size, cmp, ctx, err) ||
        !msort_run(a + mid * size, tmp, n - mid, size, cmp, ctx, err))
        return false;
    if (n >= 64 && !fiber_check(err))
        return false;
    size_t i = 0, j = mid, k = 0;
    while (i < mid && j < n) {
        size_t from = cmp(a + j * size, a + i * size, ctx) < 0 ? j++ : i++;
        memcpy(tmp + k++ * size, a + from * size, size);
    }
    memcpy(tmp + k * size, a + i * size, (mid - i) * size);
    k += mid - i;
    memcpy(tmp + k * size, a + j * size, (n - j) * size);
    memcpy(a, tmp, n * size);
    return true;
}

bool msort(void *base, size_t n, size_t size, msort_cmp_fn cmp, void *ctx, dberr_t *err)
{
    if (n < 2)
        return true;
    char *tmp = bson_malloc(n * size);
    bool ok = msort_run(base, tmp, n, size, cmp, ctx, err);
    bson_free(tmp);
    return ok;
}
