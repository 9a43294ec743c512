/* table: finding a row by name in operator and stage tables — arrays of
 * rows whose first member is the row's name (const char *), each array
 * ended by a row whose name is NULL. */
#ifndef ATOMDB_TABLE_H
#define ATOMDB_TABLE_H

#include <stddef.h>
#include <string.h>

/* The row named `name` in the first of `ntables` tables that has one (rows
 * are `row_size` bytes), or NULL. */
static inline const void *table_find(const void *const *tables, size_t ntables, size_t row_size,
                                     const char *name)
{
    for (size_t t = 0; t < ntables; t++)
        for (const char *row = tables[t]; *(const char *const *)row; row += row_size)
            if (strcmp(*(const char *const *)row, name) == 0)
                return row;
    return NULL;
}

#endif
