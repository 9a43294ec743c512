/* test_projection: find projections, driven by cases/projection.json (each
 * case: an input document, a projection spec, an optional positional index,
 * and the exact expected document — field order included — or an error code). */
#include <string.h>

#include "doc/projection.h"
#include "unit.h"

/* Borrows the document under `it` into `out`. */
static void borrow_doc(const bson_iter_t *it, bson_t *out)
{
    const uint8_t *d;
    uint32_t n;
    bson_iter_document(it, &n, &d);
    bson_init_static(out, d, n);
}

static void run_case(bson_iter_t *c)
{
    bson_iter_t f;
    const char *name = "?";
    bson_t input = BSON_INITIALIZER, spec = BSON_INITIALIZER, expect = BSON_INITIALIZER;
    bool have_expect = false;
    int want_error = 0, positional = -1;

    bson_iter_recurse(c, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!strcmp(k, "name"))
            name = bson_iter_utf8(&f, NULL);
        else if (!strcmp(k, "input"))
            borrow_doc(&f, &input);
        else if (!strcmp(k, "spec"))
            borrow_doc(&f, &spec);
        else if (!strcmp(k, "expect")) {
            borrow_doc(&f, &expect);
            have_expect = true;
        } else if (!strcmp(k, "error"))
            want_error = (int)bson_iter_as_int64(&f);
        else if (!strcmp(k, "positional"))
            positional = (int)bson_iter_as_int64(&f);
    }
    dberr_t err;
    dberr_clear(&err);
    bool ok = false;
    projection_t *p = projection_new(&spec, &err);
    if (!p) {
        ok = want_error && err.code == want_error;
        if (!ok)
            fprintf(stderr, "  %s: parse error %d %s (want %d)\n", name, err.code, err.msg,
                    want_error);
        unit_case(name, ok);
        return;
    }
    bson_t out;
    bson_init(&out);
    if (!projection_apply(p, &input, positional, &out, &err)) {
        ok = want_error && err.code == want_error;
        if (!ok)
            fprintf(stderr, "  %s: apply error %d %s (want %d)\n", name, err.code, err.msg,
                    want_error);
    } else if (want_error) {
        fprintf(stderr, "  %s: wanted error %d\n", name, want_error);
    } else if (have_expect) {
        ok = out.len == expect.len && memcmp(bson_get_data(&out), bson_get_data(&expect), out.len) == 0;
        if (!ok) {
            char *g = bson_as_relaxed_extended_json(&out, NULL);
            char *w = bson_as_relaxed_extended_json(&expect, NULL);
            fprintf(stderr, "  %s: got %s want %s\n", name, g, w);
            bson_free(g);
            bson_free(w);
        }
    }
    bson_destroy(&out);
    projection_destroy(p);
    unit_case(name, ok);
}

static void test_positional_flag_reported(void)
{
    bson_t *spec = BCON_NEW("a.$", BCON_INT32(1));
    bson_t *plain = BCON_NEW("a", BCON_INT32(1));
    dberr_t err;
    projection_t *p = projection_new(spec, &err);
    projection_t *q = projection_new(plain, &err);
    CHECK(p && projection_is_positional(p), "a.$ projection needs the positional index");
    CHECK(q && !projection_is_positional(q), "plain inclusion does not");
    projection_destroy(p);
    projection_destroy(q);
    bson_destroy(spec);
    bson_destroy(plain);
}

static void test_failed_apply_leaves_output_empty(void)
{
    bson_t *spec = BCON_NEW("a.$", BCON_INT32(1));
    bson_t *doc = BCON_NEW("a", "[", BCON_INT32(1), "]");
    dberr_t err;
    projection_t *p = projection_new(spec, &err);
    bson_t out;
    bson_init(&out);
    CHECK(p && !projection_apply(p, doc, -1, &out, &err), "a.$ without a matched index fails");
    CHECK(bson_empty(&out), "output left empty");
    bson_destroy(&out);
    projection_destroy(p);
    bson_destroy(spec);
    bson_destroy(doc);
}

int main(void)
{
    UNIT_RUN(test_positional_flag_reported);
    UNIT_RUN(test_failed_apply_leaves_output_empty);
    bson_t *doc = unit_load_json("cases/projection.json");
    bson_iter_t it, cases;
    if (bson_iter_init_find(&it, doc, "cases") && bson_iter_recurse(&it, &cases))
        while (bson_iter_next(&cases))
            run_case(&cases);
    else
        unit_case("cases/projection.json has cases", 0);
    bson_destroy(doc);
    projection_destroy(NULL);
    return unit_finish();
}
