/* bsontext: the characters of BSON's string-like values (string, symbol,
 * JavaScript code with or without scope), which libbson keeps in members
 * named differently for each type. */
#ifndef ATOMDB_BSONTEXT_H
#define ATOMDB_BSONTEXT_H

#include <bson/bson.h>

/* The text of `v` and its length in *len (without the NUL); NULL and 0
 * for a value of any other type. Borrowed from `v`. */
static inline const char *bsontext_of(const bson_value_t *v, uint32_t *len)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        *len = v->value.v_utf8.len;
        return v->value.v_utf8.str;
    case BSON_TYPE_SYMBOL:
        *len = v->value.v_symbol.len;
        return v->value.v_symbol.symbol;
    case BSON_TYPE_CODE:
        *len = v->value.v_code.code_len;
        return v->value.v_code.code;
    case BSON_TYPE_CODEWSCOPE:
        *len = v->value.v_codewscope.code_len;
        return v->value.v_codewscope.code;
    default:
        *len = 0;
        return NULL;
    }
}

#endif
