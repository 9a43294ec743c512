/* docvalidation: errInfo.details for a document that fails a collection
 * validator, shaped as mongod 7's doc_validation_error output: $jsonSchema
 * rules in full, query-operator clauses by operator, reason and value. */
#include "doc/docvalidation.h"

#include <string.h>

#include "doc/jsonschema.h"
#include "doc/matcher.h"
#include "util/shellfmt.h"

static void docvalidation_clause(const bson_iter_t *it, const bson_t *doc, bool brief,
                                 bson_t *out);

/* True when the one-clause filter {key: value} of `it` matches `doc`. */
static bool docvalidation_clause_matches(const char *key, const bson_value_t *v,
                                         const bson_t *doc)
{
    bson_t filter = BSON_INITIALIZER;
    bson_append_value(&filter, key, -1, v);
    dberr_t err;
    matcher_t *m = matcher_new(&filter, &err);
    bool ok = !m || matcher_matches(m, doc, NULL);
    matcher_destroy(m);
    bson_destroy(&filter);
    return ok;
}

/* Opens entry `k` of the array `arr`, {index: i, details: {...}}, with its
 * details to be written into `details`; docvalidation_entry_end closes it. */
static void docvalidation_entry_begin(bson_t *arr, uint32_t k, uint32_t i, bson_t *entry,
                                      bson_t *details)
{
    const char *key;
    char buf[16];
    bson_uint32_to_string(k, &key, buf, sizeof buf);
    bson_append_document_begin(arr, key, -1, entry);
    BSON_APPEND_INT32(entry, "index", (int32_t)i);
    bson_append_document_begin(entry, "details", -1, details);
}

static void docvalidation_entry_end(bson_t *arr, bson_t *entry, bson_t *details)
{
    bson_append_document_end(entry, details);
    bson_append_document_end(arr, entry);
}

/* `field`: [{index, details}] for each top-level clause of `filter` that
 * `doc` fails. */
static void docvalidation_clauses(const bson_t *filter, const bson_t *doc, bool brief,
                                  bson_t *out, const char *field)
{
    bson_t arr;
    bson_append_array_begin(out, field, -1, &arr);
    bson_iter_t it;
    uint32_t i = 0, k = 0;
    if (bson_iter_init(&it, filter)) {
        for (; bson_iter_next(&it); i++) {
            if (docvalidation_clause_matches(bson_iter_key(&it), bson_iter_value(&it), doc))
                continue;
            bson_t entry, details;
            docvalidation_entry_begin(&arr, k++, i, &entry, &details);
            docvalidation_clause(&it, doc, brief, &details);
            docvalidation_entry_end(&arr, &entry, &details);
        }
    }
    bson_append_array_end(out, &arr);
}

/* The details of a whole filter document. */
static void docvalidation_filter(const bson_t *filter, const bson_t *doc, bool brief,
                                 bson_t *out)
{
    bson_iter_t it;
    if (bson_count_keys(filter) == 1 && bson_iter_init(&it, filter) && bson_iter_next(&it)) {
        docvalidation_clause(&it, doc, brief, out);
        return;
    }
    BSON_APPEND_UTF8(out, "operatorName", "$and");
    docvalidation_clauses(filter, doc, brief, out, "clausesNotSatisfied");
}

/* mongod's reason for a failing field predicate. */
static const char *docvalidation_reason(const char *op)
{
    static const struct {
        const char *op, *reason;
    } reasons[] = {
        {"$eq", "comparison failed"},
        {"$ne", "comparison succeeded"},
        {"$gt", "comparison failed"},
        {"$gte", "comparison failed"},
        {"$lt", "comparison failed"},
        {"$lte", "comparison failed"},
        {"$in", "no matching value found in array"},
        {"$nin", "matching value found in array"},
        {"$type", "type did not match"},
        {"$regex", "regular expression did not match"},
        {"$size", "array length was not equal to given size"},
        {"$all", "array did not contain all specified values"},
        {"$elemMatch", "array did not satisfy the child predicate"},
        {"$mod", "$mod did not evaluate to expected remainder"},
    };
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (strcmp(op, reasons[i].op) == 0)
            return reasons[i].reason;
    return "expression did not match";
}

/* {operatorName: op, specifiedAs: {key: v}} into `out` (specifiedAs left
 * out when `brief`). */
static void docvalidation_operator(bson_t *out, bool brief, const char *op, const char *key,
                                   const bson_value_t *v)
{
    BSON_APPEND_UTF8(out, "operatorName", op);
    if (brief)
        return;
    bson_t sa;
    bson_append_document_begin(out, "specifiedAs", -1, &sa);
    bson_append_value(&sa, key, -1, v);
    bson_append_document_end(out, &sa);
}

/* {operatorName, specifiedAs: {path: spec}, reason, consideredValue} for
 * the field predicate `path: spec` whose operator is `op`. */
static void docvalidation_field(const char *path, const char *op, const bson_value_t *spec,
                                const bson_t *doc, bool brief, bson_t *out)
{
    docvalidation_operator(out, brief, op, path, spec);
    bson_iter_t it, found;
    bool present = bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found);
    if (strcmp(op, "$exists") == 0) {
        BSON_APPEND_UTF8(out, "reason", present ? "path does exist" : "path does not exist");
        return;
    }
    if (!present) {
        BSON_APPEND_UTF8(out, "reason", "field was missing");
        return;
    }
    BSON_APPEND_UTF8(out, "reason", docvalidation_reason(op));
    if (!brief)
        bson_append_value(out, "consideredValue", -1, bson_iter_value(&found));
    if (strcmp(op, "$type") == 0)
        BSON_APPEND_UTF8(out, "consideredType", shellfmt_type_name(bson_iter_type(&found)));
}

static void docvalidation_clause(const bson_iter_t *it, const bson_t *doc, bool brief,
                                 bson_t *out)
{
    const char *key = bson_iter_key(it);
    const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
    bson_t sub;
    if (strcmp(key, "$jsonSchema") == 0 && v->value_type == BSON_TYPE_DOCUMENT &&
        bson_init_static(&sub, v->value.v_doc.data, v->value.v_doc.data_len)) {
        dberr_t err;
        jsonschema_t *s = jsonschema_new(&sub, 0, &err);
        if (s) {
            jsonschema_explain(s, doc, brief, out);
            jsonschema_destroy(s);
            return;
        }
    }
    if ((strcmp(key, "$and") == 0 || strcmp(key, "$or") == 0) &&
        v->value_type == BSON_TYPE_ARRAY &&
        bson_init_static(&sub, v->value.v_doc.data, v->value.v_doc.data_len)) {
        /* each entry is a filter document; list those that fail */
        BSON_APPEND_UTF8(out, "operatorName", key);
        bson_t arr;
        bson_iter_t e;
        uint32_t i = 0, k = 0;
        bson_append_array_begin(out, "clausesNotSatisfied", -1, &arr);
        for (bson_iter_init(&e, &sub); bson_iter_next(&e); i++) {
            bson_t f;
            if (!BSON_ITER_HOLDS_DOCUMENT(&e))
                continue;
            const bson_value_t *fv = bson_iter_value(&e);
            if (!bson_init_static(&f, fv->value.v_doc.data, fv->value.v_doc.data_len))
                continue;
            matcher_t *m;
            dberr_t err;
            if ((m = matcher_new(&f, &err)) && matcher_matches(m, doc, NULL)) {
                matcher_destroy(m);
                continue;
            }
            matcher_destroy(m);
            bson_t entry, details;
            docvalidation_entry_begin(&arr, k++, i, &entry, &details);
            docvalidation_filter(&f, doc, brief, &details);
            docvalidation_entry_end(&arr, &entry, &details);
        }
        bson_append_array_end(out, &arr);
        return;
    }
    if (key[0] == '$') { /* $expr, $nor, ... */
        docvalidation_operator(out, brief, key, key, v);
        BSON_APPEND_UTF8(out, "reason", "expression did not match");
        if (strcmp(key, "$expr") == 0)
            BSON_APPEND_BOOL(out, "expressionResult", false);
        return;
    }
    bson_iter_t ops;
    if (v->value_type == BSON_TYPE_DOCUMENT && bson_iter_recurse(it, &ops) &&
        bson_iter_next(&ops) && bson_iter_key(&ops)[0] == '$' &&
        strcmp(bson_iter_key(&ops), "$ref") && strcmp(bson_iter_key(&ops), "$id") &&
        strcmp(bson_iter_key(&ops), "$db")) {
        /* {path: {$op: arg, ...}}: describe the first operator that fails
         * alone, or the whole predicate when none does ($regex/$options) */
        bson_iter_recurse(it, &ops);
        while (bson_iter_next(&ops)) {
            const char *op = bson_iter_key(&ops);
            bson_t one = BSON_INITIALIZER;
            bson_append_value(&one, op, -1, bson_iter_value(&ops));
            bson_value_t onev = {.value_type = BSON_TYPE_DOCUMENT};
            onev.value.v_doc.data = (uint8_t *)bson_get_data(&one);
            onev.value.v_doc.data_len = one.len;
            bool fails = !docvalidation_clause_matches(key, &onev, doc);
            if (fails)
                docvalidation_field(key, op, &onev, doc, brief, out);
            bson_destroy(&one);
            if (fails)
                return;
        }
        bson_iter_recurse(it, &ops);
        bson_iter_next(&ops);
        docvalidation_field(key, bson_iter_key(&ops), v, doc, brief, out);
        return;
    }
    docvalidation_field(key, v->value_type == BSON_TYPE_REGEX ? "$regex" : "$eq", v, doc, brief,
                        out);
}

void docvalidation_explain(const bson_t *validator, const bson_t *doc, bool brief, bson_t *out)
{
    docvalidation_filter(validator, doc, brief, out);
}
