/* msort: a stable merge sort of an array of fixed-size elements that calls
 * fiber_check as it goes, for the blocking stages that sort what they hold
 * ($sort, $bucketAuto, $densify, $setWindowFields). */
#ifndef ATOMDB_MSORT_H
#define ATOMDB_MSORT_H

#include <stdbool.h>
#include <stddef.h>

#include "util/dberr.h"

/* <0, 0, >0 as element `a` sorts before, with or after `b`. */
typedef int (*msort_cmp_fn)(const void *a, const void *b, void *ctx);

/* Sorts the `n` elements of `size` bytes at `base` by `cmp` (given `ctx`),
 * keeping equal elements in their order. False with `err` when the
 * operation was interrupted (util/fiber.h); the order is then partial. */
bool msort(void *base, size_t n, size_t size, msort_cmp_fn cmp, void *ctx, dberr_t *err);

#endif
