/* pipeline/sample: the $sample stage — `size` documents chosen at random,
 * without repetition and in random order, with glibc's arc4random (a
 * ChaCha20 generator seeded from getrandom). */
#include "doc/pipeline/pipeline-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doc/num.h"
#include "util/fiber.h"

/* mongod's BSONElement::safeNumberLong: a number as int64, fractions
 * dropped (a decimal rounded half to even), out of range saturated, NaN 0. */
static int64_t sample_safe_long(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_INT32)
        return v->value.v_int32;
    if (v->value_type == BSON_TYPE_INT64)
        return v->value.v_int64;
    double d = num_to_double(v);
    if (v->value_type == BSON_TYPE_DECIMAL128)
        d = nearbyint(d);
    return num_saturate_int64(d);
}

static bool sample_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    bson_iter_t it;
    bool have_size = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return dberr_set(err, 28745, "the $sample stage specification must be an object");
    bson_iter_recurse(arg, &it);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "size") != 0)
            return dberr_set(err, 28748, "unrecognized option to $sample: %s", bson_iter_key(&it));
        if (!num_is_number(bson_iter_value(&it)))
            return dberr_set(err, 28746, "size argument to $sample must be a number");
        s->u.n = sample_safe_long(bson_iter_value(&it));
        have_size = true;
    }
    if (!have_size)
        return dberr_set(err, 28749, "$sample stage must specify a size");
    if (s->u.n <= 0)
        return dberr_set(err, 28747, "size argument to $sample must be a positive integer");
    return true;
}

/* A uniformly random integer in [0, bound) (bound > 0). */
static uint64_t sample_below(uint64_t bound)
{
    if (bound <= UINT32_MAX)
        return arc4random_uniform((uint32_t)bound);
    uint64_t r, limit = UINT64_MAX - UINT64_MAX % bound; /* reject the biased tail */
    do
        arc4random_buf(&r, sizeof r);
    while (r >= limit);
    return r % bound;
}

static bool sample_run(const stage_t *s, const expr_ctx_t *ctx, doclist_t *in, doclist_t *out,
                       dberr_t *err)
{
    size_t n = in->len, k = (uint64_t)s->u.n < n ? (size_t)s->u.n : n;
    int64_t bytes = 0;
    /* a partial Fisher-Yates shuffle: position i takes a random one of the
     * documents not chosen yet */
    for (size_t i = 0; i < k; i++) {
        if ((i & 1023) == 1023 && !fiber_check(err))
            return false;
        size_t j = i + (size_t)sample_below(n - i);
        bson_t *d = in->docs[j];
        in->docs[j] = in->docs[i];
        in->docs[i] = NULL;
        /* mongod samples by a top-k sort: the chosen documents count against
         * the blocking sort limit (pipeline_limits) */
        bytes += (int64_t)d->len + (int64_t)sizeof(bson_t);
        if (bytes > pipeline_limits.sort_bytes) {
            bson_destroy(d);
            return dberr_set(err, DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK,
                             ctx->allow_disk_use
                                 ? "Sort exceeded memory limit of %lld bytes, and atomdb cannot "
                                   "sort externally: allowDiskUse is not implemented (raise "
                                   "internalQueryMaxBlockingSortMemoryUsageBytes)"
                                 : "Sort exceeded memory limit of %lld bytes, but did not opt in "
                                   "to external sorting.",
                             (long long)pipeline_limits.sort_bytes);
        }
        doclist_push(out, d);
    }
    return true;
}

const stage_def_t pipeline_sample_stages[] = {
    {"$sample", sample_parse, sample_run, NULL, NULL, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
