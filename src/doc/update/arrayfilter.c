/* update/arrayfilter: the `arrayFilters` of an update — one matcher per
 * identifier, tested against array elements for $[<id>] paths. */
#include "doc/update/update-private.h"
#include "doc/collation.h"

#include <string.h>

#include "util/bsonview.h"
#include "util/shellfmt.h"

/* Collects the identifiers (first path components) a filter names, looking
 * through $and/$or/$nor. */
static void filter_idents(const bson_t *f, char **first, char **second)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, f))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) {
            bson_iter_t ai;
            if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &ai)) {
                while (bson_iter_next(&ai)) {
                    bson_t sub;
                    if (BSON_ITER_HOLDS_DOCUMENT(&ai) && bsonview_iter(&ai, &sub))
                        filter_idents(&sub, first, second);
                }
            }
            continue;
        }
        if (k[0] == '$')
            continue;
        const char *dot = strchr(k, '.');
        char *id = dot ? bson_strndup(k, (size_t)(dot - k)) : bson_strdup(k);
        if (!*first)
            *first = id;
        else if (strcmp(*first, id) != 0 && !*second)
            *second = id;
        else
            bson_free(id);
    }
}

static bool valid_ident(const char *id)
{
    if (!(id[0] >= 'a' && id[0] <= 'z'))
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            return false;
    return true;
}

/* The identifier of filter `f` (owned) into `out`, checked as mongod does. */
static bool filter_ident(const updater_t *u, const bson_t *f, char **out, dberr_t *err)
{
    char *first = NULL, *second = NULL;
    filter_idents(f, &first, &second);
    if (!first) {
        bson_free(second);
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "Cannot use an expression without a top-level field name in "
                         "arrayFilters");
    }
    if (second)
        dberr_set(err, DBERR_FAILED_TO_PARSE,
                  "Error parsing array filter :: caused by :: Expected a single top-level field "
                  "name, found '%s' and '%s'",
                  first, second);
    else if (!valid_ident(first))
        dberr_set(err, DBERR_BAD_VALUE,
                  "Error parsing array filter :: caused by :: The top-level field name must be "
                  "an alphanumeric string beginning with a lowercase letter, found '%s'",
                  first);
    else if (afilter_find(u, first))
        dberr_set(err, DBERR_FAILED_TO_PARSE,
                  "Found multiple array filters with the same top-level field name %s", first);
    else {
        *out = first;
        return true;
    }
    bson_free(first);
    bson_free(second);
    return false;
}

bool afilter_parse_all(updater_t *u, const bson_t *array_filters, dberr_t *err)
{
    bson_iter_t it;
    size_t n = bson_count_keys(array_filters);
    u->filters = bson_malloc0((n ? n : 1) * sizeof *u->filters);
    if (!bson_iter_init(&it, array_filters))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "arrayFilters must be an array of documents");
    while (bson_iter_next(&it)) {
        bson_t f;
        char *id = NULL;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return dberr_set(
                err, DBERR_TYPE_MISMATCH,
                "BSON field 'update.updates.arrayFilters' is the wrong type '%s', expected "
                "type 'object'",
                shellfmt_type_name(bson_iter_type(&it)));
        if (!bsonview_iter(&it, &f))
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "invalid array filter");
        if (!filter_ident(u, &f, &id, err))
            return false;
        afilter_t *a = &u->filters[u->nfilters++];
        a->id = id;
        if (!(a->m = matcher_new(&f, err)))
            return false;
    }
    return true;
}

const afilter_t *afilter_find(const updater_t *u, const char *id)
{
    for (size_t i = 0; i < u->nfilters; i++)
        if (strcmp(u->filters[i].id, id) == 0)
            return &u->filters[i];
    return NULL;
}

bool afilter_matches(const afilter_t *f, const doctree_t *elem)
{
    bson_t wrapped = BSON_INITIALIZER;
    doctree_write(&wrapped, f->id, elem);
    bool m = matcher_matches(f->m, &wrapped, NULL);
    bson_destroy(&wrapped);
    return m;
}

void afilter_free_all(updater_t *u)
{
    for (size_t i = 0; i < u->nfilters; i++) {
        bson_free(u->filters[i].id);
        matcher_destroy(u->filters[i].m);
    }
    bson_free(u->filters);
    u->filters = NULL;
    u->nfilters = 0;
}

/* Points the $pull matchers of the tree under `n` at `coll`. */
static void afilter_set_node_collation(unode_t *n, collation_t *coll)
{
    if (!n)
        return;
    if (n->kind == UN_LEAF) {
        if (n->op && !strcmp(n->op->name, "$pull") && n->u.pull.matcher)
            matcher_set_collation(n->u.pull.matcher, coll);
        return;
    }
    for (size_t i = 0; i < n->nkids; i++)
        afilter_set_node_collation(n->kids[i].node, coll);
    afilter_set_node_collation(n->positional, coll);
}

void updater_set_collation(updater_t *u, collation_t *coll)
{
    collation_t *old = u->coll;
    u->coll = collation_ref(coll);
    collation_destroy(old);
    for (size_t i = 0; i < u->nfilters; i++)
        matcher_set_collation(u->filters[i].m, coll);
    afilter_set_node_collation(u->root, coll);
    if (u->pipeline)
        pipeline_set_collation(u->pipeline, coll);
}
