/* capped: what makes a collection capped — its bounds (size in bytes, max
 * documents) and its natural order, the order documents were inserted in,
 * which scans, snapshots and tailable cursors follow. collection.c keeps it
 * in step with the records; loop thread only. See docs/capped.md. */
#ifndef ATOMDB_CAPPED_H
#define ATOMDB_CAPPED_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/record.h"
#include "util/dberr.h"

typedef struct capped capped_t;

/* The largest capped size mongod accepts: 1 PB. */
#define CAPPED_MAX_SIZE (1024LL * 1024 * 1024 * 1024 * 1024)

/* Checks create's {capped, size, max} and writes them to `out` as mongod 7
 * stores them (size rounded up to a multiple of 256, max only when given;
 * capped false writes nothing). Fails with InvalidOptions 72 / BadValue 2
 * / TypeMismatch 14 as mongod. `capped`, `size` and `max` may be NULL
 * (absent). */
bool capped_parse_options(const bson_iter_t *capped, const bson_iter_t *size,
                          const bson_iter_t *max, bson_t *out, dberr_t *err);

/* The bounds of a collection with `options`, or NULL when it is not capped. */
capped_t *capped_new(const bson_t *options);
/* Frees the order (not the records, which it borrows); accepts NULL. */
void capped_destroy(capped_t *cap);

/* Takes the bounds of `from`, keeping the order. */
void capped_set_bounds(capped_t *cap, const capped_t *from);

/* Bounds: bytes of BSON, and documents (0: none). */
int64_t capped_size(const capped_t *cap);
int64_t capped_max(const capped_t *cap);

/* Appends `r` (whose _id is `id`, borrowed from the collection) at the end
 * of the natural order. */
void capped_append(capped_t *cap, const bson_value_t *id, record_t *r);
/* Points the entry of _id `id` at its new version `r`, same position. */
void capped_replace(capped_t *cap, const bson_value_t *id, record_t *r);
/* Drops the entry of _id `id`. */
void capped_remove(capped_t *cap, const bson_value_t *id);

/* The first record after natural position `after` (0: from the start),
 * its position in *pos; NULL at the end. Borrowed until the next write. */
record_t *capped_next(const capped_t *cap, uint64_t after, uint64_t *pos);
/* True while position `pos` still holds a document. */
bool capped_holds(const capped_t *cap, uint64_t pos);

#endif
