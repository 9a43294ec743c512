/* matcher-seed: the document an upsert starts from — the equality
 * predicates of a filter (top level, under $and and one-clause $or), dotted
 * paths expanded into nested documents, `_id` first. */
#include <string.h>

#include "doc/matcher-private.h"
#include "doc/matcher.h"
#include "util/bsonview.h"

/* -- upsert seed -- */

typedef struct seed_entry {
    const char *path;   /* borrowed from the filter */
    const char *rest;   /* the part still to place while building */
    bson_value_t value; /* borrowed from the filter */
} seed_entry_t;

typedef struct seed {
    seed_entry_t *v;
    size_t n;
} seed_t;

/* True when `a` is `b` or a dotted prefix of it. */
static bool path_prefix(const char *a, const char *b)
{
    size_t la = strlen(a);
    return strncmp(a, b, la) == 0 && (b[la] == '\0' || b[la] == '.');
}

static bool seed_add(seed_t *s, const char *path, const bson_value_t *v, dberr_t *err)
{
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->v[i].path, path) == 0)
            return dberr_set(err, 54, "cannot infer query fields to set, path '%s' is matched twice",
                             path);
        if (path_prefix(s->v[i].path, path) || path_prefix(path, s->v[i].path))
            return dberr_set(err, 54,
                             "cannot infer query fields to set, both paths '%s' and '%s' are matched",
                             s->v[i].path, path);
    }
    s->v = bson_realloc(s->v, (s->n + 1) * sizeof *s->v);
    s->v[s->n].path = path;
    s->v[s->n].rest = path;
    s->v[s->n].value = *v;
    s->n++;
    return true;
}

static bool seed_collect(seed_t *s, const bson_t *filter, int depth, dberr_t *err)
{
    bson_iter_t it;
    if (!matcher_iter_filter(filter, depth, &it, err))
        return false;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (key[0] == '$') {
            bool is_and = strcmp(key, "$and") == 0;
            bool is_or = strcmp(key, "$or") == 0;
            if ((!is_and && !is_or) || bson_iter_type(&it) != BSON_TYPE_ARRAY)
                continue;
            bson_iter_t child;
            bson_iter_recurse(&it, &child);
            uint32_t count = 0;
            bson_iter_t probe = child;
            while (bson_iter_next(&probe))
                count++;
            if (is_or && count != 1)
                continue; /* a real disjunction fixes no field */
            while (bson_iter_next(&child)) {
                bson_t sub;
                if (bson_iter_type(&child) != BSON_TYPE_DOCUMENT)
                    continue;
                if (bsonview_iter(&child, &sub) && !seed_collect(s, &sub, depth + 1, err))
                    return false;
            }
            continue;
        }
        if (matcher_is_operator_doc(&it)) {
            bson_iter_t ops;
            bson_iter_recurse(&it, &ops);
            while (bson_iter_next(&ops)) {
                if (strcmp(bson_iter_key(&ops), "$eq") == 0 &&
                    !seed_add(s, key, bson_iter_value(&ops), err))
                    return false;
            }
        } else if (bson_iter_type(&it) != BSON_TYPE_REGEX) {
            if (!seed_add(s, key, bson_iter_value(&it), err))
                return false;
        }
    }
    return true;
}

static size_t first_comp_len(const char *p)
{
    const char *dot = strchr(p, '.');
    return dot ? (size_t)(dot - p) : strlen(p);
}

/* Appends the entries whose index is in idx[0..n) to `out`, grouping those
 * that share a first component into one nested document. */
static void seed_build(bson_t *out, seed_entry_t *e, size_t *idx, size_t n)
{
    bool *done = bson_malloc0(n ? n : 1);
    size_t *group = bson_malloc((n ? n : 1) * sizeof *group);
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        seed_entry_t *a = &e[idx[i]];
        size_t la = first_comp_len(a->rest);
        if (a->rest[la] == '\0') {
            bson_append_value(out, a->rest, (int)la, &a->value);
            done[i] = true;
            continue;
        }
        size_t ng = 0;
        for (size_t j = i; j < n; j++) {
            seed_entry_t *b = &e[idx[j]];
            if (!done[j] && first_comp_len(b->rest) == la && strncmp(a->rest, b->rest, la) == 0 &&
                b->rest[la] == '.') {
                group[ng++] = idx[j];
                done[j] = true;
            }
        }
        bson_t child;
        bson_append_document_begin(out, a->rest, (int)la, &child);
        for (size_t j = 0; j < ng; j++)
            e[group[j]].rest += la + 1;
        seed_build(&child, e, group, ng);
        bson_append_document_end(out, &child);
    }
    bson_free(group);
    bson_free(done);
}

bool matcher_upsert_seed(const bson_t *filter, bson_t *out, dberr_t *err)
{
    seed_t s = {NULL, 0};
    size_t *idx = NULL;
    bool ok = false;
    if (!seed_collect(&s, filter, 0, err))
        goto cleanup;
    idx = bson_malloc((s.n ? s.n : 1) * sizeof *idx);
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) { /* _id first */
        if (path_prefix("_id", s.v[i].path))
            idx[k++] = i;
    }
    for (size_t i = 0; i < s.n; i++) {
        if (!path_prefix("_id", s.v[i].path))
            idx[k++] = i;
    }
    seed_build(out, s.v, idx, s.n);
    ok = true;
cleanup:
    bson_free(idx);
    bson_free(s.v);
    return ok;
}
