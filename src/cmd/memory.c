/* memory: samples the allocator's in-use bytes (glibc mallinfo2: the
 * main arena's allocated chunks plus mmap'd blocks; ASan's own count in
 * sanitizer builds) and refuses writes
 * that add data past --max-memory. */
#include "cmd/memory.h"

#include <malloc.h>
#include <string.h>
#include <uv.h>

#include "cmd/server.h"
#include "util/namelist.h"

#if defined(__SANITIZE_ADDRESS__)
/* libasan's (GCC ships no header for it) */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

/* How long one sample stands, in nanoseconds. */
#define MEMORY_SAMPLE_NS 5000000u

static int64_t memory_sample;
static uint64_t memory_sampled_at;
static int64_t memory_refused;

int64_t memory_used(void)
{
    uint64_t now = uv_hrtime();
    if (memory_sampled_at == 0 || now - memory_sampled_at > MEMORY_SAMPLE_NS) {
#if defined(__SANITIZE_ADDRESS__)
        memory_sample = (int64_t)__sanitizer_get_current_allocated_bytes(); /* ASan's allocator */
#else
        struct mallinfo2 mi = mallinfo2();
        memory_sample = (int64_t)(mi.uordblks + mi.hblkhd);
#endif
        memory_sampled_at = now;
    }
    return memory_sample;
}

/* Commands that may add data (the rest only read, shrink or drop). */
static bool memory_grows(const char *name, const bson_t *cmd)
{
    static const char *const names[] = {"insert", "update", "create", "createIndexes",
                                        "collMod"};
    if (namelist_has(names, NAMELIST_COUNT(names), name))
        return true;
    if (!strcmp(name, "findAndModify") || !strcmp(name, "findandmodify")) {
        bson_iter_t it;
        return !(bson_iter_init_find(&it, cmd, "remove") && bson_iter_as_bool(&it));
    }
    return false;
}

bool memory_check(const char *what, dberr_t *err)
{
    int64_t limit = server.config.max_memory;
    if (limit <= 0)
        return true;
    int64_t used = memory_used();
    if (used <= limit)
        return true;
    memory_refused++;
    return dberr_set(err, DBERR_EXCEEDED_MEMORY_LIMIT,
                     "%s refused: atomdb uses %lld bytes of memory, over its --max-memory limit "
                     "of %lld bytes; reads, deletes and drops still work",
                     what, (long long)used, (long long)limit);
}

bool memory_write_allowed(const char *name, const bson_t *cmd, dberr_t *err)
{
    if (server.config.max_memory <= 0 || !memory_grows(name, cmd))
        return true;
    return memory_check(name, err);
}

void memory_append_status(bson_t *out)
{
    BSON_APPEND_INT64(out, "used", memory_used());
    BSON_APPEND_INT64(out, "limit", server.config.max_memory);
    BSON_APPEND_UTF8(out, "policy", "noeviction");
    BSON_APPEND_INT64(out, "refusedWrites", memory_refused);
}
