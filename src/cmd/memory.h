/* memory: the server's memory use and the --max-memory limit, Redis's
 * maxmemory with its noeviction policy: past the limit, commands that add
 * data fail with ExceededMemoryLimit (146) while reads, deletes, drops and
 * shutdown go on. Use is what the allocator has handed out (documents,
 * indexes, results being built), sampled at most every few milliseconds.
 * Loop thread only. See docs/design.md ("Memory"). */
#ifndef ATOMDB_MEMORY_H
#define ATOMDB_MEMORY_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/dberr.h"

/* Bytes in use now (a fresh sample when the last is older than 5 ms). */
int64_t memory_used(void);

/* False with ExceededMemoryLimit (146) when a limit is set, memory use is
 * over it and command `name` (of `cmd`) may add data: insert, update,
 * findAndModify without remove, create, createIndexes, collMod, an
 * aggregate with $out or $merge. */
bool memory_write_allowed(const char *name, const bson_t *cmd, dberr_t *err);

/* Fails the same way for a caller that knows it adds data (an aggregate's
 * $out/$merge). */
bool memory_check(const char *what, dberr_t *err);

/* serverStatus's atomdbMemory: used, limit (0: none), refused writes. */
void memory_append_status(bson_t *out);

#endif
