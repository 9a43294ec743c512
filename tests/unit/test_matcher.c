/* test_matcher: query filters driven by cases/matcher.json (matches, array
 * positions, error codes, upsert seeds) plus named checks of
 * matcher_bounds and of matchers reused across documents. */
#include <string.h>

#include "doc/compare.h"
#include "doc/matcher.h"
#include "unit.h"

static bool get_doc(const bson_iter_t *parent, const char *key, bson_t *out)
{
    bson_iter_t it;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_recurse(parent, &it) || !bson_iter_find(&it, key) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(out, data, len);
}

static bool get_int(const bson_iter_t *parent, const char *key, int *out)
{
    bson_iter_t it;
    if (!bson_iter_recurse(parent, &it) || !bson_iter_find(&it, key))
        return false;
    *out = bson_iter_as_int64(&it) ? (int)bson_iter_as_int64(&it) : 0;
    return true;
}

static const char *get_name(const bson_iter_t *parent)
{
    bson_iter_t it;
    if (bson_iter_recurse(parent, &it) && bson_iter_find(&it, "name") && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return "(unnamed)";
}

static void run_match_case(const bson_iter_t *c)
{
    const char *name = get_name(c);
    bson_t filter, doc;
    int want_err = 0, want_pos = 0;
    bool has_pos = get_int(c, "pos", &want_pos);
    if (!get_doc(c, "filter", &filter)) {
        unit_case(name, 0);
        return;
    }
    dberr_t err;
    dberr_clear(&err);
    matcher_t *m = matcher_new(&filter, &err);
    if (get_int(c, "error", &want_err)) {
        bool ok = m == NULL && err.code == want_err;
        if (!ok)
            fprintf(stderr, "  %s: want error %d, got %s code %d (%s)\n", name, want_err,
                    m ? "a matcher" : "error", err.code, err.msg);
        unit_case(name, ok);
        matcher_destroy(m);
        return;
    }
    bson_iter_t it;
    bool want = bson_iter_recurse(c, &it) && bson_iter_find(&it, "match") && bson_iter_as_bool(&it);
    if (!m || !get_doc(c, "doc", &doc)) {
        fprintf(stderr, "  %s: compile failed: %d %s\n", name, err.code, err.msg);
        unit_case(name, 0);
        matcher_destroy(m);
        return;
    }
    int pos = -7;
    bool got = matcher_matches(m, &doc, &pos);
    bool ok = got == want && (!has_pos || pos == want_pos);
    if (!ok)
        fprintf(stderr, "  %s: want match=%d pos=%d, got match=%d pos=%d\n", name, want,
                has_pos ? want_pos : -99, got, pos);
    /* A matcher is reusable: the same answer a second time. */
    ok = ok && matcher_matches(m, &doc, NULL) == got;
    unit_case(name, ok);
    matcher_destroy(m);
}

static void run_seed_case(const bson_iter_t *c)
{
    const char *name = get_name(c);
    bson_t filter, want_seed;
    int want_err = 0;
    if (!get_doc(c, "filter", &filter)) {
        unit_case(name, 0);
        return;
    }
    bson_t out = BSON_INITIALIZER;
    dberr_t err;
    dberr_clear(&err);
    bool ok = matcher_upsert_seed(&filter, &out, &err);
    bool pass;
    if (get_int(c, "error", &want_err)) {
        pass = !ok && err.code == want_err;
        if (!pass)
            fprintf(stderr, "  %s: want error %d, got ok=%d code %d\n", name, want_err, ok, err.code);
    } else {
        pass = ok && get_doc(c, "seed", &want_seed) && bson_equal(&out, &want_seed);
        if (!pass) {
            char *j = bson_as_relaxed_extended_json(&out, NULL);
            fprintf(stderr, "  %s: got %s (%s)\n", name, j, err.msg);
            bson_free(j);
        }
    }
    unit_case(name, pass);
    bson_destroy(&out);
}

static void run_case_file(void)
{
    bson_t *file = unit_load_json("cases/matcher.json");
    bson_iter_t it, c;
    int n = 0;
    if (bson_iter_init_find(&it, file, "cases") && bson_iter_recurse(&it, &c)) {
        while (bson_iter_next(&c)) {
            run_match_case(&c);
            n++;
        }
    }
    if (bson_iter_init_find(&it, file, "seeds") && bson_iter_recurse(&it, &c)) {
        while (bson_iter_next(&c)) {
            run_seed_case(&c);
            n++;
        }
    }
    unit_case("matcher.json holds at least 100 cases", n >= 100);
    bson_destroy(file);
}

static void test_bounds_combine_top_level_and_and_members(void)
{
    bson_t *f = BCON_NEW("a", "{", "$gte", BCON_INT32(1), "$lt", BCON_INT32(10), "}", "$and", "[", "{",
                         "a", "{", "$gt", BCON_INT32(3), "}", "}", "]", "b", BCON_UTF8("x"));
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    matcher_bounds_t b;
    CHECK(m && matcher_bounds(m, "a", &b), "filter bounds path a");
    if (m) {
        CHECK(b.has_lower && b.lower.value.v_int32 == 3 && !b.lower_inclusive,
              "the tighter lower bound $gt 3 wins over $gte 1");
        CHECK(b.has_upper && b.upper.value.v_int32 == 10 && !b.upper_inclusive, "upper bound is $lt 10");
        CHECK(!b.has_eq, "no equality on a");
        CHECK(matcher_bounds(m, "b", &b) && b.has_eq && b.eq.value_type == BSON_TYPE_UTF8,
              "equality on b");
        CHECK(!matcher_bounds(m, "c", &b), "no bounds on an unconstrained path");
    }
    matcher_destroy(m);
    bson_destroy(f);
}

static void test_bounds_ignore_or_and_not(void)
{
    bson_t *f = BCON_NEW("$or", "[", "{", "a", BCON_INT32(1), "}", "{", "a", BCON_INT32(2), "}", "]",
                         "b", "{", "$not", "{", "$gt", BCON_INT32(1), "}", "}");
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    matcher_bounds_t b;
    CHECK(m && !matcher_bounds(m, "a", &b), "predicates under $or give no bounds");
    CHECK(m && !matcher_bounds(m, "b", &b), "predicates under $not give no bounds");
    matcher_destroy(m);
    bson_destroy(f);
}

static void test_in_values_come_from_the_top_level_and_without_regexes(void)
{
    bson_t *f = BCON_NEW("$and", "[", "{", "a", "{", "$in", "[", BCON_INT32(1), BCON_UTF8("x"),
                         BCON_NULL, "]", "}", "}", "]", "b", "{", "$in", "[", BCON_INT32(2),
                         BCON_REGEX("^y", ""), "]", "}", "c", "{", "$in", "[", "]", "}", "$or",
                         "[", "{", "d", "{", "$in", "[", BCON_INT32(3), "]", "}", "}", "]");
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    const bson_value_t *vals = NULL;
    size_t n = 99;
    CHECK(m && matcher_in_values(m, "a", &vals, &n) && n == 3, "$in on a under $and: 3 values");
    if (m && n == 3)
        CHECK(vals[0].value_type == BSON_TYPE_INT32 && vals[1].value_type == BSON_TYPE_UTF8 &&
                  vals[2].value_type == BSON_TYPE_NULL,
              "the values in filter order");
    CHECK(m && !matcher_in_values(m, "b", &vals, &n), "a regex in the list: no point values");
    CHECK(m && matcher_in_values(m, "c", &vals, &n) && n == 0, "an empty $in: zero values");
    CHECK(m && !matcher_in_values(m, "d", &vals, &n), "an $in under $or gives none");
    CHECK(m && !matcher_in_values(m, "e", &vals, &n), "no $in on e");
    matcher_destroy(m);
    bson_destroy(f);
}

static void test_sargable_paths_as_mongods_relevant_fields(void)
{
    bson_t *f = BCON_NEW("$or", "[", "{", "a", BCON_INT32(1), "}", "{", "b", "{", "$exists",
                         BCON_BOOL(true), "}", "}", "]", "c", "{", "$not", "{", "$regex",
                         BCON_UTF8("^x"), "}", "}", "$nor", "[", "{", "d", BCON_INT32(1), "}", "]",
                         "e", "{", "$size", BCON_INT32(2), "}");
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    CHECK(m && matcher_path_sargable(m, "a"), "an equality under $or counts");
    CHECK(m && matcher_path_sargable(m, "b"), "$exists counts");
    CHECK(m && matcher_path_sargable(m, "c"), "a regex under $not counts");
    CHECK(m && !matcher_path_sargable(m, "d"), "nothing under $nor counts");
    CHECK(m && !matcher_path_sargable(m, "e"), "$size does not count");
    CHECK(m && !matcher_path_sargable(m, "z"), "an absent path does not count");
    matcher_destroy(m);
    bson_destroy(f);
}

static void test_empty_filter_is_empty(void)
{
    bson_t empty = BSON_INITIALIZER;
    dberr_t err;
    matcher_t *m = matcher_new(&empty, &err);
    CHECK(m && matcher_is_empty(m), "{} compiles to an empty matcher");
    matcher_destroy(m);
    bson_t *f = BCON_NEW("a", BCON_INT32(1));
    m = matcher_new(f, &err);
    CHECK(m && !matcher_is_empty(m), "{a: 1} is not empty");
    matcher_destroy(m);
    bson_destroy(f);
}

static void test_error_messages_read_like_mongod(void)
{
    dberr_t err;
    bson_t *f = BCON_NEW("a", "{", "$foo", BCON_INT32(1), "}");
    CHECK(!matcher_new(f, &err) && strcmp(err.msg, "unknown operator: $foo") == 0,
          "unknown operator message, got '%s'", err.msg);
    bson_destroy(f);
    f = BCON_NEW("$foo", BCON_INT32(1));
    CHECK(!matcher_new(f, &err) && strcmp(err.msg, "unknown top level operator: $foo") == 0,
          "unknown top level operator message, got '%s'", err.msg);
    bson_destroy(f);
    f = BCON_NEW("$and", "[", "]");
    CHECK(!matcher_new(f, &err) && strcmp(err.msg, "$and/$or/$nor must be a nonempty array") == 0,
          "empty $and message, got '%s'", err.msg);
    bson_destroy(f);
    f = BCON_NEW("a", "{", "$in", BCON_INT32(1), "}");
    CHECK(!matcher_new(f, &err) && strcmp(err.msg, "$in needs an array") == 0,
          "$in message, got '%s'", err.msg);
    bson_destroy(f);
    f = BCON_NEW("a", "{", "$regex", BCON_UTF8("("), "}");
    CHECK(!matcher_new(f, &err) && strncmp(err.msg, "Regular expression is invalid: ", 31) == 0,
          "bad regex message, got '%s'", err.msg);
    bson_destroy(f);
}

/* One $type case: filter {a: {$type: spec}} against {a: value}. */
static bool type_case(bson_t *spec_holder, bson_t *doc, bool want, int want_err)
{
    bson_t filter = BSON_INITIALIZER, ops;
    bson_iter_t it;
    bson_iter_init_find(&it, spec_holder, "t");
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "a", &ops);
    bson_append_value(&ops, "$type", -1, bson_iter_value(&it));
    bson_append_document_end(&filter, &ops);
    dberr_t err;
    dberr_clear(&err);
    matcher_t *m = matcher_new(&filter, &err);
    bool ok = want_err ? (!m && err.code == want_err) : (m && matcher_matches(m, doc, NULL) == want);
    matcher_destroy(m);
    bson_destroy(&filter);
    bson_destroy(spec_holder);
    bson_destroy(doc);
    return ok;
}

static void test_type_matches_codes_aliases_and_number(void)
{
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("string")), BCON_NEW("a", BCON_UTF8("x")), true, 0),
          "$type 'string' matches a string");
    CHECK(type_case(BCON_NEW("t", BCON_INT32(2)), BCON_NEW("a", BCON_UTF8("x")), true, 0),
          "$type 2 matches a string");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("number")), BCON_NEW("a", BCON_INT64(1)), true, 0),
          "$type 'number' matches a long");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("number")), BCON_NEW("a", BCON_UTF8("1")), false, 0),
          "$type 'number' does not match a string");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("array")), BCON_NEW("a", "[", "]"), true, 0),
          "$type 'array' matches an empty array");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("int")),
                    BCON_NEW("a", "[", BCON_DOUBLE(1.5), BCON_INT32(2), "]"), true, 0),
          "$type 'int' matches an array element");
    CHECK(type_case(BCON_NEW("t", "[", BCON_UTF8("string"), BCON_UTF8("bool"), "]"),
                    BCON_NEW("a", BCON_BOOL(true)), true, 0),
          "$type list of aliases matches a bool");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("null")), BCON_NEW("b", BCON_INT32(1)), false, 0),
          "$type 'null' does not match a missing field");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("double")), BCON_NEW("a", BCON_INT32(1)), false, 0),
          "$type 'double' does not match an int");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("minKey")), BCON_NEW("a", BCON_MINKEY), true, 0),
          "$type 'minKey' matches MinKey");
    CHECK(type_case(BCON_NEW("t", BCON_INT32(127)), BCON_NEW("a", BCON_MAXKEY), true, 0),
          "$type 127 matches MaxKey");
    CHECK(type_case(BCON_NEW("t", BCON_DOUBLE(18.0)), BCON_NEW("a", BCON_INT64(1)), true, 0),
          "$type 18.0 matches a long");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("object")), BCON_NEW("a", "{", "b", BCON_INT32(1), "}"),
                    true, 0),
          "$type 'object' matches a document");
    CHECK(type_case(BCON_NEW("t", BCON_UTF8("foo")), BCON_NEW("a", BCON_INT32(1)), false,
                    DBERR_BAD_VALUE),
          "$type 'foo' is a BadValue");
    CHECK(type_case(BCON_NEW("t", BCON_INT32(42)), BCON_NEW("a", BCON_INT32(1)), false,
                    DBERR_BAD_VALUE),
          "$type 42 is a BadValue");
}

/* Filter {a: {$regex: pattern[, $options: options]}} against {a: value};
 * `options_first` puts $options before $regex. */
static bool regex_op_case(const char *pattern, const char *options, bool options_first,
                          const char *value, bool want, int want_err)
{
    bson_t filter = BSON_INITIALIZER, ops;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "a", &ops);
    if (options && options_first)
        BSON_APPEND_UTF8(&ops, "$options", options);
    if (pattern)
        BSON_APPEND_UTF8(&ops, "$regex", pattern);
    if (options && !options_first)
        BSON_APPEND_UTF8(&ops, "$options", options);
    bson_append_document_end(&filter, &ops);
    bson_t *doc = BCON_NEW("a", BCON_UTF8(value));
    dberr_t err;
    dberr_clear(&err);
    matcher_t *m = matcher_new(&filter, &err);
    bool ok = want_err ? (!m && err.code == want_err) : (m && matcher_matches(m, doc, NULL) == want);
    matcher_destroy(m);
    bson_destroy(&filter);
    bson_destroy(doc);
    return ok;
}

static void test_regex_operator_with_options(void)
{
    CHECK(regex_op_case("^ab", NULL, false, "abc", true, 0), "$regex '^ab' matches 'abc'");
    CHECK(regex_op_case("^AB", NULL, false, "abc", false, 0), "$regex is case sensitive by default");
    CHECK(regex_op_case("^AB", "i", false, "abc", true, 0), "$options i makes it case insensitive");
    CHECK(regex_op_case("B", "i", true, "abc", true, 0), "$options may come before $regex");
    CHECK(regex_op_case("a.c", "s", false, "a\nc", true, 0), "$options s lets dot match a newline");
    CHECK(regex_op_case("a.c", NULL, false, "a\nc", false, 0), "dot does not match a newline by default");
    CHECK(regex_op_case("^x$", "m", false, "a\nx", true, 0), "$options m anchors at line starts");
    CHECK(regex_op_case("^x$", NULL, false, "a\nx", false, 0), "without m, ^ anchors at the start only");
    CHECK(regex_op_case("a b c", "x", false, "abc", true, 0), "$options x ignores pattern whitespace");
    CHECK(regex_op_case("\u00e9$", NULL, false, "caf\u00e9", true, 0), "UTF-8 pattern and subject");
    CHECK(regex_op_case("(", NULL, false, "x", false, 51091), "an invalid pattern is Location51091");
    CHECK(regex_op_case("a", "z", false, "x", false, 51108), "an unknown option is Location51108");
    CHECK(regex_op_case(NULL, "i", false, "x", false, DBERR_BAD_VALUE), "$options alone is a BadValue");
}

static void test_regex_operator_accepts_a_regex_value(void)
{
    bson_t *f = BCON_NEW("a", "{", "$regex", BCON_REGEX("^A", "i"), "}");
    bson_t *d = BCON_NEW("a", BCON_UTF8("abc"));
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    CHECK(m && matcher_matches(m, d, NULL), "{$regex: /^A/i} keeps the regex flags");
    matcher_destroy(m);
    bson_destroy(f);
    f = BCON_NEW("a", "{", "$regex", BCON_REGEX("^A", "i"), "$options", BCON_UTF8("m"), "}");
    m = matcher_new(f, &err);
    CHECK(!m && err.code == 51074, "flags in both the regex and $options are rejected");
    matcher_destroy(m);
    bson_destroy(f);
    f = BCON_NEW("a", "{", "$regex", BCON_INT32(1), "}");
    m = matcher_new(f, &err);
    CHECK(!m && err.code == DBERR_BAD_VALUE, "$regex of a number is a BadValue");
    matcher_destroy(m);
    bson_destroy(f);
    bson_destroy(d);
}

static void test_deeply_nested_filter_is_rejected_not_crashing(void)
{
    /* {$and: [{$and: [ ... ]}]} 200 levels deep */
    bson_t *docs[201];
    docs[0] = BCON_NEW("a", BCON_INT32(1));
    for (int i = 1; i <= 200; i++) {
        docs[i] = bson_new();
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(docs[i], "$and", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", docs[i - 1]);
        bson_append_array_end(docs[i], &arr);
    }
    dberr_t err;
    matcher_t *m = matcher_new(docs[200], &err);
    CHECK(m == NULL && err.code == DBERR_BAD_VALUE, "a 200-deep filter is a BadValue");
    matcher_destroy(m);
    for (int i = 0; i <= 200; i++)
        bson_destroy(docs[i]);
}


static void test_let_variables_reach_expr(void)
{
    bson_t *f = BCON_NEW("$expr", "{", "$eq", "[", "$_id", "$$id", "]", "}");
    bson_t *let = BCON_NEW("id", "{", "$add", "[", BCON_INT32(1), BCON_INT32(1), "]", "}");
    bson_t *d1 = BCON_NEW("_id", BCON_INT32(1)), *d2 = BCON_NEW("_id", BCON_INT32(2));
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    CHECK(m != NULL, "a filter reading $$id compiles before its let is known");
    if (m) {
        matcher_set_let(m, let);
        CHECK(!matcher_take_error(m, &err), "no error once id is defined");
        CHECK(matcher_matches(m, d2, NULL), "let {id: {$add: [1, 1]}} binds $$id to 2");
        CHECK(!matcher_matches(m, d1, NULL), "_id 1 is not $$id");
        CHECK(!matcher_take_error(m, &err), "matching left no error");
    }
    matcher_destroy(m);
    bson_destroy(f);
    bson_destroy(let);
    bson_destroy(d1);
    bson_destroy(d2);
}

static void test_undefined_variable_is_reported_without_any_document(void)
{
    bson_t *f = BCON_NEW("$expr", "{", "$eq", "[", "$_id", "$$id", "]", "}");
    bson_t *other = BCON_NEW("x", BCON_INT32(1));
    bson_t *doc = BCON_NEW("_id", BCON_INT32(1));
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    CHECK(m != NULL, "compiles");
    if (m) {
        dberr_clear(&err);
        CHECK(matcher_take_error(m, &err) && err.code == 17276 &&
                  strcmp(err.msg, "Use of undefined variable: id") == 0,
              "$$id with no let is Location17276 before any match: %d '%s'", err.code, err.msg);
        CHECK(!matcher_take_error(m, &err), "taking clears the error");
        CHECK(!matcher_matches(m, doc, NULL), "an undefined variable matches nothing");
        CHECK(matcher_take_error(m, &err) && err.code == 17276, "and raises the error again");
        matcher_set_let(m, other);
        CHECK(matcher_take_error(m, &err) && err.code == 17276,
              "a let without id leaves $$id undefined");
    }
    matcher_destroy(m);
    bson_destroy(f);
    bson_destroy(other);
    bson_destroy(doc);
}

static void test_expr_evaluation_error_is_sticky_until_taken(void)
{
    bson_t *f = BCON_NEW("$nor", "[", "{", "$expr", "{", "$divide", "[", BCON_INT32(1), "$x", "]",
                         "}", "}", "]");
    bson_t *ok_doc = BCON_NEW("x", BCON_INT32(2)), *bad = BCON_NEW("x", BCON_INT32(0));
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    CHECK(m != NULL, "compiles");
    if (m) {
        CHECK(!matcher_matches(m, ok_doc, NULL), "1/2 is truthy so $nor fails");
        CHECK(!matcher_take_error(m, &err), "no error for x=2");
        CHECK(!matcher_matches(m, bad, NULL), "an error under $nor is not a match");
        CHECK(!matcher_matches(m, ok_doc, NULL), "nothing matches while the error is pending");
        dberr_clear(&err);
        CHECK(matcher_take_error(m, &err) && err.code == 16608,
              "the first error is kept: %d %s", err.code, err.msg);
        CHECK(!matcher_take_error(m, NULL), "and cleared by the take");
    }
    matcher_destroy(m);
    bson_destroy(f);
    bson_destroy(ok_doc);
    bson_destroy(bad);
}

static void test_bad_let_becomes_the_pending_error(void)
{
    bson_t *f = BCON_NEW("a", BCON_INT32(1));
    bson_t *let = BCON_NEW("ROOT", BCON_INT32(1));
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    if (m) {
        matcher_set_let(m, let);
        CHECK(matcher_take_error(m, &err) && err.code == 16867,
              "a let named ROOT is rejected: %d", err.code);
        matcher_set_let(m, NULL);
        CHECK(!matcher_take_error(m, &err), "clearing the let clears the error");
    }
    matcher_destroy(m);
    bson_destroy(f);
    bson_destroy(let);
}

static void test_set_vars_binds_values_as_they_are(void)
{
    bson_t *f = BCON_NEW("$expr", "{", "$eq", "[", "$s", "$$v", "]", "}");
    bson_t *vars = BCON_NEW("v", BCON_UTF8("$bar"));
    bson_t *doc = BCON_NEW("s", BCON_UTF8("$bar"));
    dberr_t err;
    matcher_t *m = matcher_new(f, &err);
    if (m) {
        matcher_set_vars(m, vars);
        CHECK(!matcher_take_error(m, &err), "v is defined");
        CHECK(matcher_matches(m, doc, NULL), "the value \"$bar\" is not read as a field path");
    }
    matcher_destroy(m);
    bson_destroy(f);
    bson_destroy(vars);
    bson_destroy(doc);
}

int main(void)
{
    run_case_file();
    UNIT_RUN(test_let_variables_reach_expr);
    UNIT_RUN(test_undefined_variable_is_reported_without_any_document);
    UNIT_RUN(test_expr_evaluation_error_is_sticky_until_taken);
    UNIT_RUN(test_bad_let_becomes_the_pending_error);
    UNIT_RUN(test_set_vars_binds_values_as_they_are);
    UNIT_RUN(test_bounds_combine_top_level_and_and_members);
    UNIT_RUN(test_bounds_ignore_or_and_not);
    UNIT_RUN(test_in_values_come_from_the_top_level_and_without_regexes);
    UNIT_RUN(test_sargable_paths_as_mongods_relevant_fields);
    UNIT_RUN(test_empty_filter_is_empty);
    UNIT_RUN(test_error_messages_read_like_mongod);
    UNIT_RUN(test_deeply_nested_filter_is_rejected_not_crashing);
    UNIT_RUN(test_type_matches_codes_aliases_and_number);
    UNIT_RUN(test_regex_operator_with_options);
    UNIT_RUN(test_regex_operator_accepts_a_regex_value);
    return unit_finish();
}
