/* test_updater_inplace: the in-place path of src/doc/update/inplace.c
 * against the general path (the document tree), byte for byte — from
 * tests/unit/cases/updater_inplace.json and from seeded random top-level
 * documents and updates. */
#include <math.h>
#include <string.h>

#include "doc/update/update-private.h"
#include "doc/updater.h"
#include "unit.h"

/* The outcome of one way of applying an update. */
typedef struct outcome {
    bool ok;
    bool changed;
    int code;
    char msg[512];
    bson_t out;
} outcome_t;

/* Applies `spec` (an iterator on the update) to `doc` with the in-place
 * path allowed or not. */
static void apply_one(const bson_iter_t *spec, const bson_t *doc, bool insert, bool allow_inplace,
                      outcome_t *o)
{
    dberr_t err;
    dberr_clear(&err);
    memset(o, 0, sizeof *o);
    bson_init(&o->out);
    updater_t *u = updater_new(spec, NULL, &err);
    if (u) {
        if (!allow_inplace)
            u->inplace = false;
        o->ok = updater_apply(u, doc, insert, -1, &o->out, &o->changed, &err);
    }
    if (!o->ok) {
        o->code = err.code;
        snprintf(o->msg, sizeof o->msg, "%s", err.msg);
    }
    updater_destroy(u);
}

/* 1 when the in-place path takes (`spec`, `doc`); 0 when it leaves it to
 * the general path; -1 when the update does not parse. */
static int takes_inplace(const bson_iter_t *spec, const bson_t *doc, bool insert)
{
    dberr_t err;
    dberr_clear(&err);
    updater_t *u = updater_new(spec, NULL, &err);
    if (!u)
        return -1;
    bson_t out = BSON_INITIALIZER;
    int took = update_inplace_apply(u, doc, insert, &out) ? 1 : 0;
    if (!took && out.len != 5)
        took = 2; /* a fallback must leave the output empty */
    bson_destroy(&out);
    updater_destroy(u);
    return took;
}

/* Compares both paths on (`spec`, `doc`); 1 when they agree. */
static int both_paths_agree(const char *name, const bson_iter_t *spec, const bson_t *doc,
                            bool insert)
{
    outcome_t a, b;
    int ok = 1;
    apply_one(spec, doc, insert, true, &a);
    apply_one(spec, doc, insert, false, &b);
    if (a.ok != b.ok || a.code != b.code || strcmp(a.msg, b.msg) != 0) {
        fprintf(stderr, "  %s: in-place ok=%d %d %s, general ok=%d %d %s\n", name, a.ok, a.code,
                a.msg, b.ok, b.code, b.msg);
        ok = 0;
    } else if (a.changed != b.changed || a.out.len != b.out.len ||
               memcmp(bson_get_data(&a.out), bson_get_data(&b.out), a.out.len) != 0) {
        char *ja = bson_as_canonical_extended_json(&a.out, NULL);
        char *jb = bson_as_canonical_extended_json(&b.out, NULL);
        fprintf(
            stderr,
            "  %s: bytes differ\n    in-place (changed %d): %s\n    general  (changed %d): %s\n",
            name, a.changed, ja, b.changed, jb);
        bson_free(ja);
        bson_free(jb);
        ok = 0;
    }
    bson_destroy(&a.out);
    bson_destroy(&b.out);
    return ok;
}

/* ---- the case file ---- */

static int run_case(bson_iter_t *case_it, char *name_out, size_t name_len)
{
    bson_t c, doc = BSON_INITIALIZER;
    bson_iter_t it, upd;
    uint32_t len;
    const uint8_t *data;
    const char *name = "(unnamed)";
    bool insert = false;
    int ok = 1;

    bson_iter_document(case_it, &len, &data);
    bson_init_static(&c, data, len);
    if (bson_iter_init_find(&it, &c, "name"))
        name = bson_iter_utf8(&it, NULL);
    snprintf(name_out, name_len, "%s", name);
    if (bson_iter_init_find(&it, &c, "doc")) {
        bson_iter_document(&it, &len, &data);
        bson_init_static(&doc, data, len);
    }
    if (bson_iter_init_find(&it, &c, "insert"))
        insert = bson_iter_as_bool(&it);
    if (!bson_iter_init_find(&upd, &c, "update")) {
        fprintf(stderr, "  case %s has no update\n", name);
        return 0;
    }
    if (bson_iter_init_find(&it, &c, "inplace")) {
        int want = bson_iter_as_bool(&it) ? 1 : 0;
        int got = takes_inplace(&upd, &doc, insert);
        if (got != want) {
            fprintf(stderr, "  %s: in-place path %s, want %s\n", name,
                    got == 1   ? "taken"
                    : got == 0 ? "not taken"
                               : "broken",
                    want ? "taken" : "not taken");
            ok = 0;
        }
    }
    return both_paths_agree(name, &upd, &doc, insert) && ok;
}

static void test_cases_from_json_file(void)
{
    bson_t *file = unit_load_json("cases/updater_inplace.json");
    bson_iter_t it, cases;
    char name[256];
    CHECK(bson_iter_init_find(&it, file, "cases") && BSON_ITER_HOLDS_ARRAY(&it),
          "updater_inplace.json has a cases array");
    bson_iter_recurse(&it, &cases);
    while (bson_iter_next(&cases)) {
        int ok = run_case(&cases, name, sizeof name);
        unit_case(name, ok);
    }
    bson_destroy(file);
}

/* ---- documents the general path rewrites: left to it ---- */

/* {_id: 1, a: {r: /x/mi}, n: 1} with the regex options unsorted, as a
 * client may send them inside a subdocument (libbson would sort them). */
static const uint8_t unsorted_regex_doc[] = {
    /* total */ 37, 0,   0, 0, 0x10, '_', 'i', 'd', 0, 1,   0,   0, 0,
    0x03,           'a', 0,
    /* a: */ 13,    0,   0, 0, 0x0B, 'r', 0,   'x', 0, 'm', 'i', 0, 0,
    0x10,           'n', 0, 1, 0,    0,   0,   0};

/* {_id: 1, a: [1] stored with the key "5", n: 1}. */
static const uint8_t odd_array_key_doc[] = {
    /* total */ 36,
    0,
    0,
    0,
    0x10,
    '_',
    'i',
    'd',
    0,
    1,
    0,
    0,
    0,
    0x04,
    'a',
    0,
    /* a: */ 12,
    0,
    0,
    0,
    0x10,
    '5',
    0,
    1,
    0,
    0,
    0,
    0,
    0x10,
    'n',
    0,
    1,
    0,
    0,
    0,
    0};

static void check_left_to_general_path(const char *what, const uint8_t *bytes, size_t len)
{
    bson_t doc;
    CHECK(bson_init_static(&doc, bytes, len), "%s: the hand-built document is valid BSON", what);
    bson_t *spec = BCON_NEW("u", "{", "$inc", "{", "n", BCON_INT32(1), "}", "}");
    bson_iter_t it;
    bson_iter_init_find(&it, spec, "u");
    CHECK(takes_inplace(&it, &doc, false) == 0, "%s: the in-place path leaves it alone", what);
    CHECK(both_paths_agree(what, &it, &doc, false), "%s: both paths give the same bytes", what);
    bson_destroy(spec);
}

static void test_unsorted_regex_options_in_a_subdocument_take_the_general_path(void)
{
    check_left_to_general_path("unsorted regex options", unsorted_regex_doc,
                               sizeof unsorted_regex_doc);
}

static void test_array_with_out_of_order_keys_takes_the_general_path(void)
{
    check_left_to_general_path("array key 5 at index 0", odd_array_key_doc,
                               sizeof odd_array_key_doc);
}

/* ---- random documents and updates ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static const char *const field_names[] = {"a", "b", "c", "n", "x", "10", "2", "$d", "_id"};
#define NFIELDS (sizeof field_names / sizeof field_names[0])

/* Appends a random value under `key`, scalars mostly at the edges of their
 * ranges (overflow, -0.0, NaN), sometimes a small container. */
#define NKINDS 16

static void append_value_of_kind(bson_t *b, const char *key, uint32_t kind, int depth);

static uint32_t append_random_value(bson_t *b, const char *key, int depth)
{
    uint32_t kind = rnd(depth > 1 ? NKINDS - 2 : NKINDS);
    append_value_of_kind(b, key, kind, depth);
    return kind;
}

/* Appends a value of `kind` (0..NKINDS-1) under `key`. */
static void append_value_of_kind(bson_t *b, const char *key, uint32_t kind, int depth)
{
    bson_decimal128_t dec;
    bson_oid_t oid;
    switch (kind) {
    case 0:
        BSON_APPEND_INT32(b, key, (int32_t)rnd(5) - 2);
        break;
    case 1:
        BSON_APPEND_INT32(b, key,
                          rnd(2) ? INT32_MAX - (int32_t)rnd(2) : INT32_MIN + (int32_t)rnd(2));
        break;
    case 2:
        BSON_APPEND_INT64(b, key, (int64_t)rnd(5) - 2);
        break;
    case 3:
        BSON_APPEND_INT64(b, key,
                          rnd(2) ? INT64_MAX - (int64_t)rnd(2) : INT64_MIN + (int64_t)rnd(2));
        break;
    case 4:
        BSON_APPEND_DOUBLE(b, key, rnd(2) ? 1.5 : -0.0);
        break;
    case 5:
        BSON_APPEND_DOUBLE(b, key, rnd(2) ? NAN : 1e308);
        break;
    case 6:
        bson_decimal128_from_string(rnd(2) ? "1.50" : "-0", &dec);
        BSON_APPEND_DECIMAL128(b, key, &dec);
        break;
    case 7:
        BSON_APPEND_BOOL(b, key, rnd(2));
        break;
    case 8:
        BSON_APPEND_DATE_TIME(b, key, (int64_t)rnd(3) * 1000);
        break;
    case 9:
        BSON_APPEND_NULL(b, key);
        break;
    case 10: {
        /* one draw: BSON_APPEND_UTF8 evaluates its value twice */
        const char *str = rnd(2) ? "N" : "Y:user01";
        BSON_APPEND_UTF8(b, key, str);
        break;
    }
    case 11:
        bson_oid_init_from_string(&oid,
                                  rnd(2) ? "5f0000000000000000000001" : "5f0000000000000000000002");
        BSON_APPEND_OID(b, key, &oid);
        break;
    case 12:
        BSON_APPEND_TIMESTAMP(b, key, rnd(3), 1);
        break;
    case 13:
        BSON_APPEND_REGEX(b, key, "^a", rnd(2) ? "i" : "");
        break;
    case 14: {
        bson_t sub;
        BSON_APPEND_DOCUMENT_BEGIN(b, key, &sub);
        append_random_value(&sub, "k", depth + 1);
        bson_append_document_end(b, &sub);
        break;
    }
    default: {
        bson_t sub;
        BSON_APPEND_ARRAY_BEGIN(b, key, &sub);
        append_random_value(&sub, "0", depth + 1);
        append_random_value(&sub, "1", depth + 1);
        bson_append_array_end(b, &sub);
        break;
    }
    }
}

/* The kind of value random_doc stored under each field name (or NKINDS). */
static uint32_t doc_kind[NFIELDS];

/* A random stored document: usually _id first, sometimes later or absent. */
static void random_doc(bson_t *doc)
{
    for (size_t i = 0; i < NFIELDS; i++)
        doc_kind[i] = NKINDS;
    uint32_t id_at = rnd(16); /* mostly first; 1..3: after that many fields; else none */
    if (id_at >= 4 && id_at < 12)
        id_at = 0;
    uint32_t n = 1 + rnd(5);
    uint32_t used = 0;
    bool id_written = false;
    for (uint32_t i = 0; i <= n; i++) {
        if (!id_written && id_at < 4 && i == id_at) {
            BSON_APPEND_INT32(doc, "_id", 1);
            id_written = true;
        }
        if (i == n)
            break;
        uint32_t f = rnd(NFIELDS - 1);  /* never a second _id */
        if (used & (1u << f) && rnd(4)) /* a repeated name now and then */
            continue;
        used |= 1u << f;
        doc_kind[f] = append_random_value(doc, field_names[f], 1);
    }
}

/* A random update of 1-3 top-level $set/$inc/$setOnInsert paths (and now
 * and then a dotted path), wrapped as {u: <update>}. */
static void random_update(bson_t *wrap)
{
    static const char *const ops[] = {"$inc", "$set", "$setOnInsert"};
    bson_t u, o;
    uint32_t used = 0;
    BSON_APPEND_DOCUMENT_BEGIN(wrap, "u", &u);
    for (size_t op = 0; op < 3; op++) {
        uint32_t n = op == 2 ? rnd(2) * rnd(2) : rnd(3);
        if (n == 0 && op == 0 && !used)
            n = 1;
        if (n == 0)
            continue;
        BSON_APPEND_DOCUMENT_BEGIN(&u, ops[op], &o);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t f = rnd(NFIELDS);
            /* mostly fields the document has; for $inc, numbers */
            for (int tries = 0;
                 tries < 6 && (doc_kind[f] == NKINDS || (op == 0 && doc_kind[f] > 6)); tries++)
                f = rnd(NFIELDS);
            if (used & (1u << f))
                continue;
            used |= 1u << f;
            char key[16];
            snprintf(key, sizeof key, rnd(12) ? "%s" : "%s.k", field_names[f]);
            if (op == 0) {
                bson_decimal128_t dec;
                switch (rnd(6)) {
                case 0:
                    BSON_APPEND_INT32(&o, key, (int32_t)rnd(3) - 1);
                    break;
                case 1:
                    BSON_APPEND_INT32(&o, key, INT32_MAX);
                    break;
                case 2:
                    BSON_APPEND_INT64(&o, key, rnd(2) ? 1 : INT64_MAX);
                    break;
                case 3:
                    BSON_APPEND_DOUBLE(&o, key, rnd(2) ? 0.0 : -0.0);
                    break;
                case 4:
                    BSON_APPEND_DOUBLE(&o, key, 2.5);
                    break;
                default:
                    bson_decimal128_from_string(rnd(2) ? "0.00" : "1", &dec);
                    BSON_APPEND_DECIMAL128(&o, key, &dec);
                    break;
                }
            } else if (doc_kind[f] != NKINDS && rnd(2)) { /* often the stored type */
                append_value_of_kind(&o, key, doc_kind[f], 1);
            } else {
                append_random_value(&o, key, 1);
            }
        }
        bson_append_document_end(&u, &o);
    }
    bson_append_document_end(wrap, &u);
}

static void test_random_top_level_updates_give_the_same_bytes_on_both_paths(void)
{
    int taken = 0, agreed = 0, total = 4000;
    for (int i = 0; i < total; i++) {
        bson_t doc = BSON_INITIALIZER, wrap = BSON_INITIALIZER;
        bson_iter_t spec;
        random_doc(&doc);
        random_update(&wrap);
        bson_iter_init_find(&spec, &wrap, "u");
        bool insert = rnd(8) == 0;
        char name[64];
        snprintf(name, sizeof name, "random case %d", i);
        int took = takes_inplace(&spec, &doc, insert);
        CHECK(took != 2, "%s: a fallback leaves the output empty", name);
        taken += took == 1;
        if (both_paths_agree(name, &spec, &doc, insert)) {
            agreed++;
        } else {
            char *jd = bson_as_canonical_extended_json(&doc, NULL);
            char *ju = bson_as_canonical_extended_json(&wrap, NULL);
            fprintf(stderr, "    doc: %s\n    update: %s\n", jd, ju);
            bson_free(jd);
            bson_free(ju);
        }
        bson_destroy(&doc);
        bson_destroy(&wrap);
    }
    printf("in-place path took %d of %d random cases\n", taken, total);
    CHECK(agreed == total, "both paths agree on every random case (%d of %d)", agreed, total);
    /* the generator hits existing same-type scalars often enough that a
     * path that never fires would show */
    CHECK(taken >= total / 20, "the in-place path took a fair share of the cases (%d of %d)", taken,
          total);
}

/* updater_is_positional for the update document `json` ({"u": ...}). */
static bool positional_of(const char *json)
{
    bson_error_t berr;
    dberr_t err;
    bson_t *wrap = bson_new_from_json((const uint8_t *)json, -1, &berr);
    bson_iter_t it;
    bson_iter_init_find(&it, wrap, "u");
    dberr_clear(&err);
    updater_t *u = updater_new(&it, NULL, &err);
    bool p = u && updater_is_positional(u);
    updater_destroy(u);
    bson_destroy(wrap);
    return p;
}

static void test_only_a_dollar_path_needs_the_matched_array_index(void)
{
    CHECK(positional_of("{\"u\": {\"$inc\": {\"a.$\": 1}}}"), "a.$ is positional");
    CHECK(positional_of("{\"u\": {\"$set\": {\"a.$.b\": 1, \"c\": 2}}}"),
          "a.$.b among other paths is positional");
    CHECK(!positional_of("{\"u\": {\"$inc\": {\"favCount\": 1}}}"), "favCount is not");
    CHECK(!positional_of("{\"u\": {\"$set\": {\"a.$[].b\": 1}}}"), "a.$[].b is not");
    CHECK(!positional_of("{\"u\": {\"a\": 1}}"), "a replacement is not");
}

int main(void)
{
    UNIT_RUN(test_cases_from_json_file);
    UNIT_RUN(test_unsorted_regex_options_in_a_subdocument_take_the_general_path);
    UNIT_RUN(test_array_with_out_of_order_keys_takes_the_general_path);
    UNIT_RUN(test_random_top_level_updates_give_the_same_bytes_on_both_paths);
    UNIT_RUN(test_only_a_dollar_path_needs_the_matched_array_index);
    return unit_finish();
}
