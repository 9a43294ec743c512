/* fuzz: what the libFuzzer targets of tests/fuzz share — splitting an input
 * into a sequence of BSON documents (the first is the target's spec, the
 * rest are documents to run it on), a few fixed documents every target
 * also runs on, and the temporary directory of the targets that need files.
 * Header-only: each target is one file. */
#ifndef ATOMDB_FUZZ_H
#define ATOMDB_FUZZ_H

#include <bson/bson.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/bsoncheck.h"
#include "util/log.h"

#define FUZZ_MAX_DOCS 8

/* Documents found in an input: borrowed from a private copy (`copy`). */
typedef struct fuzz_docs {
    uint8_t *copy;
    bson_t docs[FUZZ_MAX_DOCS];
    int n;
} fuzz_docs_t;

/* True when `doc` passes the check the server applies to every document it
 * receives (wire frames, recovery): util/bsoncheck.h. */
static inline bool fuzz_valid(const bson_t *doc)
{
    uint32_t at;
    return bsoncheck_doc(doc, &at) == BSONCHECK_OK;
}

/* Splits `data` into up to FUZZ_MAX_DOCS valid BSON documents laid one after
 * the other, stopping at the first that is not. */
static inline void fuzz_docs_split(fuzz_docs_t *d, const uint8_t *data, size_t size)
{
    d->n = 0;
    d->copy = malloc(size ? size : 1);
    memcpy(d->copy, data, size);
    size_t off = 0;
    while (d->n < FUZZ_MAX_DOCS && size - off >= 5) {
        uint32_t len;
        memcpy(&len, d->copy + off, 4);
        len = BSON_UINT32_FROM_LE(len);
        if (len < 5 || len > size - off)
            break;
        if (!bson_init_static(&d->docs[d->n], d->copy + off, len) ||
            !fuzz_valid(&d->docs[d->n]))
            break;
        d->n++;
        off += len;
    }
}

static inline void fuzz_docs_free(fuzz_docs_t *d)
{
    free(d->copy);
}

/* fuzz_docs_split for a target that needs at least one document: false,
 * with nothing left to free, when `data` holds none. */
static inline bool fuzz_docs_split_some(fuzz_docs_t *d, const uint8_t *data, size_t size)
{
    fuzz_docs_split(d, data, size);
    if (d->n > 0)
        return true;
    fuzz_docs_free(d);
    return false;
}

/* Fixed documents every doc-layer target also runs against. */
static inline int fuzz_fixed_docs(bson_t *out, int max)
{
    static const char *json[] = {
        "{\"_id\": 1, \"a\": 1, \"b\": \"x\", \"c\": [1, 2, {\"d\": 3}], \"e\": {\"f\": null}}",
        "{\"_id\": {\"$oid\": \"5f0000000000000000000001\"}, \"a\": [[1, 2], [3]], "
        "\"s\": \"Hello\", \"t\": {\"$date\": \"2024-01-01T00:00:00Z\"}, "
        "\"n\": {\"$numberDecimal\": \"1.5\"}, \"l\": {\"$numberLong\": \"9223372036854775807\"}}",
        "{}",
    };
    int n = 0;
    for (size_t i = 0; i < sizeof json / sizeof json[0] && n < max; i++) {
        bson_error_t e;
        if (!bson_init_from_json(&out[n], json[i], -1, &e))
            abort(); /* a bug in this file */
        n++;
    }
    return n;
}

/* Aborts (a finding) when `doc` is not valid BSON or is over 16 MB. */
static inline void fuzz_check_doc(const bson_t *doc)
{
    if (doc->len > 16 * 1024 * 1024 + 16 * 1024 || !fuzz_valid(doc))
        abort();
}

/* The target's temporary directory (empty until fuzz_tmpdir_make). */
static inline char *fuzz_tmpdir(void)
{
    static char dir[256];
    return dir;
}

static inline int fuzz_tmpdir_rm(const char *path, const struct stat *st, int flag,
                                 struct FTW *ftw)
{
    remove(path);
    return 0;
}

/* Removes the temporary directory with all it holds. */
static inline void fuzz_tmpdir_cleanup(void)
{
    nftw(fuzz_tmpdir(), fuzz_tmpdir_rm, 8, FTW_DEPTH | FTW_PHYS);
}

/* For LLVMFuzzerInitialize: makes /tmp/atomdb-fuzz-NAME-XXXXXX, removed when
 * libFuzzer exits, sends the server's log to /dev/null and returns the
 * directory's path. */
static inline const char *fuzz_tmpdir_make(const char *name)
{
    char *dir = fuzz_tmpdir();
    snprintf(dir, 256, "/tmp/atomdb-fuzz-%s-XXXXXX", name);
    if (!mkdtemp(dir))
        abort();
    atexit(fuzz_tmpdir_cleanup);
    FILE *null = fopen("/dev/null", "w");
    if (null)
        log_set_output(null);
    return dir;
}

#endif
