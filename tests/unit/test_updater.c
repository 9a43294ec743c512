/* test_updater: drives src/doc/updater.c from tests/unit/cases/updater.json
 * (document, update, options → exact resulting BSON bytes or error code),
 * plus a few behaviours the case file cannot express. */
#include <string.h>

#include "doc/updater.h"
#include "unit.h"

/* Applies one case; returns 1 when it behaved as the case says. */
static int run_case(bson_iter_t *case_it, char *name_out, size_t name_len)
{
    bson_t c, doc, filters, expect;
    bson_iter_t it, upd;
    uint32_t len;
    const uint8_t *data;
    const char *name = "(unnamed)";
    bool has_filters = false, insert = false, has_result = false, has_changed = false,
         want_changed = false;
    int positional = -1, want_code = 0;
    dberr_t err;
    int ok = 1;

    bson_iter_document(case_it, &len, &data);
    bson_init_static(&c, data, len);
    if (bson_iter_init_find(&it, &c, "name")) {
        name = bson_iter_utf8(&it, NULL);
    }
    snprintf(name_out, name_len, "%s", name);
    bson_init(&doc);
    if (bson_iter_init_find(&it, &c, "doc")) {
        bson_iter_document(&it, &len, &data);
        bson_destroy(&doc);
        bson_init_static(&doc, data, len);
    }
    if (bson_iter_init_find(&it, &c, "arrayFilters")) {
        bson_iter_array(&it, &len, &data);
        bson_init_static(&filters, data, len);
        has_filters = true;
    }
    if (bson_iter_init_find(&it, &c, "positional")) {
        positional = bson_iter_as_int64(&it) < 0 ? -1 : (int)bson_iter_as_int64(&it);
    }
    if (bson_iter_init_find(&it, &c, "insert")) {
        insert = bson_iter_as_bool(&it);
    }
    if (bson_iter_init_find(&it, &c, "error")) {
        want_code = (int)bson_iter_as_int64(&it);
    }
    if (bson_iter_init_find(&it, &c, "changed")) {
        has_changed = true;
        want_changed = bson_iter_as_bool(&it);
    }
    if (bson_iter_init_find(&it, &c, "result")) {
        bson_iter_document(&it, &len, &data);
        bson_init_static(&expect, data, len);
        has_result = true;
    }
    if (!bson_iter_init_find(&upd, &c, "update")) {
        fprintf(stderr, "  case %s has no update\n", name);
        return 0;
    }

    dberr_clear(&err);
    updater_t *u = updater_new(&upd, has_filters ? &filters : NULL, &err);
    bson_t out = BSON_INITIALIZER;
    bool changed = false;
    bool applied = u && updater_apply(u, &doc, insert, positional, &out, &changed, &err);

    if (want_code) {
        if (applied) {
            char *j = bson_as_relaxed_extended_json(&out, NULL);
            fprintf(stderr, "  %s: expected error %d, got success %s\n", name, want_code, j);
            bson_free(j);
            ok = 0;
        } else if (err.code != want_code) {
            fprintf(stderr, "  %s: expected error %d, got %d: %s\n", name, want_code, err.code,
                    err.msg);
            ok = 0;
        } else if (out.len != 5) {
            fprintf(stderr, "  %s: output not left empty on failure\n", name);
            ok = 0;
        } else if (bson_iter_init_find(&it, &c, "errmsg") &&
                   strcmp(bson_iter_utf8(&it, NULL), err.msg) != 0) {
            fprintf(stderr, "  %s: message\n    want: %s\n    got:  %s\n", name,
                    bson_iter_utf8(&it, NULL), err.msg);
            ok = 0;
        }
    } else if (!applied) {
        fprintf(stderr, "  %s: unexpected error %d: %s\n", name, err.code, err.msg);
        ok = 0;
    } else {
        if (has_result && (out.len != expect.len ||
                           memcmp(bson_get_data(&out), bson_get_data(&expect), out.len) != 0)) {
            char *g = bson_as_canonical_extended_json(&out, NULL);
            char *w = bson_as_canonical_extended_json(&expect, NULL);
            fprintf(stderr, "  %s: result differs\n    want: %s\n    got:  %s\n", name, w, g);
            bson_free(g);
            bson_free(w);
            ok = 0;
        }
        if (has_changed && changed != want_changed) {
            fprintf(stderr, "  %s: changed is %d, want %d\n", name, changed, want_changed);
            ok = 0;
        }
        /* resultTypes: {"dotted.path": "date"} checks only the stored type (for $currentDate). */
        if (bson_iter_init_find(&it, &c, "resultTypes")) {
            bson_iter_t ti;
            bson_iter_recurse(&it, &ti);
            while (bson_iter_next(&ti)) {
                bson_iter_t found, desc;
                bson_iter_init(&found, &out);
                const char *want = bson_iter_utf8(&ti, NULL);
                if (!bson_iter_find_descendant(&found, bson_iter_key(&ti), &desc)) {
                    fprintf(stderr, "  %s: %s missing\n", name, bson_iter_key(&ti));
                    ok = 0;
                } else if ((strcmp(want, "date") == 0 && !BSON_ITER_HOLDS_DATE_TIME(&desc)) ||
                           (strcmp(want, "timestamp") == 0 && !BSON_ITER_HOLDS_TIMESTAMP(&desc))) {
                    fprintf(stderr, "  %s: %s is not a %s\n", name, bson_iter_key(&ti), want);
                    ok = 0;
                }
            }
        }
    }
    bson_destroy(&out);
    updater_destroy(u);
    return ok;
}

static void test_cases_from_json_file(void)
{
    bson_t *file = unit_load_json("cases/updater.json");
    bson_iter_t it, cases;
    char name[256];
    CHECK(bson_iter_init_find(&it, file, "cases") && BSON_ITER_HOLDS_ARRAY(&it),
          "updater.json has a cases array");
    bson_iter_recurse(&it, &cases);
    while (bson_iter_next(&cases)) {
        int ok = run_case(&cases, name, sizeof name);
        unit_case(name, ok);
    }
    bson_destroy(file);
}

static updater_t *parse_json(const char *json, dberr_t *err)
{
    bson_error_t berr;
    bson_t *wrap = bson_new_from_json((const uint8_t *)json, -1, &berr);
    bson_iter_t it;
    bson_iter_init_find(&it, wrap, "u");
    updater_t *u = updater_new(&it, NULL, err);
    bson_destroy(wrap);
    return u;
}

static void test_updater_kind_reports_operator_replacement_and_pipeline(void)
{
    dberr_t err;
    updater_t *u = parse_json("{\"u\": {\"$set\": {\"a\": 1}}}", &err);
    CHECK(u && updater_kind(u) == UPDATER_OPERATORS, "operator document is UPDATER_OPERATORS");
    updater_destroy(u);
    u = parse_json("{\"u\": {\"a\": 1}}", &err);
    CHECK(u && updater_kind(u) == UPDATER_REPLACEMENT, "plain document is UPDATER_REPLACEMENT");
    updater_destroy(u);
    updater_destroy(NULL);
}

static void test_updater_is_reusable_across_documents(void)
{
    dberr_t err;
    updater_t *u = parse_json("{\"u\": {\"$inc\": {\"n\": 1}}}", &err);
    bson_t *d1 = BCON_NEW("_id", BCON_INT32(1), "n", BCON_INT32(1));
    bson_t *d2 = BCON_NEW("_id", BCON_INT32(2));
    bson_t o1 = BSON_INITIALIZER, o2 = BSON_INITIALIZER;
    bool ch1 = false, ch2 = false;
    CHECK(u && updater_apply(u, d1, false, -1, &o1, &ch1, &err) && ch1, "first doc updated");
    CHECK(u && updater_apply(u, d2, false, -1, &o2, &ch2, &err) && ch2, "second doc updated");
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, &o1, "n") && bson_iter_int32(&it) == 2, "n became 2");
    CHECK(bson_iter_init_find(&it, &o2, "n") && bson_iter_int32(&it) == 1, "n created as 1");
    bson_destroy(&o1);
    bson_destroy(&o2);
    bson_destroy(d1);
    bson_destroy(d2);
    updater_destroy(u);
}

static void test_current_date_is_close_to_the_wall_clock(void)
{
    dberr_t err;
    updater_t *u = parse_json("{\"u\": {\"$currentDate\": {\"t\": true}}}", &err);
    bson_t *d = BCON_NEW("_id", BCON_INT32(1));
    bson_t o = BSON_INITIALIZER;
    bool ch;
    int64_t before = (int64_t)time(NULL) * 1000;
    CHECK(u && updater_apply(u, d, false, -1, &o, &ch, &err), "$currentDate applies");
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, &o, "t") && BSON_ITER_HOLDS_DATE_TIME(&it) &&
              bson_iter_date_time(&it) >= before - 1000 &&
              bson_iter_date_time(&it) <= before + 5000,
          "t holds a date near now");
    bson_destroy(&o);
    bson_destroy(d);
    updater_destroy(u);
}

/* {$type: "date"} cannot be written in libbson's JSON (it reads it as binary). */
static void test_current_date_type_date_stores_a_date(void)
{
    dberr_t err;
    bson_t *spec = BCON_NEW("u", "{", "$currentDate", "{", "t", "{", "$type", BCON_UTF8("date"),
                            "}", "}", "}");
    bson_iter_t it;
    bson_iter_init_find(&it, spec, "u");
    updater_t *u = updater_new(&it, NULL, &err);
    bson_t *d = BCON_NEW("_id", BCON_INT32(1), "t", BCON_INT32(0));
    bson_t o = BSON_INITIALIZER;
    bool ch = false;
    CHECK(u && updater_apply(u, d, false, -1, &o, &ch, &err) && ch,
          "$currentDate {$type: date} applies");
    CHECK(bson_iter_init_find(&it, &o, "t") && BSON_ITER_HOLDS_DATE_TIME(&it),
          "t became a date in place");
    bson_destroy(&o);
    bson_destroy(d);
    bson_destroy(spec);
    updater_destroy(u);
}

static void test_failed_apply_leaves_output_empty(void)
{
    dberr_t err;
    updater_t *u = parse_json("{\"u\": {\"$inc\": {\"a\": 1}}}", &err);
    bson_t *d = BCON_NEW("_id", BCON_INT32(1), "a", BCON_UTF8("x"));
    bson_t o = BSON_INITIALIZER;
    bson_append_int32(&o, "junk", -1, 1);
    bool ch = true;
    CHECK(u && !updater_apply(u, d, false, -1, &o, &ch, &err), "$inc on a string fails");
    CHECK(err.code == 14 && o.len == 5 && !ch, "error 14, empty output, changed false");
    bson_destroy(&o);
    bson_destroy(d);
    updater_destroy(u);
}

static void check_deep_set(int depth, int want_code)
{
    dberr_t err;
    dberr_clear(&err);
    bson_t *level = bson_new();
    bson_append_int32(level, "x", -1, 1);
    for (int i = 0; i < depth; i++) {
        bson_t *outer = bson_new();
        bson_append_document(outer, "d", -1, level);
        bson_destroy(level);
        level = outer;
    }
    bson_t *set = bson_new();
    bson_append_document(set, "a", -1, level);
    bson_t *spec = bson_new();
    bson_append_document(spec, "$set", -1, set);
    bson_t *wrap = bson_new();
    bson_append_document(wrap, "u", -1, spec);
    bson_iter_t it;
    bson_iter_init_find(&it, wrap, "u");
    updater_t *u = updater_new(&it, NULL, &err);
    bson_t *doc = BCON_NEW("_id", BCON_INT32(1));
    bson_t out = BSON_INITIALIZER;
    bool ch;
    bool ok = u && updater_apply(u, doc, false, -1, &out, &ch, &err);
    CHECK(!ok && err.code == want_code, "a %d-deep $set value fails with %d (got %d)", depth,
          want_code, err.code);
    bson_destroy(&out);
    bson_destroy(doc);
    updater_destroy(u);
    bson_destroy(wrap);
    bson_destroy(spec);
    bson_destroy(set);
    bson_destroy(level);
}

static void test_value_nested_past_180_levels_is_overflow(void)
{
    check_deep_set(185, 15);
}

static void test_deeply_nested_set_is_refused_not_crashing(void)
{
    check_deep_set(5000, 15);
}

int main(void)
{
    UNIT_RUN(test_cases_from_json_file);
    UNIT_RUN(test_updater_kind_reports_operator_replacement_and_pipeline);
    UNIT_RUN(test_updater_is_reusable_across_documents);
    UNIT_RUN(test_current_date_is_close_to_the_wall_clock);
    UNIT_RUN(test_current_date_type_date_stores_a_date);
    UNIT_RUN(test_failed_apply_leaves_output_empty);
    UNIT_RUN(test_deeply_nested_set_is_refused_not_crashing);
    UNIT_RUN(test_value_nested_past_180_levels_is_overflow);
    return unit_finish();
}
