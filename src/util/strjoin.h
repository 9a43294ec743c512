/* strjoin: joins up to three strings into a fixed buffer, truncating and
 * NUL-terminating as snprintf("%s%s%s") does, without snprintf's format
 * parsing (namespaces and field paths are built on every request). */
#ifndef ATOMDB_STRJOIN_H
#define ATOMDB_STRJOIN_H

#include <stddef.h>
#include <string.h>

/* Writes a, b and c (b and c may be NULL) into dst of `size` bytes;
 * returns the joined length before any truncation, as snprintf. */
static inline size_t strjoin3(char *dst, size_t size, const char *a, const char *b,
                              const char *c)
{
    const char *parts[3] = {a, b, c};
    size_t at = 0, total = 0;
    for (int i = 0; i < 3; i++) {
        if (!parts[i])
            continue;
        size_t n = strlen(parts[i]);
        total += n;
        if (size && at < size - 1) {
            size_t take = size - 1 - at < n ? size - 1 - at : n;
            memcpy(dst + at, parts[i], take);
            at += take;
        }
    }
    if (size)
        dst[at] = '\0';
    return total;
}

#endif
