/* regexp: MongoDB regular expressions compiled with PCRE2 in UTF mode, the
 * option letters (i m s x) read in one place for the query $regex,
 * $jsonSchema's pattern keywords and the $regexMatch family of expressions. */
#ifndef ATOMDB_REGEXP_H
#define ATOMDB_REGEXP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include "util/dberr.h"

/* The PCRE2 compile options (UTF mode plus the letters) for MongoDB's
 * option letters `flags`. The query language also takes 'u' (UTF, always on)
 * when `accept_u`; expressions do not. False with *bad set to the first
 * letter that is none of these. */
bool regexp_options(const char *flags, bool accept_u, uint32_t *opts, char *bad);

/* pcre2_compile of pattern[0, len) with `opts` (owned by the caller); NULL
 * with PCRE2's reason in msg[0, msg_size) when it does not compile. */
pcre2_code *regexp_compile(const char *pattern, size_t len, uint32_t opts, char *msg,
                           size_t msg_size);

/* A query-language regex ($regex, $jsonSchema's pattern): NULL with mongod's
 * errors, 51109 for an embedded null byte, 51108 for an unknown option
 * letter, 51091 for a pattern that does not compile. */
pcre2_code *regexp_compile_query(const char *pattern, size_t len, const char *flags, dberr_t *err);

#endif
