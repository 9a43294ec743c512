/* namelist: whether a name is one of a fixed list (the option, field and
 * command names a handler knows, refuses or treats alike), so the lists
 * are static tables rather than chains of strcmp. */
#ifndef ATOMDB_NAMELIST_H
#define ATOMDB_NAMELIST_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* How many names a static array holds. */
#define NAMELIST_COUNT(names) (sizeof(names) / sizeof((names)[0]))

/* True when `name` equals one of the `n` strings of `names`. */
static inline bool namelist_has(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

#endif
