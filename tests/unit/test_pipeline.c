/* test_pipeline: aggregation pipelines, driven by cases/pipeline.json (each
 * case: input documents, a pipeline, optional "mode": "update" and "let",
 * and the exact expected output documents in order — or an error code). */
#include <string.h>

#include "doc/matcher.h"
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


/* Parses the pipeline under field "p" of `cmd`. */
static pipeline_t *parse_p(const bson_t *cmd, const bson_t *let, dberr_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "p"))
        return NULL;
    return pipeline_new(&it, PIPELINE_AGGREGATE, let, err);
}

static void test_out_is_exposed_and_not_performed(void)
{
    bson_t *cmd = BCON_NEW("p", "[", "{", "$match", "{", "}", "}", "{", "$out", "{", "db",
                           BCON_UTF8("d2"), "coll", BCON_UTF8("c2"), "}", "}", "]");
    bson_t *cmd2 = BCON_NEW("p", "[", "{", "$out", BCON_UTF8("c3"), "}", "]");
    dberr_t err;
    pipeline_t *p = parse_p(cmd, NULL, &err), *q = parse_p(cmd2, NULL, &err);
    const pipeline_output_t *o = pipeline_output(p);
    CHECK(o && !o->is_merge && strcmp(o->db, "d2") == 0 && strcmp(o->coll, "c2") == 0 &&
              o->merge_spec == NULL,
          "$out {db: d2, coll: c2} is exposed");
    o = pipeline_output(q);
    CHECK(o && strcmp(o->db, "") == 0 && strcmp(o->coll, "c3") == 0,
          "$out: \"c3\" leaves db empty (the aggregate's own)");
    CHECK(!pipeline_is_collectionless(p), "a $match-first pipeline reads a collection");
    doclist_t l;
    doclist_init(&l);
    doclist_push(&l, BCON_NEW("_id", BCON_INT32(1)));
    CHECK(p && pipeline_run(p, &l, &err) && l.len == 1, "the documents to write are left in docs");
    doclist_destroy(&l);
    pipeline_destroy(p);
    pipeline_destroy(q);
    bson_destroy(cmd);
    bson_destroy(cmd2);
    bson_t *none = BCON_NEW("p", "[", "{", "$limit", BCON_INT32(1), "}", "]");
    p = parse_p(none, NULL, &err);
    CHECK(p && pipeline_output(p) == NULL, "no $out/$merge gives NULL");
    CHECK(pipeline_output(NULL) == NULL, "NULL pipeline gives NULL");
    pipeline_destroy(p);
    bson_destroy(none);
}

static void test_merge_spec_is_parsed(void)
{
    bson_t *cmd = BCON_NEW("p", "[", "{", "$merge", "{", "into", "{", "db", BCON_UTF8("d"),
                           "coll", BCON_UTF8("c"), "}", "on", "[", BCON_UTF8("a"),
                           BCON_UTF8("b.c"), "]", "whenMatched", BCON_UTF8("keepExisting"),
                           "whenNotMatched", BCON_UTF8("insert"), "}", "}", "]");
    bson_t *cmd2 = BCON_NEW("p", "[", "{", "$merge", BCON_UTF8("t"), "}", "]");
    dberr_t err;
    pipeline_t *p = parse_p(cmd, NULL, &err), *q = parse_p(cmd2, NULL, &err);
    const pipeline_output_t *o = pipeline_output(p);
    CHECK(o && o->is_merge && strcmp(o->db, "d") == 0 && strcmp(o->coll, "c") == 0,
          "into {db, coll}");
    CHECK(o && o->on_given && o->non == 2 && strcmp(o->on[0], "a") == 0 &&
              strcmp(o->on[1], "b.c") == 0,
          "on [a, b.c]");
    CHECK(o && o->when_matched == PIPELINE_WHEN_MATCHED_KEEP_EXISTING &&
              o->when_not_matched == PIPELINE_WHEN_NOT_MATCHED_INSERT &&
              o->when_matched_pipeline == NULL,
          "keepExisting / insert");
    o = pipeline_output(q);
    bson_iter_t it;
    CHECK(o && o->is_merge && strcmp(o->coll, "t") == 0 && o->db[0] == '\0' && !o->on_given &&
              o->non == 1 && strcmp(o->on[0], "_id") == 0 &&
              o->when_matched == PIPELINE_WHEN_MATCHED_MERGE &&
              o->when_not_matched == PIPELINE_WHEN_NOT_MATCHED_INSERT,
          "$merge: \"t\" takes the defaults (on _id, merge, insert)");
    CHECK(o && o->merge_spec && bson_iter_init_find(&it, o->merge_spec, "into") &&
              strcmp(bson_iter_utf8(&it, NULL), "t") == 0,
          "the string form's merge_spec is {into: \"t\"}");
    pipeline_destroy(p);
    pipeline_destroy(q);
    bson_destroy(cmd);
    bson_destroy(cmd2);
}

static void test_merge_when_matched_pipeline_sees_new_and_let(void)
{
    /* whenMatched: [{$set: {total: {$add: ["$total", "$$new.total", "$$bonus"]}, from: "$$src"}}]
     * with $merge let {bonus: "$extra"} and command let {src: "cmd"} */
    bson_t *cmd = BCON_NEW("p", "[", "{", "$merge", "{", "into", BCON_UTF8("c"), "whenMatched",
                           "[", "{", "$set", "{", "total", "{", "$add", "[", "$total",
                           "$$new.total", "$$bonus", "]", "}", "from", "$$src", "}", "}", "]",
                           "let", "{", "bonus", "$extra", "}", "}", "}", "]");
    bson_t *let = BCON_NEW("src", BCON_UTF8("cmd"));
    dberr_t err;
    pipeline_t *p = parse_p(cmd, let, &err);
    CHECK(p != NULL, "parses: %s", err.msg);
    const pipeline_output_t *o = pipeline_output(p);
    CHECK(o && o->when_matched == PIPELINE_WHEN_MATCHED_PIPELINE && o->when_matched_pipeline,
          "whenMatched is a pipeline");
    if (o && o->when_matched_pipeline) {
        bson_t *new_doc = BCON_NEW("_id", BCON_INT32(1), "total", BCON_INT32(5), "extra",
                                   BCON_INT32(100));
        bson_t vars = BSON_INITIALIZER;
        doclist_t l;
        bson_iter_t it;
        doclist_init(&l);
        doclist_push(&l, BCON_NEW("_id", BCON_INT32(1), "total", BCON_INT32(10)));
        CHECK(pipeline_merge_vars(o, new_doc, &vars, &err), "merge vars evaluate");
        CHECK(bson_iter_init_find(&it, &vars, "bonus") && bson_iter_as_int64(&it) == 100,
              "$$bonus is $extra of the new document");
        CHECK(bson_iter_init_find(&it, &vars, "new") && BSON_ITER_HOLDS_DOCUMENT(&it),
              "$$new is the new document");
        CHECK(pipeline_run_vars(o->when_matched_pipeline, &vars, &l, &err) && l.len == 1,
              "the whenMatched pipeline runs: %s", err.msg);
        CHECK(l.len == 1 && bson_iter_init_find(&it, l.docs[0], "total") &&
                  bson_iter_as_int64(&it) == 115,
              "total = existing 10 + new 5 + bonus 100");
        CHECK(l.len == 1 && bson_iter_init_find(&it, l.docs[0], "from") &&
                  strcmp(bson_iter_utf8(&it, NULL), "cmd") == 0,
              "the command's let is visible too");
        doclist_destroy(&l);
        bson_destroy(&vars);
        bson_destroy(new_doc);
    }
    pipeline_destroy(p);
    bson_destroy(cmd);
    bson_destroy(let);
}

static void test_documents_pipeline_is_collectionless(void)
{
    bson_t *cmd = BCON_NEW("p", "[", "{", "$documents", "[", "{", "a", BCON_INT32(1), "}", "]",
                           "}", "]");
    dberr_t err;
    pipeline_t *p = parse_p(cmd, NULL, &err);
    CHECK(p && pipeline_is_collectionless(p), "a $documents-first pipeline is collectionless");
    CHECK(!pipeline_is_collectionless(NULL), "NULL is not");
    doclist_t l;
    doclist_init(&l);
    CHECK(p && pipeline_run(p, &l, &err) && l.len == 1, "it runs on an empty input");
    doclist_destroy(&l);
    pipeline_destroy(p);
    bson_destroy(cmd);
}

/* The filter a leading $geoNear reads its source with: the query's
 * predicates on the key field and its own $and clauses go under one $and
 * (mongod ANDs the query with the near predicate), each field once. */
static void test_geonear_source_filter_names_each_field_once(void)
{
    bson_error_t je;
    bson_t *cmd = bson_new_from_json(
        (const uint8_t *)"{\"p\": [{\"$geoNear\": {\"near\": {\"type\": \"Point\", "
                         "\"coordinates\": [0, 0]}, \"distanceField\": \"d\", \"key\": \"loc\", "
                         "\"query\": {\"loc\": {\"$geoWithin\": {\"$centerSphere\": [[0, 0], "
                         "0.01]}}, \"k\": 1, \"$and\": [{\"j\": 2}]}}}]}",
        -1, &je);
    dberr_t err;
    pipeline_t *p = cmd ? parse_p(cmd, NULL, &err) : NULL;
    geonear_spec_t *g = p ? pipeline_leading_geonear(p) : NULL;
    CHECK(g != NULL, "the $geoNear parses");
    if (!g)
        goto cleanup;
    bson_t f;
    pipeline_geonear_source_filter(g, &f);
    int n_loc = 0, n_and = 0, n_k = 0, n_all = 0;
    bson_iter_t it, and;
    bson_iter_init(&it, &f);
    while (bson_iter_next(&it)) {
        n_all++;
        n_loc += strcmp(bson_iter_key(&it), "loc") == 0;
        n_k += strcmp(bson_iter_key(&it), "k") == 0;
        if (strcmp(bson_iter_key(&it), "$and") == 0) {
            n_and++;
            bson_iter_recurse(&it, &and);
            int clauses = 0;
            while (bson_iter_next(&and))
                clauses++;
            CHECK(clauses == 2, "$and holds {j: 2} and the query's loc, got %d", clauses);
        }
    }
    char *json = bson_as_relaxed_extended_json(&f, NULL);
    CHECK(n_all == 3 && n_loc == 1 && n_k == 1 && n_and == 1,
          "k, loc (the near) and $and, each once: %s", json);
    bson_free(json);
    matcher_t *m = matcher_new_near(&f, &err);
    CHECK(m && strcmp(matcher_near_path(m), "loc") == 0, "the near stays top-level");
    bson_t *in = BCON_NEW("loc", "[", BCON_DOUBLE(0.1), BCON_DOUBLE(0), "]", "k", BCON_INT32(1),
                          "j", BCON_INT32(2));
    bson_t *far = BCON_NEW("loc", "[", BCON_DOUBLE(2), BCON_DOUBLE(0), "]", "k", BCON_INT32(1),
                           "j", BCON_INT32(2));
    bson_t *other = BCON_NEW("loc", "[", BCON_DOUBLE(0.1), BCON_DOUBLE(0), "]", "k",
                             BCON_INT32(1), "j", BCON_INT32(3));
    CHECK(m && matcher_matches(m, in, NULL), "inside the query's circle, k and j match");
    CHECK(m && !matcher_matches(m, far, NULL), "outside the query's circle");
    CHECK(m && !matcher_matches(m, other, NULL), "the query's $and clause holds");
    matcher_destroy(m);
    bson_destroy(in);
    bson_destroy(far);
    bson_destroy(other);
    bson_destroy(&f);
cleanup:
    pipeline_destroy(p);
    if (cmd)
        bson_destroy(cmd);
}

int main(void)
{
    UNIT_RUN(test_out_is_exposed_and_not_performed);
    UNIT_RUN(test_merge_spec_is_parsed);
    UNIT_RUN(test_merge_when_matched_pipeline_sees_new_and_let);
    UNIT_RUN(test_documents_pipeline_is_collectionless);
    UNIT_RUN(test_leading_match_is_exposed);
    UNIT_RUN(test_doclist_push_grows_and_destroy_frees);
    UNIT_RUN(test_group_handles_many_distinct_keys);
    UNIT_RUN(test_geonear_source_filter_names_each_field_once);
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
