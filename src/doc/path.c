/* path: dotted field paths over BSON documents — plain lookup (path_get) and
 * MongoDB's query-style traversal through arrays (path_visit, and path_walk
 * for the matcher, which also reports missing values and array positions). */
#include "doc/path.h"

#include <string.h>

/* Finds field `name[0..len)` in the document or array at `data`. */
static bool find_field(const uint8_t *data, uint32_t dlen, const char *name, size_t len,
                       bson_iter_t *out)
{
    bson_t b;
    if (!data || !bson_init_static(&b, data, dlen) || !bson_iter_init(out, &b))
        return false;
    while (bson_iter_next(out)) {
        if (bson_iter_key_len(out) == len && memcmp(bson_iter_key(out), name, len) == 0)
            return true;
    }
    return false;
}

/* Length of the first component of `path`. */
static size_t comp_len(const char *path)
{
    const char *dot = strchr(path, '.');
    return dot ? (size_t)(dot - path) : strlen(path);
}

/* Parses a non-negative array index ("0", "12"; no sign, no leading zero). */
static bool comp_index(const char *c, size_t len, uint32_t *idx)
{
    if (len == 0 || len > 9 || (len > 1 && c[0] == '0'))
        return false;
    uint32_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (c[i] < '0' || c[i] > '9')
            return false;
        v = v * 10 + (uint32_t)(c[i] - '0');
    }
    *idx = v;
    return true;
}

bool path_get(const bson_t *doc, const char *path, bson_iter_t *out)
{
    const uint8_t *data = bson_get_data(doc);
    uint32_t len = doc->len;
    for (;;) {
        size_t n = comp_len(path);
        if (!find_field(data, len, path, n, out))
            return false;
        if (path[n] == '\0')
            return true;
        bson_type_t t = bson_iter_type(out);
        if (t == BSON_TYPE_DOCUMENT)
            bson_iter_document(out, &len, &data);
        else if (t == BSON_TYPE_ARRAY)
            bson_iter_array(out, &len, &data);
        else
            return false;
        path += n + 1;
    }
}

/* -- path_walk -- */

typedef struct walk {
    bool expand_leaf;
    path_hit_fn fn;
    void *ctx;
    bool stopped;
} walk_t;

static void emit(walk_t *w, const bson_value_t *v, int pos, bool whole)
{
    if (w->stopped)
        return;
    path_hit_t hit = {v, pos, whole};
    if (!w->fn(&hit, w->ctx))
        w->stopped = true;
}

static void emit_missing(walk_t *w, int pos)
{
    bson_value_t missing;
    memset(&missing, 0, sizeof missing);
    missing.value_type = BSON_TYPE_EOD;
    emit(w, &missing, pos, false);
}

static void walk_doc(walk_t *w, const uint8_t *data, uint32_t len, const char *path, int pos);
static void walk_array(walk_t *w, const uint8_t *data, uint32_t len, const char *path, int pos);

/* The value at the end of the path: an array is visited whole and then,
 * when asked, element by element. */
static void emit_leaf(walk_t *w, bson_iter_t *it, int pos)
{
    if (bson_iter_type(it) == BSON_TYPE_ARRAY) {
        emit(w, bson_iter_value(it), pos, true);
        if (w->expand_leaf) {
            bson_iter_t child;
            int i = 0;
            if (bson_iter_recurse(it, &child)) {
                while (!w->stopped && bson_iter_next(&child)) {
                    emit(w, bson_iter_value(&child), pos >= 0 ? pos : i, false);
                    i++;
                }
            }
        }
        return;
    }
    emit(w, bson_iter_value(it), pos, false);
}

/* Continues `path` (non-empty) below the value at `it`. */
static void descend(walk_t *w, bson_iter_t *it, const char *path, int pos, bool in_array)
{
    uint32_t len;
    const uint8_t *data;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DOCUMENT:
        bson_iter_document(it, &len, &data);
        walk_doc(w, data, len, path, pos);
        break;
    case BSON_TYPE_ARRAY:
        bson_iter_array(it, &len, &data);
        walk_array(w, data, len, path, pos);
        break;
    default:
        if (!in_array)
            emit_missing(w, pos);
        break;
    }
}

static void walk_doc(walk_t *w, const uint8_t *data, uint32_t len, const char *path, int pos)
{
    size_t n = comp_len(path);
    bson_iter_t it;
    if (!find_field(data, len, path, n, &it)) {
        emit_missing(w, pos);
        return;
    }
    if (path[n] == '\0')
        emit_leaf(w, &it, pos);
    else
        descend(w, &it, path + n + 1, pos, false);
}

static void walk_array(walk_t *w, const uint8_t *data, uint32_t len, const char *path, int pos)
{
    bson_t b;
    bson_iter_t it;
    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b))
        return;
    /* The rest of the path applies to each document element. */
    int i = 0;
    while (!w->stopped && bson_iter_next(&it)) {
        if (bson_iter_type(&it) == BSON_TYPE_DOCUMENT) {
            uint32_t elen;
            const uint8_t *edata;
            bson_iter_document(&it, &elen, &edata);
            walk_doc(w, edata, elen, path, pos >= 0 ? pos : i);
        }
        i++;
    }
    /* A numeric component also indexes the array. */
    size_t n = comp_len(path);
    uint32_t idx;
    if (w->stopped || !comp_index(path, n, &idx) || !find_field(data, len, path, n, &it))
        return;
    if (path[n] == '\0')
        emit_leaf(w, &it, pos);
    else
        descend(w, &it, path + n + 1, pos, true);
}

bool path_walk(const bson_t *doc, const char *path, bool expand_leaf, path_hit_fn fn, void *ctx)
{
    walk_t w = {expand_leaf, fn, ctx, false};
    walk_doc(&w, bson_get_data(doc), doc->len, path, -1);
    return !w.stopped;
}

/* -- path_visit -- */

typedef struct visit_ctx {
    path_visit_fn fn;
    void *ctx;
    size_t count;
} visit_ctx_t;

static bool visit_hit(const path_hit_t *hit, void *ctx)
{
    visit_ctx_t *vc = ctx;
    if (hit->value->value_type == BSON_TYPE_EOD)
        return true;
    vc->count++;
    return vc->fn(hit->value, vc->ctx);
}

size_t path_visit(const bson_t *doc, const char *path, path_visit_fn fn, void *ctx)
{
    visit_ctx_t vc = {fn, ctx, 0};
    path_walk(doc, path, true, visit_hit, &vc);
    return vc.count;
}

char **path_split(const char *path, size_t *n)
{
    size_t count = 1;
    for (const char *p = path; *p; p++)
        count += *p == '.';
    char **parts = bson_malloc0(count * sizeof *parts);
    const char *start = path;
    size_t i = 0;
    for (const char *p = path;; p++) {
        if (*p == '.' || *p == '\0') {
            parts[i++] = bson_strndup(start, (size_t)(p - start));
            if (*p == '\0')
                break;
            start = p + 1;
        }
    }
    *n = count;
    return parts;
}

void path_free(char **parts, size_t n)
{
    for (size_t i = 0; parts && i < n; i++)
        bson_free(parts[i]);
    bson_free(parts);
}

bool path_split_field(const char *path, char ***parts, size_t *n, dberr_t *err)
{
    *parts = path_split(path, n);
    for (size_t i = 0; i < *n; i++) {
        if ((*parts)[i][0] == '\0' || (*parts)[i][0] == '$') {
            if ((*parts)[i][0] == '\0')
                dberr_set(err, 15998, "FieldPath field names may not be empty strings.");
            else
                dberr_set(err, 16410,
                          "FieldPath field names may not start with '$'. Consider "
                          "using $getField or $setField.");
            path_free(*parts, *n);
            *parts = NULL;
            *n = 0;
            return false;
        }
    }
    return true;
}
