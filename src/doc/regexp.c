/* regexp: MongoDB regular expressions compiled with PCRE2 in UTF mode, shared
 * by the matcher, $jsonSchema and the regex expressions so that all three
 * read the option letters and report a bad pattern the same way. */
#include "doc/regexp.h"

#include <string.h>

bool regexp_options(const char *flags, bool accept_u, uint32_t *opts, char *bad)
{
    *opts = PCRE2_UTF;
    for (const char *f = flags; *f; f++) {
        switch (*f) {
        case 'i':
            *opts |= PCRE2_CASELESS;
            break;
        case 'm':
            *opts |= PCRE2_MULTILINE;
            break;
        case 's':
            *opts |= PCRE2_DOTALL;
            break;
        case 'x':
            *opts |= PCRE2_EXTENDED;
            break;
        case 'u':
            if (accept_u)
                break;
            /* fallthrough */
        default:
            *bad = *f;
            return false;
        }
    }
    return true;
}

pcre2_code *regexp_compile(const char *pattern, size_t len, uint32_t opts, char *msg,
                           size_t msg_size)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &code, &off, NULL);
    if (!re)
        pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, msg_size);
    return re;
}

pcre2_code *regexp_compile_query(const char *pattern, size_t len, const char *flags, dberr_t *err)
{
    uint32_t opts;
    char bad, msg[256];
    if (strlen(pattern) != len) {
        dberr_set(err, 51109, "Regular expression cannot contain an embedded null byte");
        return NULL;
    }
    if (!regexp_options(flags, true, &opts, &bad)) {
        dberr_set(err, 51108, "invalid flag in regex options: %c", bad);
        return NULL;
    }
    pcre2_code *re = regexp_compile(pattern, len, opts, msg, sizeof msg);
    if (!re)
        dberr_set(err, 51091, "Regular expression is invalid: %s", msg);
    return re;
}
