/* fuzz_keystring: a property. Input = one BSON document; for every pair of
 * its top-level values, the memcmp order of their keystring encodings must
 * equal compare_values' order (ascending, and reversed when descending),
 * and equal values must encode to equal bytes. */
#include "doc/compare.h"
#include "doc/keystring.h"
#include "fuzz.h"

#define FUZZ_KS_MAX 16

static int fuzz_sign(int x)
{
    return (x > 0) - (x < 0);
}

static int fuzz_memcmp(const buf_t *a, const buf_t *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, n);
    if (c)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    if (!fuzz_docs_split_some(&d, data, size))
        return 0;
    bson_value_t vals[FUZZ_KS_MAX];
    buf_t asc[FUZZ_KS_MAX], desc[FUZZ_KS_MAX];
    int n = 0;
    bson_iter_t it;
    bson_iter_init(&it, &d.docs[0]);
    while (n < FUZZ_KS_MAX && bson_iter_next(&it)) {
        bson_value_copy(bson_iter_value(&it), &vals[n]);
        buf_init(&asc[n]);
        buf_init(&desc[n]);
        keystring_append(&asc[n], &vals[n], false);
        keystring_append(&desc[n], &vals[n], true);
        n++;
    }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            int want = fuzz_sign(compare_values(&vals[i], &vals[j]));
            if (fuzz_sign(fuzz_memcmp(&asc[i], &asc[j])) != want)
                abort(); /* ascending keys out of compare_values order */
            if (fuzz_sign(fuzz_memcmp(&desc[i], &desc[j])) != -want)
                abort(); /* descending keys not the reverse order */
        }
    }
    for (int i = 0; i < n; i++) {
        bson_value_destroy(&vals[i]);
        buf_destroy(&asc[i]);
        buf_destroy(&desc[i]);
    }
    fuzz_docs_free(&d);
    return 0;
}
