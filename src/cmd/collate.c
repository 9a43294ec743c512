/* collate: which collation an operation runs under — its own `collation`
 * field, else the collection's (or view's) default from `create` — with
 * mongod's rule that an operation on a view cannot take another one. */
#include "cmd/cmd-private.h"

#include "doc/collation.h"
#include "store/collection.h"

bool cmd_collation_resolve(collection_t *c, const bson_iter_t *field, collation_t **out,
                           dberr_t *err)
{
    *out = NULL;
    collation_t *dflt = c ? collection_collation(c) : NULL;
    bson_t given;
    if (field && BSON_ITER_HOLDS_DOCUMENT(field) && cmd_iter_doc(field, &given) &&
        bson_empty(&given))
        field = NULL; /* as mongod: {} is no collation at all */
    if (!field) {
        *out = collation_ref(dflt);
        return true;
    }
    collation_t *own;
    if (!collation_parse_iter(field, &own, err))
        return false;
    if (c && collection_is_view(c) && !collation_same(own, dflt)) {
        collation_destroy(own);
        return dberr_set(err, 167, "Cannot override a view's default collation");
    }
    *out = own;
    return true;
}
