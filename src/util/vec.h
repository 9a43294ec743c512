/* vec: the one growth rule for the arrays atomdb keeps as (items, len,
 * cap) triples — double when full, starting from a small first size. */
#ifndef ATOMDB_VEC_H
#define ATOMDB_VEC_H

#include <bson/bson.h>

/* Makes room for one more element in `items` (len used, cap allocated). */
#define VEC_RESERVE_ONE(items, len, cap, first)                                \
    do {                                                                       \
        if ((len) == (cap)) {                                                  \
            (cap) = (cap) ? (cap) * 2 : (first);                               \
            (items) = bson_realloc((items), (size_t)(cap) * sizeof *(items));  \
        }                                                                      \
    } while (0)

#endif
