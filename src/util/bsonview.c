/* bsonview: borrowed views of nested documents and arrays (bsonview.h). */
#include "util/bsonview.h"

bool bsonview_iter(const bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *data;
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        bson_iter_document(it, &len, &data);
    else if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &len, &data);
    else
        return false;
    return bson_init_static(out, data, len);
}

bool bsonview_field(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DOCUMENT(&it) &&
           bsonview_iter(&it, out);
}
