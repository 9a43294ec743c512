/* doctree: the mutable document tree an update edits in place, then writes
 * back as BSON (the updater's view of mongod's mutablebson). */
#include "doc/update/doctree.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "doc/compare.h"
#include "util/shellfmt.h"
#include "util/vec.h"

doctree_t *doctree_new(const char *name)
{
    doctree_t *n = bson_malloc0(sizeof *n);
    n->name = name ? bson_strdup(name) : NULL;
    n->type = BSON_TYPE_NULL;
    n->v.value_type = BSON_TYPE_NULL;
    return n;
}

bool doctree_is_container(const doctree_t *n)
{
    return n->type == BSON_TYPE_DOCUMENT || n->type == BSON_TYPE_ARRAY;
}

static void doctree_free_kids(doctree_t *n)
{
    for (size_t i = 0; i < n->nkids; i++)
        doctree_free(n->kids[i]);
    bson_free(n->kids);
    n->kids = NULL;
    n->nkids = n->cap = 0;
}

void doctree_free(doctree_t *n)
{
    if (!n)
        return;
    doctree_free_kids(n);
    if (!doctree_is_container(n))
        bson_value_destroy(&n->v);
    bson_free(n->name);
    bson_free(n);
}

void doctree_clear_value(doctree_t *n)
{
    doctree_free_kids(n);
    if (!doctree_is_container(n))
        bson_value_destroy(&n->v);
    memset(&n->v, 0, sizeof n->v);
    n->type = BSON_TYPE_NULL;
    n->v.value_type = BSON_TYPE_NULL;
}

void doctree_insert(doctree_t *parent, size_t at, doctree_t *kid)
{
    VEC_RESERVE_ONE(parent->kids, parent->nkids, parent->cap, 4);
    if (at > parent->nkids)
        at = parent->nkids;
    memmove(parent->kids + at + 1, parent->kids + at, (parent->nkids - at) * sizeof *parent->kids);
    parent->kids[at] = kid;
    parent->nkids++;
    kid->parent = parent;
}

void doctree_append(doctree_t *parent, doctree_t *kid)
{
    doctree_insert(parent, parent->nkids, kid);
}

doctree_t *doctree_take(doctree_t *parent, size_t at)
{
    doctree_t *k = parent->kids[at];
    memmove(parent->kids + at, parent->kids + at + 1,
            (parent->nkids - at - 1) * sizeof *parent->kids);
    parent->nkids--;
    k->parent = NULL;
    return k;
}

void doctree_remove(doctree_t *kid)
{
    doctree_t *parent = kid->parent;
    doctree_free(doctree_take(parent, doctree_index_of(parent, kid)));
}

size_t doctree_index_of(const doctree_t *parent, const doctree_t *kid)
{
    for (size_t i = 0; i < parent->nkids; i++)
        if (parent->kids[i] == kid)
            return i;
    return parent->nkids;
}

static void doctree_fill(doctree_t *n, const bson_value_t *v);

static void doctree_fill_container(doctree_t *n, bson_type_t type, const uint8_t *data,
                                   uint32_t len)
{
    bson_t b;
    bson_iter_t it;
    n->type = type;
    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b))
        return;
    while (bson_iter_next(&it)) {
        doctree_t *k = doctree_new(type == BSON_TYPE_ARRAY ? NULL : bson_iter_key(&it));
        doctree_fill(k, bson_iter_value(&it));
        doctree_append(n, k);
    }
}

static void doctree_fill(doctree_t *n, const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) {
        doctree_fill_container(n, v->value_type, v->value.v_doc.data, v->value.v_doc.data_len);
    } else {
        n->type = v->value_type;
        bson_value_copy(v, &n->v);
    }
}

void doctree_set_value(doctree_t *n, const bson_value_t *v)
{
    doctree_clear_value(n);
    doctree_fill(n, v);
}

doctree_t *doctree_from_value(const bson_value_t *v)
{
    doctree_t *n = doctree_new(NULL);
    doctree_fill(n, v);
    return n;
}

doctree_t *doctree_from_doc(const bson_t *doc)
{
    doctree_t *root = doctree_new(NULL);
    doctree_fill_container(root, BSON_TYPE_DOCUMENT, bson_get_data(doc), doc->len);
    return root;
}

doctree_t *doctree_clone(const doctree_t *src, const char *name)
{
    doctree_t *n = doctree_new(name);
    n->type = src->type;
    if (doctree_is_container(src)) {
        for (size_t i = 0; i < src->nkids; i++)
            doctree_append(n, doctree_clone(src->kids[i], src->kids[i]->name));
    } else {
        bson_value_copy(&src->v, &n->v);
    }
    return n;
}

void doctree_write(bson_t *out, const char *key, const doctree_t *n)
{
    bson_t child;
    if (n->type == BSON_TYPE_DOCUMENT) {
        bson_append_document_begin(out, key, -1, &child);
        doctree_write_kids(&child, n);
        bson_append_document_end(out, &child);
    } else if (n->type == BSON_TYPE_ARRAY) {
        bson_append_array_begin(out, key, -1, &child);
        doctree_write_kids(&child, n);
        bson_append_array_end(out, &child);
    } else {
        bson_append_value(out, key, -1, &n->v);
    }
}

void doctree_write_kids(bson_t *out, const doctree_t *n)
{
    char buf[16];
    const char *key;
    for (size_t i = 0; i < n->nkids; i++) {
        if (n->type == BSON_TYPE_ARRAY)
            bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
        else
            key = n->kids[i]->name;
        doctree_write(out, key, n->kids[i]);
    }
}

void doctree_value(const doctree_t *n, bson_value_t *out, bson_t **tmp)
{
    *tmp = NULL;
    if (doctree_is_container(n)) {
        *tmp = bson_new();
        doctree_write_kids(*tmp, n);
        out->value_type = n->type;
        out->value.v_doc.data = (uint8_t *)bson_get_data(*tmp);
        out->value.v_doc.data_len = (*tmp)->len;
    } else {
        *out = n->v;
    }
}

int doctree_compare_value(const doctree_t *n, const bson_value_t *v)
{
    return doctree_compare_value_coll(n, v, NULL);
}

int doctree_compare_value_coll(const doctree_t *n, const bson_value_t *v,
                               const collation_t *coll)
{
    bson_value_t nv;
    bson_t *tmp;
    doctree_value(n, &nv, &tmp);
    int c = compare_values_coll(&nv, v, coll);
    bson_destroy(tmp);
    return c;
}

bool doctree_binary_equal(const doctree_t *n, const bson_value_t *v)
{
    if (n->type != v->value_type)
        return false;
    bson_value_t nv;
    bson_t *tmp;
    bool eq;
    doctree_value(n, &nv, &tmp);
    if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) {
        eq = nv.value.v_doc.data_len == v->value.v_doc.data_len &&
             memcmp(nv.value.v_doc.data, v->value.v_doc.data, v->value.v_doc.data_len) == 0;
    } else {
        bson_t a, b;
        bson_init(&a);
        bson_init(&b);
        bson_append_value(&a, "", 0, &nv);
        bson_append_value(&b, "", 0, v);
        eq = a.len == b.len && memcmp(bson_get_data(&a), bson_get_data(&b), a.len) == 0;
        bson_destroy(&a);
        bson_destroy(&b);
    }
    bson_destroy(tmp);
    return eq;
}

doctree_t *doctree_find(const doctree_t *n, const char *name)
{
    if (n->type != BSON_TYPE_DOCUMENT)
        return NULL;
    for (size_t i = 0; i < n->nkids; i++)
        if (strcmp(n->kids[i]->name, name) == 0)
            return n->kids[i];
    return NULL;
}

bool doctree_parse_index(const char *s, size_t *out)
{
    size_t v = 0;
    if (!*s)
        return false;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (SIZE_MAX - 9) / 10)
            return false;
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return true;
}

doctree_t *doctree_child(const doctree_t *n, const char *component)
{
    size_t idx;
    if (n->type == BSON_TYPE_DOCUMENT)
        return doctree_find(n, component);
    if (n->type == BSON_TYPE_ARRAY && doctree_parse_index(component, &idx))
        return idx < n->nkids ? n->kids[idx] : NULL;
    return NULL;
}

const char *doctree_field_name(const doctree_t *n, char *buf, size_t bufsz)
{
    if (n->name)
        return n->name;
    if (n->parent) {
        snprintf(buf, bufsz, "%zu", doctree_index_of(n->parent, n));
        return buf;
    }
    return "";
}

void doctree_append_element(bson_string_t *s, const char *name, const doctree_t *n)
{
    bson_value_t v;
    bson_t *tmp;
    doctree_value(n, &v, &tmp);
    shellfmt_append_element(s, name, &v);
    bson_destroy(tmp);
}
