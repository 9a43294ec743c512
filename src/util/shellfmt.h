/* shellfmt: renders BSON the way mongod writes it into error messages
 * ({ _id: 1, name: "x" }), for duplicate-key and update errors, and names
 * BSON types as those messages do. */
#ifndef ATOMDB_SHELLFMT_H
#define ATOMDB_SHELLFMT_H

#include <bson/bson.h>

/* `doc` rendered as "{ a: 1, b: "x" }"; the caller frees with bson_free. */
char *shellfmt_doc(const bson_t *doc);

/* One value rendered the same way; the caller frees with bson_free. */
char *shellfmt_value(const bson_value_t *v);

/* mongod's alias of a BSON type ("int", "string", "object") as its
 * messages name it; "missing" for BSON_TYPE_EOD (an absent field). */
const char *shellfmt_type_name(bson_type_t t);

#endif
