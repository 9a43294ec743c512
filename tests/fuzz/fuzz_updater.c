/* fuzz_updater: input = BSON documents laid end to end; the first is
 * {u: <update document or pipeline array>, arrayFilters: [...]} (both
 * optional: without `u` the first document itself is the update), applied
 * to the others and a few fixed documents as an update and as an upsert.
 * Every result must be valid BSON under 16 MB, or an error. */
#include "doc/updater.h"
#include "fuzz.h"

static void fuzz_apply(const updater_t *u, const bson_t *doc, bool insert)
{
    bson_t out = BSON_INITIALIZER;
    bool changed = false;
    dberr_t err = {0};
    if (updater_apply(u, doc, insert, 0, &out, &changed, &err))
        fuzz_check_doc(&out);
    else if (out.len != 5)
        abort(); /* updater.h: left empty on failure */
    bson_destroy(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    if (!fuzz_docs_split_some(&d, data, size))
        return 0;
    bson_iter_t spec, it;
    bson_t filters, spec_doc;
    const bson_t *af = NULL;
    if (bson_iter_init_find(&spec, &d.docs[0], "u")) {
        if (bson_iter_init_find(&it, &d.docs[0], "arrayFilters") && BSON_ITER_HOLDS_ARRAY(&it)) {
            uint32_t len;
            const uint8_t *p;
            bson_iter_array(&it, &len, &p);
            if (bson_init_static(&filters, p, len))
                af = &filters;
        }
    } else {
        /* the whole first document as the update: wrap it as {u: doc} */
        bson_init(&spec_doc);
        BSON_APPEND_DOCUMENT(&spec_doc, "u", &d.docs[0]);
        bson_iter_init_find(&spec, &spec_doc, "u");
    }
    dberr_t err = {0};
    updater_t *u = updater_new(&spec, af, &err);
    if (u) {
        bson_t fixed[4];
        int nf = fuzz_fixed_docs(fixed, 4);
        for (int i = 1; i < d.n; i++) {
            fuzz_apply(u, &d.docs[i], false);
        }
        for (int i = 0; i < nf; i++) {
            fuzz_apply(u, &fixed[i], i == nf - 1);
            bson_destroy(&fixed[i]);
        }
        updater_destroy(u);
    }
    if (!bson_has_field(&d.docs[0], "u"))
        bson_destroy(&spec_doc);
    fuzz_docs_free(&d);
    return 0;
}
