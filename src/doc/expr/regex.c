/* expr/regex: $regexMatch $regexFind $regexFindAll — PCRE2 (UTF mode, the
 * i m s x flags), as the query $regex; matches are reported with code point
 * offsets and their captures, as mongod's RegexExecutionState. */
#include "doc/expr/expr-private.h"

#include <string.h>

#include "doc/regexp.h"
#include "util/fiber.h"
#include "util/shellfmt.h"

/* Which operator a row is (its aux). */
enum { RX_MATCH, RX_FIND, RX_FIND_ALL };

/* A compiled regex of one evaluation. */
typedef struct rx {
    pcre2_code *code;
    pcre2_match_data *md;
} rx_t;

static void rx_destroy(rx_t *r)
{
    if (r->md)
        pcre2_match_data_free(r->md);
    if (r->code)
        pcre2_code_free(r->code);
}

/* Compiles the `regex` and `options` arguments `re` / `opt` of `e`. */
static bool rx_compile(const expr_t *e, const bson_value_t *re, const bson_value_t *opt, rx_t *r,
                       dberr_t *err)
{
    const char *pattern, *flags = "";
    size_t len;
    uint32_t opts;
    memset(r, 0, sizeof *r);
    if (re->value_type == BSON_TYPE_REGEX) {
        pattern = re->value.v_regex.regex ? re->value.v_regex.regex : "";
        len = strlen(pattern);
        flags = re->value.v_regex.options ? re->value.v_regex.options : "";
    } else {
        pattern = re->value.v_utf8.str;
        len = re->value.v_utf8.len;
    }
    if (opt->value_type == BSON_TYPE_UTF8) {
        if (*flags && opt->value.v_utf8.len)
            return dberr_set(err, 51107,
                             "%s found regex option(s) specified in both 'regex' and 'option' "
                             "fields",
                             e->op->name);
        if (opt->value.v_utf8.len)
            flags = opt->value.v_utf8.str;
    }
    if (strlen(pattern) != len)
        return dberr_set(err, 51109, "%s: regular expression cannot contain an embedded null byte",
                         e->op->name);
    if (opt->value_type == BSON_TYPE_UTF8 && strlen(opt->value.v_utf8.str) != opt->value.v_utf8.len)
        return dberr_set(err, 51110,
                         "%s: regular expression options cannot contain an embedded "
                         "null byte",
                         e->op->name);
    char bad, msg[256];
    if (!regexp_options(flags, false, &opts, &bad))
        return dberr_set(err, 51108, "%s invalid flag in regex options: %c", e->op->name, bad);
    if (!(r->code = regexp_compile(pattern, len, opts, msg, sizeof msg)))
        return dberr_set(err, 51111, "Invalid Regex in %s: %s", e->op->name, msg);
    r->md = pcre2_match_data_create_from_pattern(r->code, NULL);
    return true;
}

/* Code points in s[0, n). */
static int32_t code_points(const char *s, size_t n)
{
    int32_t cp = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            cp++;
    return cp;
}

/* The match in r->md as {match, idx, captures} appended to `arr`. */
static void append_match(const rx_t *r, const char *s, int32_t idx, bson_t *arr, uint32_t *n)
{
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(r->md);
    uint32_t ncap = 0, ci = 0;
    bson_t doc, caps;
    char key[16];
    const char *k;
    pcre2_pattern_info(r->code, PCRE2_INFO_CAPTURECOUNT, &ncap);
    bson_uint32_to_string((*n)++, &k, key, sizeof key);
    bson_append_document_begin(arr, k, -1, &doc);
    bson_append_utf8(&doc, "match", 5, s + ov[0], (int)(ov[1] - ov[0]));
    bson_append_int32(&doc, "idx", 3, idx);
    bson_append_array_begin(&doc, "captures", 8, &caps);
    for (uint32_t i = 1; i <= ncap; i++) {
        bson_uint32_to_string(ci++, &k, key, sizeof key);
        if (ov[2 * i] == PCRE2_UNSET)
            bson_append_null(&caps, k, -1);
        else
            bson_append_utf8(&caps, k, -1, s + ov[2 * i], (int)(ov[2 * i + 1] - ov[2 * i]));
    }
    bson_append_array_end(&doc, &caps);
    bson_append_document_end(arr, &doc);
}

static bool op_regex(const expr_t *e, const expr_ctx_t *ctx, bson_value_t *out, dberr_t *err)
{
    int kind = e->op->aux;
    bson_value_t v[3];
    rx_t r;
    bool ok = true;
    memset(&r, 0, sizeof r);
    if (!expr_eval_args(e, ctx, v, err))
        return false;
    if (!expr_is_nullish(&v[0]) && v[0].value_type != BSON_TYPE_UTF8) {
        ok = dberr_set(err, 51104, "%s needs 'input' to be of type string", e->op->name);
        goto cleanup;
    }
    if (!expr_is_nullish(&v[1]) && v[1].value_type != BSON_TYPE_UTF8 &&
        v[1].value_type != BSON_TYPE_REGEX) {
        ok = dberr_set(err, 51105, "%s needs 'regex' to be of type string or regex", e->op->name);
        goto cleanup;
    }
    if (!expr_is_nullish(&v[2]) && v[2].value_type != BSON_TYPE_UTF8) {
        ok = dberr_set(err, 51106, "%s needs 'options' to be of type string", e->op->name);
        goto cleanup;
    }
    if (!expr_is_nullish(&v[1]) && !(ok = rx_compile(e, &v[1], &v[2], &r, err)))
        goto cleanup;
    if (expr_is_nullish(&v[0]) || expr_is_nullish(&v[1])) {
        if (kind == RX_MATCH)
            expr_val_bool(out, false);
        else if (kind == RX_FIND)
            expr_val_null(out);
        else
            expr_value_take_bson(out, bson_new(), BSON_TYPE_ARRAY);
        goto cleanup;
    }
    {
        const char *s = v[0].value.v_utf8.str;
        size_t len = v[0].value.v_utf8.len, pos = 0;
        int32_t cp = 0; /* code points before `pos` */
        bson_t arr;
        uint32_t n = 0;
        bool matched = false;
        bson_init(&arr);
        while (pos <= len) {
            if ((n & 0xff) == 0xff && !(ok = fiber_check(err)))
                break;
            int rc = pcre2_match(r.code, (PCRE2_SPTR)s, len, pos, 0, r.md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH)
                break;
            if (rc < 0) {
                ok = dberr_set(err, 51156,
                               "Error occurred while executing the regular "
                               "expression in %s. Result code: %d",
                               e->op->name, rc);
                break;
            }
            matched = true;
            if (kind == RX_MATCH)
                break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(r.md);
            cp += code_points(s + pos, ov[0] - pos);
            append_match(&r, s, cp, &arr, &n);
            if (arr.len > EXPR_MAX_VALUE_BYTES) {
                ok = dberr_set(err, DBERR_BSON_OBJECT_TOO_LARGE,
                               "%s would build a value over the %d bytes (16 MB) a value may hold",
                               e->op->name, EXPR_MAX_VALUE_BYTES);
                break;
            }
            if (kind == RX_FIND)
                break;
            /* an empty match moves on by one code point */
            size_t next = ov[1];
            if (ov[1] == ov[0]) {
                if (next >= len)
                    break;
                next++;
                while (next < len && ((unsigned char)s[next] & 0xc0) == 0x80)
                    next++;
            }
            cp += code_points(s + ov[0], next - ov[0]);
            pos = next;
        }
        if (!ok) {
            bson_destroy(&arr);
        } else if (kind == RX_MATCH) {
            expr_val_bool(out, matched);
            bson_destroy(&arr);
        } else if (kind == RX_FIND) {
            bson_iter_t it;
            if (n && bson_iter_init(&it, &arr) && bson_iter_next(&it))
                bson_value_copy(bson_iter_value(&it), out);
            else
                expr_val_null(out);
            bson_destroy(&arr);
        } else {
            expr_value_take_bson(out, &arr, BSON_TYPE_ARRAY);
        }
    }
cleanup:
    rx_destroy(&r);
    expr_free_args(v, e->nargs);
    return ok;
}

const expr_op_t expr_regex_ops[] = {
    {"$regexFind", .fn = op_regex, .parse = OPP_NAMED, .params = {"!input", "!regex", "options"},
     .aux = RX_FIND, .named_codes = {51103, 31024}, .missing_codes = {31022, 31023}},
    {"$regexFindAll", .fn = op_regex, .parse = OPP_NAMED,
     .params = {"!input", "!regex", "options"}, .aux = RX_FIND_ALL, .named_codes = {51103, 31024},
     .missing_codes = {31022, 31023}},
    {"$regexMatch", .fn = op_regex, .parse = OPP_NAMED, .params = {"!input", "!regex", "options"},
     .aux = RX_MATCH, .named_codes = {51103, 31024}, .missing_codes = {31022, 31023}},
    {NULL},
};
