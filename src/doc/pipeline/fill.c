/* pipeline/fill: the $fill stage — parsed into the shape of a
 * $setWindowFields (window.c runs it): {method: "locf" | "linear"} outputs
 * become $locf / $linearFill window functions, {value: expr} outputs are
 * set where the field is null or missing after them, as mongod desugars it. */
#include "doc/pipeline/window-private.h"

#include <string.h>

#include "doc/path.h"

bool window_fill_parse(stage_t *s, bson_iter_t *arg, const bson_t *let, dberr_t *err)
{
    window_fields_t fields;
    if (!BSON_ITER_HOLDS_DOCUMENT(arg))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "$fill specification must be an object");
    window_spec_t *w = s->u.window = window_spec_new("$fill");
    if (!window_fields_parse(w, arg, true, &fields, err))
        return false;
    if (fields.has_partition_fields) {
        /* {"0": "$a.b", "1": "$c"}: one partition per combination */
        bson_iter_t f;
        bson_t *doc = bson_new();
        int i = 0;
        bool ok = BSON_ITER_HOLDS_ARRAY(&fields.partition_fields);
        if (ok) {
            bson_iter_recurse(&fields.partition_fields, &f);
            while (ok && bson_iter_next(&f)) {
                char key[16], *path;
                char **parts = NULL;
                size_t np = 0;
                if (!(ok = BSON_ITER_HOLDS_UTF8(&f))) {
                    break;
                }
                if (!(ok = path_split_field(bson_iter_utf8(&f, NULL), &parts, &np, err)))
                    break;
                path_free(parts, np);
                bson_snprintf(key, sizeof key, "%d", i++);
                path = bson_strdup_printf("$%s", bson_iter_utf8(&f, NULL));
                BSON_APPEND_UTF8(doc, key, path);
                bson_free(path);
            }
            if (!ok && err->code == 0)
                dberr_set(err, DBERR_TYPE_MISMATCH,
                          "BSON field '$fill.partitionByFields' must be an array of strings");
        } else {
            dberr_set(err, DBERR_TYPE_MISMATCH,
                      "BSON field '$fill.partitionByFields' is the wrong type, expected type "
                      "'array'");
        }
        if (ok) {
            bson_t *wrap = bson_new();
            bson_iter_t wi;
            BSON_APPEND_DOCUMENT(wrap, "p", doc);
            bson_iter_init_find(&wi, wrap, "p");
            ok = window_partition_parse(w, &wi, err);
            bson_destroy(wrap);
        }
        bson_destroy(doc);
        if (!ok)
            return false;
    }
    bson_iter_t o;
    bson_iter_recurse(&fields.output, &o);
    while (bson_iter_next(&o)) {
        const char *k = bson_iter_key(&o);
        char **path = NULL;
        size_t np = 0;
        bson_iter_t spec;
        if (!path_split_field(k, &path, &np, err))
            return false;
        int n = 0;
        bool is_value = false, is_method = false;
        bson_iter_t val;
        if (BSON_ITER_HOLDS_DOCUMENT(&o)) {
            bson_iter_recurse(&o, &spec);
            while (bson_iter_next(&spec)) {
                n++;
                if (!strcmp(bson_iter_key(&spec), "value"))
                    is_value = true, val = spec;
                else if (!strcmp(bson_iter_key(&spec), "method"))
                    is_method = true, val = spec;
                else
                    n = 99;
            }
        }
        if (n != 1 || (!is_value && !is_method)) {
            path_free(path, np);
            return dberr_set(err, 6050202,
                             "Exactly one of 'value' or 'method' must be specified in '$fill' "
                             "output field '%s'",
                             k);
        }
        if (is_value) {
            expr_t *e = expr_new(&val, err);
            if (!e) {
                path_free(path, np);
                return false;
            }
            w->fills = bson_realloc(w->fills, (w->nfills + 1) * sizeof *w->fills);
            w->fills[w->nfills++] = (window_fill_t){path, np, e};
            continue;
        }
        const char *m = BSON_ITER_HOLDS_UTF8(&val) ? bson_iter_utf8(&val, NULL) : "";
        const char *fn = !strcmp(m, "linear") ? "$linearFill" : !strcmp(m, "locf") ? "$locf" : NULL;
        if (!fn) {
            path_free(path, np);
            return dberr_set(err, 6050203,
                             "Method must be either 'linear' or 'locf', got '%s' for output field "
                             "'%s'",
                             m, k);
        }
        /* {k: {$locf: "$k"}} through the $setWindowFields parser */
        char *ref = bson_strdup_printf("$%s", k);
        bson_t *d = BCON_NEW("o", "{", fn, BCON_UTF8(ref), "}");
        bson_iter_t di;
        bson_iter_init_find(&di, d, "o");
        w->fns = bson_realloc(w->fns, (w->nfns + 1) * sizeof *w->fns);
        window_fn_t *f = &w->fns[w->nfns++];
        memset(f, 0, sizeof *f);
        f->dflt.value_type = BSON_TYPE_EOD;
        f->path = path;
        f->npath = np;
        f->def = window_fn_find(fn);
        bson_iter_t fi;
        bson_iter_recurse(&di, &fi);
        bson_iter_next(&fi);
        bool ok = true;
        if ((f->def->flags & WFN_SINGLE_SORT) && (!w->sort || w->nsort != 1))
            ok = dberr_set(err, 605001,
                           "$linearFill must be specified with a top level sortBy expression with "
                           "exactly one element");
        if (ok)
            ok = f->def->parse(f, &fi, w, err);
        bson_destroy(d);
        bson_free(ref);
        if (!ok)
            return false;
    }
    return true;
}
