/* test_pipeline: aggregation pipelines, driven by cases/pipeline.json (each
 * case: input documents, a pipeline, optional "mode": "update" and "let",
 * and the exact expected output documents in order — or an error code). */
#include <string.h>

#include "doc/pipeline.h"
#include "unit.h"

/* Renders a doclist as a JSON array for failure messages. */
static char *list_json(const doclist_t *l)
{
    bson_string_t *s = bson_string_new("[");
    for (size_t i = 0; i < l->len; i++) {
        char *j = bson_as_relaxed_extended_json(l->docs[i], NULL);
        bson_string_append_printf(s, "%s%s", i ? ", " : "", j);
        bson_free(j);
    }
    bson_string_append(s, "]");
    return bson_string_free(s, false);
}

static void run_case(bson_iter_t *c)
{
    bson_iter_t f, stages, input, expect;
    const char *name = "?";
    bool have_stages = false, have_input = false, have_expect = false, have_let = false;
    int want_error = 0;
    pipeline_mode_t mode = PIPELINE_AGGREGATE;
    bson_t let;

    bson_iter_recurse(c, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!strcmp(k, "name"))
            name = bson_iter_utf8(&f, NULL);
        else if (!strcmp(k, "pipeline"))
            stages = f, have_stages = true;
        else if (!strcmp(k, "input"))
            input = f, have_input = true;
        else if (!strcmp(k, "expect"))
            expect = f, have_expect = true;
        else if (!strcmp(k, "error"))
            want_error = (int)bson_iter_as_int64(&f);
        else if (!strcmp(k, "mode") && !strcmp(bson_iter_utf8(&f, NULL), "update"))
            mode = PIPELINE_UPDATE;
        else if (!strcmp(k, "let")) {
            const uint8_t *d;
            uint32_t n;
            bson_iter_document(&f, &n, &d);
            bson_init_static(&let, d, n);
            have_let = true;
        }
    }
    if (!have_stages) {
        unit_case(name, 0);
        return;
    }
    dberr_t err;
    dberr_clear(&err);
    pipeline_t *p = pipeline_new(&stages, mode, have_let ? &let : NULL, &err);
    bool ok = false;
    if (!p) {
        ok = want_error && err.code == want_error;
        if (!ok)
            fprintf(stderr, "  %s: parse error %d %s (want %d)\n", name, err.code, err.msg,
                    want_error);
        unit_case(name, ok);
        return;
    }
    doclist_t docs;
    doclist_init(&docs);
    if (have_input) {
        bson_iter_t el;
        bson_iter_recurse(&input, &el);
        while (bson_iter_next(&el)) {
            const uint8_t *d;
            uint32_t n;
            bson_iter_document(&el, &n, &d);
            doclist_push(&docs, bson_new_from_data(d, n));
        }
    }
    if (!pipeline_run(p, &docs, &err)) {
        ok = want_error && err.code == want_error;
        if (!ok)
            fprintf(stderr, "  %s: run error %d %s (want %d)\n", name, err.code, err.msg,
                    want_error);
    } else if (want_error) {
        fprintf(stderr, "  %s: wanted error %d\n", name, want_error);
    } else if (have_expect) {
        bson_iter_t el;
        size_t i = 0;
        ok = true;
        bson_iter_recurse(&expect, &el);
        while (bson_iter_next(&el)) {
            const uint8_t *d;
            uint32_t n;
            bson_iter_document(&el, &n, &d);
            if (i >= docs.len || docs.docs[i]->len != n ||
                memcmp(bson_get_data(docs.docs[i]), d, n) != 0)
                ok = false;
            i++;
        }
        if (i != docs.len)
            ok = false;
        if (!ok) {
            char *g = list_json(&docs);
            fprintf(stderr, "  %s: got %s\n", name, g);
            bson_free(g);
        }
    }
    doclist_destroy(&docs);
    pipeline_destroy(p);
    unit_case(name, ok);
}

static void test_leading_match_is_exposed(void)
{
    bson_t *cmd = BCON_NEW("p", "[", "{", "$match", "{", "a", BCON_INT32(1), "}", "}", "{",
                           "$limit", BCON_INT32(1), "}", "]");
    bson_t *cmd2 = BCON_NEW("p", "[", "{", "$limit", BCON_INT32(1), "}", "]");
    bson_iter_t it;
    dberr_t err;
    bson_iter_init_find(&it, cmd, "p");
    pipeline_t *p = pipeline_new(&it, PIPELINE_AGGREGATE, NULL, &err);
    bson_iter_init_find(&it, cmd2, "p");
    pipeline_t *q = pipeline_new(&it, PIPELINE_AGGREGATE, NULL, &err);
    const bson_t *f = p ? pipeline_leading_match(p) : NULL;
    bson_iter_t a;
    CHECK(f && bson_iter_init_find(&a, f, "a") && bson_iter_int32(&a) == 1,
          "leading $match filter {a: 1} is returned");
    CHECK(q && pipeline_leading_match(q) == NULL, "no leading $match gives NULL");
    pipeline_destroy(p);
    pipeline_destroy(q);
    pipeline_destroy(NULL);
    bson_destroy(cmd);
    bson_destroy(cmd2);
}

static void test_doclist_push_grows_and_destroy_frees(void)
{
    doclist_t l;
    doclist_init(&l);
    for (int i = 0; i < 100; i++)
        doclist_push(&l, BCON_NEW("i", BCON_INT32(i)));
    CHECK(l.len == 100, "100 documents pushed, len=%zu", l.len);
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, l.docs[99], "i") && bson_iter_int32(&it) == 99,
          "last document is the last pushed");
    doclist_destroy(&l);
    CHECK(l.len == 0 && l.docs == NULL, "destroy leaves an empty list");
}

static void test_group_handles_many_distinct_keys(void)
{
    bson_t *cmd = BCON_NEW("p", "[", "{", "$group", "{", "_id", "$k", "n", "{", "$sum",
                           BCON_INT32(1), "}", "}", "}", "]");
    bson_iter_t it;
    dberr_t err;
    bson_iter_init_find(&it, cmd, "p");
    pipeline_t *p = pipeline_new(&it, PIPELINE_AGGREGATE, NULL, &err);
    doclist_t l;
    doclist_init(&l);
    for (int i = 0; i < 5000; i++)
        doclist_push(&l, BCON_NEW("k", BCON_INT32(i % 1000)));
    CHECK(p && pipeline_run(p, &l, &err), "group runs");
    CHECK(l.len == 1000, "1000 groups, got %zu", l.len);
    bool all5 = true;
    for (size_t i = 0; i < l.len; i++)
        if (!bson_iter_init_find(&it, l.docs[i], "n") || bson_iter_int32(&it) != 5)
            all5 = false;
    CHECK(all5, "each group counted 5 documents");
    doclist_destroy(&l);
    pipeline_destroy(p);
    bson_destroy(cmd);
}

int main(void)
{
    UNIT_RUN(test_leading_match_is_exposed);
    UNIT_RUN(test_doclist_push_grows_and_destroy_frees);
    UNIT_RUN(test_group_handles_many_distinct_keys);
    bson_t *doc = unit_load_json("cases/pipeline.json");
    bson_iter_t it, cases;
    if (bson_iter_init_find(&it, doc, "cases") && bson_iter_recurse(&it, &cases))
        while (bson_iter_next(&cases))
            run_case(&cases);
    else
        unit_case("cases/pipeline.json has cases", 0);
    bson_destroy(doc);
    return unit_finish();
}
