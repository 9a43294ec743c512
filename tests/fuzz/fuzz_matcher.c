/* fuzz_matcher: input = BSON documents laid end to end; the first is a
 * query filter, compiled with matcher_new (and its bounds and upsert seed
 * extracted), then matched against the others and a few fixed documents. */
#include "doc/matcher.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    if (!fuzz_docs_split_some(&d, data, size))
        return 0;
    dberr_t err = {0};
    matcher_t *m = matcher_new(&d.docs[0], &err);
    if (m) {
        bson_t fixed[4];
        int nf = fuzz_fixed_docs(fixed, 4);
        for (int i = 1; i < d.n; i++) {
            int pos = -1;
            matcher_matches(m, &d.docs[i], &pos);
        }
        for (int i = 0; i < nf; i++) {
            int pos = -1;
            matcher_matches(m, &fixed[i], &pos);
            bson_destroy(&fixed[i]);
        }
        matcher_take_error(m, &err);
        matcher_bounds_t b;
        matcher_bounds(m, "a", &b);
        matcher_bounds(m, "c.d", &b);
        bson_t seed = BSON_INITIALIZER;
        if (matcher_upsert_seed(&d.docs[0], &seed, &err))
            fuzz_check_doc(&seed);
        bson_destroy(&seed);
        matcher_destroy(m);
    }
    fuzz_docs_free(&d);
    return 0;
}
