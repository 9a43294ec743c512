/* fuzz: what the libFuzzer targets of tests/fuzz share — splitting an input
 * into a sequence of BSON documents (the first is the target's spec, the
 * rest are documents to run it on) and a few fixed documents every target
 * also runs on. Header-only: each target is one file. */
#ifndef ATOMDB_FUZZ_H
#define ATOMDB_FUZZ_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/bsoncheck.h"

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

#endif
