/* shellfmt: mongod-style rendering of BSON values for error messages, the
 * one renderer every message uses (mongod's BSONElement::toString). */
#include "util/shellfmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define SHELLFMT_MAX_DEPTH 20

static void shellfmt_append(bson_string_t *s, const bson_value_t *v, int depth);

static void shellfmt_container(bson_string_t *s, const uint8_t *data, uint32_t len, bool array,
                               int depth)
{
    bson_t doc;
    bson_iter_t it;
    if (depth > SHELLFMT_MAX_DEPTH || !bson_init_static(&doc, data, len) ||
        !bson_iter_init(&it, &doc)) {
        bson_string_append(s, array ? "[...]" : "{...}");
        return;
    }
    bool first = true;
    bson_string_append_c(s, array ? '[' : '{');
    while (bson_iter_next(&it)) {
        bson_string_append(s, first ? " " : ", ");
        first = false;
        if (!array) {
            bson_string_append(s, bson_iter_key(&it));
            bson_string_append(s, ": ");
        }
        shellfmt_append(s, bson_iter_value(&it), depth + 1);
    }
    bson_string_append(s, first ? (array ? "]" : "}") : (array ? " ]" : " }"));
}

/* StringBuilder::appendDoubleNice: "%.16g", then ".0" unless the text
 * already shows a '.', an 'E' or an 'N'. */
static void shellfmt_double(bson_string_t *s, double d)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.16g", d);
    bson_string_append(s, buf);
    if (!strchr(buf, '.') && !strchr(buf, 'E') && !strchr(buf, 'N'))
        bson_string_append(s, ".0");
}

/* The text of a value that is all type: null, undefined, MinKey and MaxKey
 * as mongod prints them, else mongod's type alias. */
static const char *shellfmt_word(bson_type_t t)
{
    static const struct {
        bson_type_t type;
        const char *word;
    } words[] = {
        {BSON_TYPE_NULL, "null"},
        {BSON_TYPE_UNDEFINED, "undefined"},
        {BSON_TYPE_MINKEY, "MinKey"},
        {BSON_TYPE_MAXKEY, "MaxKey"},
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (words[i].type == t)
            return words[i].word;
    return shellfmt_type_name(t);
}

static void shellfmt_append(bson_string_t *s, const bson_value_t *v, int depth)
{
    char buf[BSON_DECIMAL128_STRING + 32];
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        bson_string_append_printf(s, "%" PRId32, v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        bson_string_append_printf(s, "%" PRId64, v->value.v_int64);
        break;
    case BSON_TYPE_DOUBLE:
        shellfmt_double(s, v->value.v_double);
        break;
    case BSON_TYPE_DECIMAL128:
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        bson_string_append(s, buf);
        break;
    case BSON_TYPE_UTF8:
        bson_string_append_printf(s, "\"%.*s\"", (int)v->value.v_utf8.len, v->value.v_utf8.str);
        break;
    case BSON_TYPE_BOOL:
        bson_string_append(s, v->value.v_bool ? "true" : "false");
        break;
    case BSON_TYPE_OID:
        bson_oid_to_string(&v->value.v_oid, buf);
        bson_string_append_printf(s, "ObjectId('%s')", buf);
        break;
    case BSON_TYPE_DATE_TIME:
        bson_string_append_printf(s, "new Date(%" PRId64 ")", v->value.v_datetime);
        break;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        shellfmt_container(s, v->value.v_doc.data, v->value.v_doc.data_len,
                           v->value_type == BSON_TYPE_ARRAY, depth);
        break;
    case BSON_TYPE_TIMESTAMP:
        bson_string_append_printf(s, "Timestamp(%" PRIu32 ", %" PRIu32 ")",
                                  v->value.v_timestamp.timestamp, v->value.v_timestamp.increment);
        break;
    case BSON_TYPE_REGEX:
        bson_string_append_printf(s, "/%s/%s", v->value.v_regex.regex,
                                  v->value.v_regex.options ? v->value.v_regex.options : "");
        break;
    case BSON_TYPE_BINARY:
        bson_string_append_printf(s, "BinData(%d, ...)", (int)v->value.v_binary.subtype);
        break;
    case BSON_TYPE_CODE:
        bson_string_append(s, v->value.v_code.code);
        break;
    case BSON_TYPE_SYMBOL:
        bson_string_append(s, v->value.v_symbol.symbol);
        break;
    default:
        bson_string_append(s, shellfmt_word(v->value_type));
        break;
    }
}

void shellfmt_append_value(bson_string_t *s, const bson_value_t *v)
{
    shellfmt_append(s, v, 0);
}

void shellfmt_append_element(bson_string_t *s, const char *name, const bson_value_t *v)
{
    bson_string_append(s, name);
    bson_string_append(s, ": ");
    shellfmt_append(s, v, 0);
}

void shellfmt_append_doc(bson_string_t *s, const bson_t *doc)
{
    shellfmt_container(s, bson_get_data(doc), doc->len, false, 0);
}

char *shellfmt_value(const bson_value_t *v)
{
    bson_string_t *s = bson_string_new(NULL);
    shellfmt_append(s, v, 0);
    return bson_string_free(s, false);
}

char *shellfmt_doc(const bson_t *doc)
{
    bson_string_t *s = bson_string_new(NULL);
    shellfmt_append_doc(s, doc);
    return bson_string_free(s, false);
}

/* mongod's type aliases, by BSON type number (MinKey and MaxKey apart). */
static const char *const shellfmt_type_names[] = {
    "missing",   "double",     "string", "object", "array",      "binData",
    "undefined", "objectId",   "bool",   "date",   "null",       "regex",
    "dbPointer", "javascript", "symbol", "javascriptWithScope", "int", "timestamp",
    "long",      "decimal",
};

const char *shellfmt_type_name(bson_type_t t)
{
    if ((size_t)t < sizeof shellfmt_type_names / sizeof shellfmt_type_names[0])
        return shellfmt_type_names[t];
    return t == BSON_TYPE_MINKEY ? "minKey" : t == BSON_TYPE_MAXKEY ? "maxKey" : "unknown";
}

bool shellfmt_type_from_name(const char *name, bson_type_t *out)
{
    for (size_t t = 1; t < sizeof shellfmt_type_names / sizeof shellfmt_type_names[0]; t++)
        if (!strcmp(shellfmt_type_names[t], name)) {
            *out = (bson_type_t)t;
            return true;
        }
    if (strcmp(name, "minKey") && strcmp(name, "maxKey"))
        return false;
    *out = name[1] == 'i' ? BSON_TYPE_MINKEY : BSON_TYPE_MAXKEY;
    return true;
}
