/* test_expr: aggregation expressions, driven by cases/expr.json (each case:
 * an input document, an expression spec, and the expected value — exact
 * BSON type included — or the expected error code), plus a few direct tests. */
#include <string.h>

#include "doc/expr.h"
#include "unit.h"

/* True when `a` and `b` are the same value with the same types throughout. */
static bool same_value(const bson_value_t *a, const bson_value_t *b)
{
    bson_t x = BSON_INITIALIZER, y = BSON_INITIALIZER;
    bson_append_value(&x, "v", 1, a);
    bson_append_value(&y, "v", 1, b);
    bool same = x.len == y.len && memcmp(bson_get_data(&x), bson_get_data(&y), x.len) == 0;
    bson_destroy(&x);
    bson_destroy(&y);
    return same;
}

static char *value_json(const bson_value_t *v)
{
    bson_t x = BSON_INITIALIZER;
    if (v->value_type == BSON_TYPE_EOD)
        return bson_strdup("<missing>");
    bson_append_value(&x, "v", 1, v);
    char *s = bson_as_canonical_extended_json(&x, NULL);
    bson_destroy(&x);
    return s;
}

static void run_case(bson_iter_t *c)
{
    bson_iter_t f, spec;
    const char *name = "?";
    bson_t input = BSON_INITIALIZER, vars;
    bool have_spec = false, have_vars = false, want_missing = false;
    int want_error = 0;
    const bson_value_t *want = NULL;
    bson_iter_t want_it;
    int64_t now = 1700000000000LL;

    bson_iter_recurse(c, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!strcmp(k, "name")) {
            name = bson_iter_utf8(&f, NULL);
        } else if (!strcmp(k, "input") && BSON_ITER_HOLDS_DOCUMENT(&f)) {
            const uint8_t *d;
            uint32_t n;
            bson_iter_document(&f, &n, &d);
            bson_destroy(&input);
            bson_init_static(&input, d, n);
        } else if (!strcmp(k, "vars") && BSON_ITER_HOLDS_DOCUMENT(&f)) {
            const uint8_t *d;
            uint32_t n;
            bson_iter_document(&f, &n, &d);
            bson_init_static(&vars, d, n);
            have_vars = true;
        } else if (!strcmp(k, "spec")) {
            spec = f;
            have_spec = true;
        } else if (!strcmp(k, "expect")) {
            want_it = f;
            want = bson_iter_value(&want_it);
        } else if (!strcmp(k, "missing")) {
            want_missing = true;
        } else if (!strcmp(k, "error")) {
            want_error = bson_iter_as_int64(&f);
        }
    }
    if (!have_spec) {
        unit_case(name, 0);
        return;
    }
    dberr_t err;
    dberr_clear(&err);
    expr_t *e = expr_new(&spec, &err);
    bool ok = false;
    if (!e) {
        ok = want_error && err.code == want_error;
        if (!ok)
            fprintf(stderr, "  %s: parse error %d %s (want %d)\n", name, err.code, err.msg,
                    want_error);
        unit_case(name, ok);
        return;
    }
    expr_ctx_t ctx = {.root = &input, .now_ms = now, .vars = have_vars ? &vars : NULL};
    bson_value_t out;
    if (!expr_eval(e, &ctx, &out, &err)) {
        ok = want_error && err.code == want_error;
        if (!ok)
            fprintf(stderr, "  %s: eval error %d %s (want %d)\n", name, err.code, err.msg,
                    want_error);
    } else if (want_error) {
        char *got = value_json(&out);
        fprintf(stderr, "  %s: wanted error %d, got %s\n", name, want_error, got);
        bson_free(got);
    } else if (want_missing) {
        ok = out.value_type == BSON_TYPE_EOD;
        if (!ok)
            fprintf(stderr, "  %s: wanted missing\n", name);
    } else if (want) {
        ok = out.value_type != BSON_TYPE_EOD && same_value(&out, want);
        if (!ok) {
            char *got = value_json(&out), *exp = value_json(want);
            fprintf(stderr, "  %s: got %s want %s\n", name, got, exp);
            bson_free(got);
            bson_free(exp);
        }
    }
    if (out.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&out);
    expr_destroy(e);
    unit_case(name, ok);
}

static void run_case_file(const char *path)
{
    bson_t *doc = unit_load_json(path);
    bson_iter_t it, cases;
    if (!bson_iter_init_find(&it, doc, "cases") || !bson_iter_recurse(&it, &cases)) {
        fprintf(stderr, "%s: no cases\n", path);
        unit_case(path, 0);
    } else {
        while (bson_iter_next(&cases))
            run_case(&cases);
    }
    bson_destroy(doc);
}

static void test_truthy_treats_zero_null_and_false_as_false(void)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT32};
    v.value.v_int32 = 0;
    CHECK(!expr_truthy(&v), "int 0 is falsy");
    v.value.v_int32 = 7;
    CHECK(expr_truthy(&v), "int 7 is truthy");
    v.value_type = BSON_TYPE_NULL;
    CHECK(!expr_truthy(&v), "null is falsy");
    v.value_type = BSON_TYPE_EOD;
    CHECK(!expr_truthy(&v), "missing is falsy");
    v.value_type = BSON_TYPE_UTF8;
    v.value.v_utf8.str = (char *)"";
    v.value.v_utf8.len = 0;
    CHECK(expr_truthy(&v), "the empty string is truthy");
}

static void test_expression_is_reusable_across_documents(void)
{
    bson_t *spec = BCON_NEW("e", "{", "$multiply", "[", "$a", BCON_INT32(2), "]", "}");
    bson_iter_t it;
    dberr_t err;
    bson_iter_init_find(&it, spec, "e");
    expr_t *e = expr_new(&it, &err);
    CHECK(e != NULL, "parses");
    for (int i = 0; e && i < 3; i++) {
        bson_t *doc = BCON_NEW("a", BCON_INT32(i));
        expr_ctx_t ctx = {.root = doc};
        bson_value_t out;
        CHECK(expr_eval(e, &ctx, &out, &err), "evaluates");
        CHECK(out.value_type == BSON_TYPE_INT32 && out.value.v_int32 == 2 * i, "doubles a=%d", i);
        bson_value_destroy(&out);
        bson_destroy(doc);
    }
    expr_destroy(e);
    bson_destroy(spec);
}

static void test_destroy_accepts_null(void)
{
    expr_destroy(NULL);
    CHECK(1, "no crash");
}


/* Parses the value of field "e" in `spec`. */
static expr_t *parse_e(const bson_t *spec, dberr_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, spec, "e"))
        return NULL;
    return expr_new(&it, err);
}

static void test_check_vars_finds_undefined_variables(void)
{
    dberr_t err;
    bson_t *spec = BCON_NEW("e", "{", "$eq", "[", "$_id", "$$id", "]", "}");
    bson_t *let = BCON_NEW("id", BCON_INT32(1));
    expr_t *e = parse_e(spec, &err);
    CHECK(e != NULL, "{$eq: [$_id, $$id]} parses without let");
    dberr_clear(&err);
    CHECK(e && !expr_check_vars(e, NULL, &err) && err.code == 17276 &&
              strcmp(err.msg, "Use of undefined variable: id") == 0,
          "$$id undefined without let: code %d '%s'", err.code, err.msg);
    CHECK(e && expr_check_vars(e, let, &err), "$$id defined by let");
    expr_destroy(e);
    bson_destroy(spec);

    /* variables bound inside the expression are in scope only there */
    spec = BCON_NEW("e", "{", "$let", "{", "vars", "{", "x", BCON_INT32(1), "}", "in", "[",
                    "$$x", "$$NOW", "$$ROOT", "$$CURRENT", "$$REMOVE", "]", "}", "}");
    e = parse_e(spec, &err);
    CHECK(e && expr_check_vars(e, NULL, &err), "$let binds x for its body; system variables");
    expr_destroy(e);
    bson_destroy(spec);
    spec = BCON_NEW("e", "{", "$let", "{", "vars", "{", "x", "$$x", "}", "in", "$$x", "}", "}");
    e = parse_e(spec, &err);
    CHECK(e && !expr_check_vars(e, NULL, &err) && err.code == 17276,
          "a $let variable is not visible in its own definition");
    expr_destroy(e);
    bson_destroy(spec);
    spec = BCON_NEW("e", "{", "$reduce", "{", "input", "[", BCON_INT32(1), "]", "initialValue",
                    BCON_INT32(0), "in", "{", "$add", "[", "$$value", "$$this", "]", "}", "}",
                    "}");
    e = parse_e(spec, &err);
    CHECK(e && expr_check_vars(e, NULL, &err), "$reduce binds $$value and $$this");
    expr_destroy(e);
    bson_destroy(spec);
    spec = BCON_NEW("e", "{", "$filter", "{", "input", "$$this", "cond", BCON_BOOL(true), "}", "}");
    e = parse_e(spec, &err);
    CHECK(e && !expr_check_vars(e, NULL, &err), "$filter's input does not see $$this");
    expr_destroy(e);
    bson_destroy(spec);
    bson_destroy(let);
}

static void test_eval_let_evaluates_each_value_once_in_order(void)
{
    dberr_t err;
    bson_t *let = BCON_NEW("x", "{", "$add", "[", BCON_INT32(1), BCON_INT32(2), "]", "}", "y",
                           "{", "$literal", "$bar", "}", "z", "{", "$multiply", "[", "$$x",
                           BCON_INT32(2), "]", "}", "t", "$$NOW");
    bson_t out = BSON_INITIALIZER;
    bson_iter_t it;
    CHECK(expr_eval_let(let, 1234, &out, &err), "let evaluates: %s", err.msg);
    CHECK(bson_iter_init_find(&it, &out, "x") && BSON_ITER_HOLDS_INT32(&it) &&
              bson_iter_int32(&it) == 3,
          "x is {$add: [1, 2]} = 3");
    CHECK(bson_iter_init_find(&it, &out, "y") && BSON_ITER_HOLDS_UTF8(&it) &&
              strcmp(bson_iter_utf8(&it, NULL), "$bar") == 0,
          "y is the literal string $bar");
    CHECK(bson_iter_init_find(&it, &out, "z") && bson_iter_as_int64(&it) == 6,
          "z reads the earlier x");
    CHECK(bson_iter_init_find(&it, &out, "t") && BSON_ITER_HOLDS_DATE_TIME(&it) &&
              bson_iter_date_time(&it) == 1234,
          "$$NOW in let is the given clock");
    bson_destroy(&out);
    bson_destroy(let);

    let = BCON_NEW("Bad", BCON_INT32(1));
    bson_init(&out);
    CHECK(!expr_eval_let(let, 0, &out, &err) && err.code == 16867, "an upper-case name fails");
    bson_destroy(&out);
    bson_destroy(let);
    let = BCON_NEW("d", "{", "$divide", "[", BCON_INT32(1), BCON_INT32(0), "]", "}");
    bson_init(&out);
    CHECK(!expr_eval_let(let, 0, &out, &err) && err.code == 16608,
          "an evaluation error fails: %d", err.code);
    bson_destroy(&out);
    bson_destroy(let);
    bson_init(&out);
    CHECK(expr_eval_let(NULL, 0, &out, &err) && bson_empty(&out), "NULL let gives nothing");
    bson_destroy(&out);
}

static void test_rand_is_a_double_in_unit_interval(void)
{
    bson_t *spec = BCON_NEW("e", "{", "$rand", "{", "}", "}");
    dberr_t err;
    expr_t *e = parse_e(spec, &err);
    bool ok = e != NULL, differ = false;
    double first = -1;
    for (int i = 0; ok && i < 50; i++) {
        bson_value_t out;
        expr_ctx_t ctx = {0};
        ok = expr_eval(e, &ctx, &out, &err) && out.value_type == BSON_TYPE_DOUBLE &&
             out.value.v_double >= 0 && out.value.v_double < 1;
        if (i == 0)
            first = out.value.v_double;
        else if (out.value.v_double != first)
            differ = true;
    }
    CHECK(ok, "$rand gives doubles in [0, 1)");
    CHECK(differ, "$rand does not repeat one value");
    expr_destroy(e);
    bson_destroy(spec);
}

/* Fills the stack below the caller with words that read as a UTF-8 value
 * holding a bad pointer, so a bson_value_t left uninitialised further down
 * is destroyed as one and the free fails (ASan) or crashes. */
static __attribute__((noinline)) void paint_stack(void)
{
    volatile uint64_t words[2048];
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        words[i] = BSON_TYPE_UTF8;
}

static void test_failed_argument_of_an_object_expression_is_not_freed(void)
{
    /* fuzz_matcher found it: {leq: [{$bsonSize: 5}]} fails in $bsonSize,
     * and the fold over the object's fields freed the unset value */
    bson_t *doc = BCON_NEW("e", "{", "leq", "[", "{", "$bsonSize", BCON_INT32(5), "}", "]", "}");
    bson_iter_t it;
    dberr_t err = {0};
    CHECK(bson_iter_init_find(&it, doc, "e"), "spec");
    expr_t *e = expr_new(&it, &err);
    CHECK(e != NULL, "parses: %s", err.msg);
    if (e) {
        bson_t input = BSON_INITIALIZER;
        expr_ctx_t ctx = {.root = &input};
        bson_value_t out;
        paint_stack();
        CHECK(!expr_eval(e, &ctx, &out, &err), "fails");
        CHECK(err.code != 0, "with a code");
        bson_destroy(&input);
        expr_destroy(e);
    }
    bson_destroy(doc);
}

int main(void)
{
    UNIT_RUN(test_check_vars_finds_undefined_variables);
    UNIT_RUN(test_eval_let_evaluates_each_value_once_in_order);
    UNIT_RUN(test_rand_is_a_double_in_unit_interval);
    UNIT_RUN(test_truthy_treats_zero_null_and_false_as_false);
    UNIT_RUN(test_expression_is_reusable_across_documents);
    UNIT_RUN(test_destroy_accepts_null);
    UNIT_RUN(test_failed_argument_of_an_object_expression_is_not_freed);
    run_case_file("cases/expr.json");
    run_case_file("cases/date.json");
    return unit_finish();
}
