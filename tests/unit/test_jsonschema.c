/* test_jsonschema: $jsonSchema driven by cases/jsonschema.json: {schema,
 * doc, match} checks jsonschema_matches, {schema, error[, errmsg]} the code
 * and message jsonschema_new refuses with, {schema, doc, details} the
 * errInfo.details jsonschema_explain builds (mongod 7's shape); plus the
 * query operator through the matcher and the validator-level details. */
#include <string.h>

#include "doc/docvalidation.h"
#include "doc/jsonschema.h"
#include "doc/matcher.h"
#include "unit.h"

static bool get_doc(const bson_iter_t *c, const char *key, bson_t *out)
{
    bson_iter_t it;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_recurse(c, &it) || !bson_iter_find(&it, key) ||
        (!BSON_ITER_HOLDS_DOCUMENT(&it)))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(out, data, len);
}

static const char *get_str(const bson_iter_t *c, const char *key)
{
    bson_iter_t it;
    if (bson_iter_recurse(c, &it) && bson_iter_find(&it, key) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return NULL;
}

static bool get_field(const bson_iter_t *c, const char *key, bson_iter_t *out)
{
    return bson_iter_recurse(c, out) && bson_iter_find(out, key);
}

static bool same_json(const bson_t *a, const bson_t *b)
{
    char *ja = bson_as_canonical_extended_json(a, NULL);
    char *jb = bson_as_canonical_extended_json(b, NULL);
    bool same = strcmp(ja, jb) == 0;
    if (!same)
        fprintf(stderr, "  got  %s\n  want %s\n", ja, jb);
    bson_free(ja);
    bson_free(jb);
    return same;
}

static void run_case(const bson_iter_t *c)
{
    const char *name = get_str(c, "name");
    bson_t schema, doc, want;
    bson_iter_t f;
    if (!name || !get_doc(c, "schema", &schema)) {
        unit_case(name ? name : "(unnamed case)", 0);
        return;
    }
    dberr_t err;
    dberr_clear(&err);
    jsonschema_t *s = jsonschema_new(&schema, 0, &err);
    bool pass = false;
    if (get_field(c, "error", &f)) {
        const char *msg = get_str(c, "errmsg");
        pass = !s && err.code == bson_iter_as_int64(&f) && (!msg || strstr(err.msg, msg));
        if (!pass)
            fprintf(stderr, "  %s: want error %d %s, got %s code %d %s\n", name,
                    (int)bson_iter_as_int64(&f), msg ? msg : "", s ? "ok" : "error", err.code,
                    err.msg);
    } else if (!s) {
        fprintf(stderr, "  %s: refused: %d %s\n", name, err.code, err.msg);
    } else if (!get_doc(c, "doc", &doc)) {
        fprintf(stderr, "  %s: no doc\n", name);
    } else if (get_field(c, "match", &f)) {
        pass = jsonschema_matches(s, &doc) == bson_iter_as_bool(&f);
        /* the query operator says the same through the matcher */
        bson_t filter = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT(&filter, "$jsonSchema", &schema);
        matcher_t *m = matcher_new(&filter, &err);
        pass = pass && m && matcher_matches(m, &doc, NULL) == bson_iter_as_bool(&f);
        matcher_destroy(m);
        bson_destroy(&filter);
        if (!pass)
            fprintf(stderr, "  %s: want match=%d\n", name, bson_iter_as_bool(&f));
    } else if (get_doc(c, "details", &want)) {
        bson_t got = BSON_INITIALIZER;
        jsonschema_explain(s, &doc, false, &got);
        pass = same_json(&got, &want);
        bson_destroy(&got);
    }
    jsonschema_destroy(s);
    unit_case(name, pass);
}

static void run_validator_case(const bson_iter_t *c)
{
    const char *name = get_str(c, "name");
    bson_t validator, doc, want;
    if (!name || !get_doc(c, "validator", &validator) || !get_doc(c, "doc", &doc) ||
        !get_doc(c, "details", &want)) {
        unit_case(name ? name : "(unnamed validator case)", 0);
        return;
    }
    bson_t got = BSON_INITIALIZER;
    docvalidation_explain(&validator, &doc, false, &got);
    unit_case(name, same_json(&got, &want));
    bson_destroy(&got);
}

static void test_schema_nested_too_deep_is_refused(void)
{
    bson_t *schema = bson_new();
    for (int i = 0; i < 150; i++) { /* {not: {not: ... {}}} */
        bson_t *outer = bson_new();
        BSON_APPEND_DOCUMENT(outer, "not", schema);
        bson_destroy(schema);
        schema = outer;
    }
    dberr_t err;
    jsonschema_t *js = jsonschema_new(schema, 0, &err);
    CHECK(!js && err.code == 2, "a schema nested 150 deep is refused with BadValue, got %d",
          err.code);
    jsonschema_destroy(js);
    bson_destroy(schema);
}

int main(void)
{
    bson_t *file = unit_load_json("cases/jsonschema.json");
    bson_iter_t it, c;
    int n = 0;
    if (bson_iter_init_find(&it, file, "cases") && bson_iter_recurse(&it, &c))
        for (; bson_iter_next(&c); n++)
            run_case(&c);
    if (bson_iter_init_find(&it, file, "validators") && bson_iter_recurse(&it, &c))
        for (; bson_iter_next(&c); n++)
            run_validator_case(&c);
    unit_case("jsonschema.json holds at least 60 cases", n >= 60);
    bson_destroy(file);
    UNIT_RUN(test_schema_nested_too_deep_is_refused);
    return unit_finish();
}
