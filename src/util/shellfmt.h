/* shellfmt: atomdb's one value renderer — BSON written the way mongod writes
 * it into error messages ({ _id: 1, name: "x" }, 0.1, 5.0, ObjectId('...')),
 * appended to a bson_string_t, and the names mongod gives BSON types. */
#ifndef ATOMDB_SHELLFMT_H
#define ATOMDB_SHELLFMT_H

#include <bson/bson.h>

/* Appends `v` to `s` as mongod's BSONElement::toString renders a value:
 * doubles as "%.16g" with ".0" added when that shows no '.', 'E' or 'N'
 * (0.1, 5.0, 1e+20.0), decimal128 as its string ("0.30"), strings in double
 * quotes, documents "{ a: 1 }" / "{}", arrays "[ 1, 2 ]" / "[]". Containers
 * nested more than 20 levels print as "{...}" / "[...]". */
void shellfmt_append_value(bson_string_t *s, const bson_value_t *v);

/* Appends "name: value" (an element as mongod prints one). */
void shellfmt_append_element(bson_string_t *s, const char *name, const bson_value_t *v);

/* Appends the whole document `doc` as "{ a: 1, b: "x" }". */
void shellfmt_append_doc(bson_string_t *s, const bson_t *doc);

/* `doc` rendered as above; the caller frees it with bson_free. */
char *shellfmt_doc(const bson_t *doc);

/* One value rendered as above; the caller frees it with bson_free. */
char *shellfmt_value(const bson_value_t *v);

/* mongod's alias of a BSON type ("int", "string", "object") as its
 * messages name it; "missing" for BSON_TYPE_EOD (an absent field). */
const char *shellfmt_type_name(bson_type_t t);

/* The BSON type whose mongod alias is `name` (the names above but
 * "missing"; not "number", which is several), as $type and $convert read
 * them; false when `name` is none of them. */
bool shellfmt_type_from_name(const char *name, bson_type_t *out);

#endif
