/* fuzz_pipeline: input = BSON documents laid end to end; the first is
 * {pipeline: [stages...], let: {...}} (`let` optional), parsed as an
 * aggregate pipeline and as an update pipeline and run over the others and
 * a few fixed documents. Every output document must be valid BSON. */
#include "doc/pipeline.h"
#include "fuzz.h"

static void fuzz_run(pipeline_t *p, const fuzz_docs_t *d)
{
    doclist_t docs;
    doclist_init(&docs);
    for (int i = 1; i < d->n; i++)
        doclist_push(&docs, bson_copy(&d->docs[i]));
    bson_t fixed[4];
    int nf = fuzz_fixed_docs(fixed, 4);
    for (int i = 0; i < nf; i++) {
        doclist_push(&docs, bson_copy(&fixed[i]));
        bson_destroy(&fixed[i]);
    }
    dberr_t err = {0};
    if (pipeline_run(p, &docs, &err))
        for (size_t i = 0; i < docs.len; i++)
            fuzz_check_doc(docs.docs[i]);
    doclist_destroy(&docs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    fuzz_docs_split(&d, data, size);
    bson_iter_t stages, it;
    if (d.n == 0 || !bson_iter_init_find(&stages, &d.docs[0], "pipeline")) {
        fuzz_docs_free(&d);
        return 0;
    }
    bson_t let;
    const bson_t *letp = NULL;
    if (bson_iter_init_find(&it, &d.docs[0], "let") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *p;
        bson_iter_document(&it, &len, &p);
        if (bson_init_static(&let, p, len))
            letp = &let;
    }
    pipeline_mode_t modes[2] = {PIPELINE_AGGREGATE, PIPELINE_UPDATE};
    for (int m = 0; m < 2; m++) {
        dberr_t err = {0};
        pipeline_t *p = pipeline_new(&stages, modes[m], letp, &err);
        if (p) {
            pipeline_output(p);
            pipeline_is_collectionless(p);
            pipeline_leading_match(p);
            fuzz_run(p, &d);
            pipeline_destroy(p);
        }
    }
    fuzz_docs_free(&d);
    return 0;
}
