/* fts: the text search language table, mongod's Unicode tokenizer (ICU for
 * delimiters, case folding and diacritics; Snowball's libstemmer for stems;
 * Snowball's stop word lists from Debian's liblingua-stopwords-perl), and
 * the per-document term scores of textIndexVersion 3. */
#include "doc/fts.h"

#include <libstemmer.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf8.h>

#include "util/bsonview.h"
#include "util/buf.h"
#include "util/hash.h"
#include "util/log.h"

/* Where Debian's liblingua-stopwords-perl keeps Snowball's stop word lists
 * (the lists mongod's stop_words_*.txt hold). */
#ifndef FTS_STOPWORDS_DIR
#define FTS_STOPWORDS_DIR "/usr/share/perl5/Lingua/StopWords"
#endif

struct fts_lang {
    const char *name;     /* mongod's name */
    const char *code;     /* ISO 639-1 code mongod accepts too */
    const char *stemmer;  /* libstemmer algorithm, NULL: none */
    const char *stoplist; /* Lingua::StopWords module, NULL: none */
};

/* mongod 7's languages for textIndexVersion 3 (fts_language.cpp). Turkish
 * has no stop word list in Debian: it stems but drops no stop words. */
static const struct fts_lang fts_langs[] = {
    {"none", "none", NULL, NULL},
    {"danish", "da", "danish", "DA"},
    {"dutch", "nl", "dutch", "NL"},
    {"english", "en", "english", "EN"},
    {"finnish", "fi", "finnish", "FI"},
    {"french", "fr", "french", "FR"},
    {"german", "de", "german", "DE"},
    {"hungarian", "hu", "hungarian", "HU"},
    {"italian", "it", "italian", "IT"},
    {"norwegian", "nb", "norwegian", "NO"},
    {"portuguese", "pt", "portuguese", "PT"},
    {"romanian", "ro", "romanian", "RO"},
    {"russian", "ru", "russian", "RU"},
    {"spanish", "es", "spanish", "ES"},
    {"swedish", "sv", "swedish", "SV"},
    {"turkish", "tr", "turkish", NULL},
};
#define FTS_NLANGS (sizeof fts_langs / sizeof fts_langs[0])

const fts_lang_t *fts_lang_find(const char *name)
{
    for (size_t i = 0; i < FTS_NLANGS; i++)
        if (!strcasecmp(name, fts_langs[i].name) || !strcasecmp(name, fts_langs[i].code))
            return &fts_langs[i];
    return NULL;
}

const char *fts_lang_name(const fts_lang_t *l)
{
    return l->name;
}

static size_t fts_lang_index(const fts_lang_t *l)
{
    return (size_t)(l - fts_langs);
}

/* -- stop words: loaded once, read-only afterwards -- */

typedef struct fts_stoplist {
    char **words; /* sorted */
    size_t n;
} fts_stoplist_t;

static fts_stoplist_t fts_stoplists[FTS_NLANGS];
static pthread_once_t fts_stop_once = PTHREAD_ONCE_INIT;

static int fts_str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the words of `qw( ... )` in the module's _stopwords sub. */
static void fts_stoplist_load(fts_stoplist_t *sl, const char *module)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.pm", FTS_STOPWORDS_DIR, module);
    FILE *f = fopen(path, "rb");
    if (!f) {
        log_warn("INDEX", "text search: cannot read the stop words %s (install "
                 "liblingua-stopwords-perl); no stop words for that language",
                 path);
        return;
    }
    buf_t text;
    buf_init(&text);
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_append(&text, chunk, got);
    fclose(f);
    buf_append(&text, "", 1);
    const char *s = strstr((const char *)text.data, "sub _stopwords");
    s = s ? strstr(s, "qw(") : NULL;
    size_t cap = 0;
    if (s) {
        s += 3;
        while (*s && *s != ')') {
            while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
                s++;
            size_t n = strcspn(s, " \n\t\r)");
            if (n == 0)
                break;
            if (sl->n == cap) {
                cap = cap ? cap * 2 : 256;
                sl->words = bson_realloc(sl->words, cap * sizeof *sl->words);
            }
            sl->words[sl->n++] = bson_strndup(s, n);
            s += n;
        }
    }
    buf_destroy(&text);
    if (sl->n)
        qsort(sl->words, sl->n, sizeof *sl->words, fts_str_cmp);
}

static void fts_stoplists_load(void)
{
    for (size_t i = 0; i < FTS_NLANGS; i++)
        if (fts_langs[i].stoplist)
            fts_stoplist_load(&fts_stoplists[i], fts_langs[i].stoplist);
}

static bool fts_is_stop_word(const fts_lang_t *l, const char *w)
{
    pthread_once(&fts_stop_once, fts_stoplists_load);
    const fts_stoplist_t *sl = &fts_stoplists[fts_lang_index(l)];
    return sl->n && bsearch(&w, sl->words, sl->n, sizeof *sl->words, fts_str_cmp) != NULL;
}

/* -- stemmers: one per language and thread (libstemmer's are not shared) -- */

static __thread struct sb_stemmer *fts_stemmers[FTS_NLANGS];

/* Stems `w` (NUL-terminated in `b`) in place in `b`. */
static void fts_stem(const fts_lang_t *l, buf_t *b)
{
    if (!l->stemmer)
        return;
    size_t i = fts_lang_index(l);
    if (!fts_stemmers[i])
        fts_stemmers[i] = sb_stemmer_new(l->stemmer, "UTF_8");
    if (!fts_stemmers[i])
        return;
    const sb_symbol *out = sb_stemmer_stem(fts_stemmers[i], (const sb_symbol *)b->data,
                                           (int)(b->len - 1));
    if (!out)
        return;
    int n = sb_stemmer_length(fts_stemmers[i]);
    buf_t tmp;
    buf_init(&tmp);
    buf_append(&tmp, out, (size_t)n);
    b->len = 0;
    buf_append(b, tmp.data, tmp.len);
    buf_append(b, "", 1);
    buf_destroy(&tmp);
}

/* -- code points -- */

/* The next code point of s[*i..len); invalid bytes stand for themselves. */
static UChar32 fts_next(const char *s, size_t len, size_t *i)
{
    UChar32 c;
    int32_t pos = (int32_t)*i;
    U8_NEXT((const uint8_t *)s, pos, (int32_t)len, c);
    if (c < 0)
        c = (uint8_t)s[*i];
    *i = (size_t)pos;
    return c;
}

static void fts_put(buf_t *b, UChar32 c)
{
    uint8_t u[4];
    int32_t n = 0;
    UBool err = false;
    U8_APPEND((uint8_t *)u, n, 4, c, err);
    if (!err)
        buf_append(b, u, (size_t)n);
}

/* mongod's delimiters (unicode/gen_delimiter_list.py): code points with one
 * of these Unicode properties; in English the apostrophe is part of words. */
static bool fts_is_delimiter(UChar32 c, bool english)
{
    if (c == '\'' && english)
        return false;
    if (c < 0x80) /* fast path, same answer as the properties */
        return !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 c == '_' || (c < 0x20 && !(c >= 9 && c <= 13)) || c == 0x7f);
    return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE) || u_hasBinaryProperty(c, UCHAR_DASH) ||
           u_hasBinaryProperty(c, UCHAR_HYPHEN) || u_hasBinaryProperty(c, UCHAR_QUOTATION_MARK) ||
           u_hasBinaryProperty(c, UCHAR_TERMINAL_PUNCTUATION) ||
           u_hasBinaryProperty(c, UCHAR_PATTERN_SYNTAX) || u_hasBinaryProperty(c, UCHAR_S_TERM);
}

static UChar32 fts_fold(UChar32 c, bool turkish)
{
    if (c < 0x80 && !(turkish && c == 'I'))
        return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (turkish && c == 'I')
        return 0x131; /* dotless i */
    return u_foldCase(c, turkish ? U_FOLD_CASE_EXCLUDE_SPECIAL_I : U_FOLD_CASE_DEFAULT);
}

/* Appends `c` without its diacritics: the canonical decomposition's
 * code points that are not combining marks. */
static void fts_put_stripped(buf_t *b, UChar32 c)
{
    if (c < 0x80) {
        char ch = (char)c;
        buf_append(b, &ch, 1);
        return;
    }
    UErrorCode ec = U_ZERO_ERROR;
    const UNormalizer2 *nfd = unorm2_getNFDInstance(&ec);
    UChar d[16];
    int32_t n = U_SUCCESS(ec) ? unorm2_getDecomposition(nfd, c, d, 16, &ec) : -1;
    if (n <= 0 || U_FAILURE(ec)) {
        int8_t type = u_charType(c);
        if (type != U_NON_SPACING_MARK)
            fts_put(b, c);
        return;
    }
    for (int32_t i = 0; i < n;) {
        UChar32 x;
        U16_NEXT(d, i, n, x);
        if (u_charType(x) != U_NON_SPACING_MARK)
            fts_put(b, x);
    }
}

/* Folds s[0..len) into `out` (NUL-terminated): case unless keep_case,
 * diacritics unless keep_diacritics. */
static void fts_fold_string(const char *s, size_t len, bool keep_case, bool keep_diacritics,
                            bool turkish, buf_t *out)
{
    out->len = 0;
    for (size_t i = 0; i < len;) {
        UChar32 c = fts_next(s, len, &i);
        if (!keep_case)
            c = fts_fold(c, turkish);
        if (keep_diacritics)
            fts_put(out, c);
        else
            fts_put_stripped(out, c);
    }
    buf_append(out, "", 1);
}

void fts_tokenize(const fts_lang_t *lang, const char *text, size_t len, int opts, fts_term_fn fn,
                  void *ctx)
{
    bool english = !strcmp(lang->name, "english");
    bool turkish = !strcmp(lang->name, "turkish");
    buf_t word, out;
    buf_init(&word);
    buf_init(&out);
    size_t i = 0;
    while (i < len) {
        size_t start = i, end;
        UChar32 c = fts_next(text, len, &i);
        if (fts_is_delimiter(c, english))
            continue;
        for (end = i; end < len;) {
            size_t at = end;
            c = fts_next(text, len, &at);
            if (fts_is_delimiter(c, english))
                break;
            end = at;
        }
        i = end;
        /* stop words are lower case with their diacritics */
        fts_fold_string(text + start, end - start, false, true, turkish, &word);
        if ((opts & FTS_TOK_STOPWORDS) && fts_is_stop_word(lang, (const char *)word.data))
            continue;
        if (opts & FTS_TOK_CASE) {
            word.len = 0;
            buf_append(&word, text + start, end - start);
            buf_append(&word, "", 1);
        }
        fts_stem(lang, &word); /* the stemmer expects the diacritics */
        const char *term = (const char *)word.data;
        size_t tlen = word.len - 1;
        if (!(opts & FTS_TOK_DIACRITIC)) {
            fts_fold_string(term, tlen, true, false, turkish, &out);
            term = (const char *)out.data;
            tlen = out.len - 1;
        }
        if (!fn(term, tlen, ctx))
            break;
    }
    buf_destroy(&word);
    buf_destroy(&out);
}

/* -- specs -- */

#define FTS_MAX_WORD_WEIGHT (1000000000.0 / 10000)

void fts_spec_destroy(fts_spec_t *spec)
{
    if (!spec)
        return;
    bson_free(spec->language_override);
    for (int i = 0; i < spec->nfields; i++)
        bson_free(spec->fields[i].path);
    bson_free(spec->fields);
    memset(spec, 0, sizeof *spec);
}

/* Adds or replaces the weight of `path`. */
static void fts_spec_weight(fts_spec_t *spec, const char *path, double w)
{
    if (!strcmp(path, "$**")) {
        spec->wildcard = true;
        return;
    }
    for (int i = 0; i < spec->nfields; i++)
        if (!strcmp(spec->fields[i].path, path)) {
            spec->fields[i].weight = w;
            return;
        }
    spec->fields = bson_realloc(spec->fields, (size_t)(spec->nfields + 1) * sizeof *spec->fields);
    spec->fields[spec->nfields].path = bson_strdup(path);
    spec->fields[spec->nfields++].weight = w;
}

static bool fts_weight_path_ok(const char *p, dberr_t *err)
{
    if (!strcmp(p, "$**"))
        return true;
    if (!*p)
        return dberr_set(err, 17294, "weight cannot be on an empty field");
    for (const char *s = p;;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (n == 0)
            return dberr_set(err, 17291, "weight cannot have empty path component");
        if (s[0] == '$')
            return dberr_set(err, 17292, "weight cannot have path component with $ prefix");
        if (!dot)
            return true;
        s = dot + 1;
    }
}

static int fts_weight_cmp(const void *a, const void *b)
{
    return strcmp(((const fts_weight_t *)a)->path, ((const fts_weight_t *)b)->path);
}

bool fts_spec_init(fts_spec_t *spec, const bson_t *index_spec, bson_t *resolved, dberr_t *err)
{
    memset(spec, 0, sizeof *spec);
    bson_iter_t it, k;
    if (bson_iter_init_find(&it, index_spec, "key") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &k))
        while (bson_iter_next(&k))
            if (BSON_ITER_HOLDS_UTF8(&k) && !strcmp(bson_iter_utf8(&k, NULL), "text") &&
                strcmp(bson_iter_key(&k), "_fts"))
                fts_spec_weight(spec, bson_iter_key(&k), 1);
    if (bson_iter_init_find(&it, index_spec, "weights")) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &k)) {
            while (bson_iter_next(&k)) {
                if (!BSON_ITER_HOLDS_NUMBER(&k)) {
                    dberr_set(err, 17283, "weight for text index needs numeric type");
                    goto fail;
                }
                /* mongod keeps the integer part (numberInt) */
                double w = (double)bson_iter_as_int64(&k);
                if (!(w > 0 && w < FTS_MAX_WORD_WEIGHT)) {
                    dberr_set(err, 16674, "score for word too high");
                    goto fail;
                }
                if (!fts_weight_path_ok(bson_iter_key(&k), err))
                    goto fail;
                fts_spec_weight(spec, bson_iter_key(&k), w);
            }
        } else if (BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "$**")) {
            spec->wildcard = true;
        } else {
            dberr_set(err, 17284, "text index option 'weights' must be an object");
            goto fail;
        }
    }
    const char *lang = "english";
    if (bson_iter_init_find(&it, index_spec, "default_language")) {
        if (!BSON_ITER_HOLDS_UTF8(&it)) {
            dberr_set(err, 17263, "default_language needs a string type");
            goto fail;
        }
        lang = bson_iter_utf8(&it, NULL);
    }
    spec->language = fts_lang_find(lang);
    if (!spec->language) {
        dberr_set(err, 17264, "default_language is not valid");
        goto fail;
    }
    const char *ovr = "language";
    if (bson_iter_init_find(&it, index_spec, "language_override")) {
        ovr = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
        if (!BSON_ITER_HOLDS_UTF8(&it) || !*ovr || ovr[0] == '$' || strchr(ovr, '.')) {
            dberr_set(err, 17136, "language_override is not valid");
            goto fail;
        }
    }
    spec->language_override = bson_strdup(ovr);
    if (bson_iter_init_find(&it, index_spec, "textIndexVersion")) {
        if (!BSON_ITER_HOLDS_NUMBER(&it)) {
            dberr_set(err, 17293, "text index option 'textIndexVersion' must be a number");
            goto fail;
        }
        if (bson_iter_as_int64(&it) != 3) {
            dberr_set(err, DBERR_CANNOT_CREATE_INDEX,
                      "atomdb supports textIndexVersion 3 only (mongod 7's), not %lld",
                      (long long)bson_iter_as_int64(&it));
            goto fail;
        }
    }
    if (!spec->wildcard && spec->nfields == 0) {
        dberr_set(err, DBERR_CANNOT_CREATE_INDEX, "text index needs at least one text field");
        goto fail;
    }
    /* the resolved spec lists weights by field name, as mongod's map does */
    bson_t w;
    bson_append_document_begin(resolved, "weights", -1, &w);
    fts_weight_t *sorted = bson_malloc((size_t)(spec->nfields + 1) * sizeof *sorted);
    int ns = 0;
    for (int i = 0; i < spec->nfields; i++)
        sorted[ns++] = spec->fields[i];
    if (spec->wildcard)
        sorted[ns++] = (fts_weight_t){"$**", 1};
    qsort(sorted, (size_t)ns, sizeof *sorted, fts_weight_cmp);
    for (int i = 0; i < ns; i++)
        BSON_APPEND_INT32(&w, sorted[i].path, (int32_t)sorted[i].weight);
    bson_free(sorted);
    bson_append_document_end(resolved, &w);
    BSON_APPEND_UTF8(resolved, "default_language", spec->language->name);
    BSON_APPEND_UTF8(resolved, "language_override", spec->language_override);
    BSON_APPEND_INT32(resolved, "textIndexVersion", 3);
    return true;
fail:
    fts_spec_destroy(spec);
    return false;
}

void fts_spec_copy(const fts_spec_t *from, fts_spec_t *to)
{
    memset(to, 0, sizeof *to);
    for (int i = 0; i < from->nfields; i++)
        fts_spec_weight(to, from->fields[i].path, from->fields[i].weight);
    to->wildcard = from->wildcard;
    to->language = from->language;
    to->language_override = bson_strdup(from->language_override);
}

/* -- the strings a spec indexes (mongod's FTSElementIterator) -- */

typedef bool (*fts_string_fn)(const fts_lang_t *lang, const char *s, size_t len, double weight,
                              void *ctx);

/* mongod's lookup: the first weight (by name, "$**" among them when the
 * index is a wildcard) at or after `name`; NULL when none. */
static const char *fts_spec_lower_bound(const fts_spec_t *spec, const char *name, double *w)
{
    const char *best = NULL;
    if (spec->wildcard && strcmp("$**", name) >= 0) {
        best = "$**";
        *w = 1;
    }
    for (int i = 0; i < spec->nfields; i++)
        if (strcmp(spec->fields[i].path, name) >= 0 &&
            (!best || strcmp(spec->fields[i].path, best) < 0)) {
            best = spec->fields[i].path;
            *w = spec->fields[i].weight;
        }
    return best;
}

/* `weight` equals `dotted` or starts with `dotted` + ".". */
static bool fts_match_prefix(const char *dotted, const char *weight)
{
    size_t n = strlen(dotted);
    return !strncmp(weight, dotted, n) && (weight[n] == '\0' || weight[n] == '.');
}

/* Walks the fields of `obj` (a document, or an array when is_array) as
 * mongod's iterator frames do: strings on an exact weight (or anywhere
 * under a wildcard), documents below a weight's prefix, arrays not inside
 * arrays (but under a wildcard), the language override per document. */
static bool fts_walk_obj(const fts_spec_t *spec, const bson_t *obj, const char *parent,
                         bool is_array, const fts_lang_t *lang, int depth, fts_string_fn fn,
                         void *ctx, dberr_t *err)
{
    bson_iter_t it;
    if (depth > 100 || !bson_iter_init(&it, obj))
        return true;
    if (bson_iter_find(&it, spec->language_override)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return dberr_set(err, 17261,
                             "found language override field in document with non-string type");
        const char *name = bson_iter_utf8(&it, NULL);
        lang = fts_lang_find(name);
        if (!lang)
            return dberr_set(err, 17262, "language override unsupported: %s", name);
    }
    bson_iter_init(&it, obj);
    buf_t dotted, look;
    buf_init(&dotted);
    buf_init(&look);
    bool ok = true;
    while (ok && bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (spec->wildcard && !strcmp(key, spec->language_override))
            continue;
        dotted.len = 0;
        if (!*parent)
            buf_append(&dotted, key, strlen(key));
        else if (is_array)
            buf_append(&dotted, parent, strlen(parent));
        else {
            buf_append(&dotted, parent, strlen(parent));
            buf_append(&dotted, ".", 1);
            buf_append(&dotted, key, strlen(key));
        }
        buf_append(&dotted, "", 1);
        const char *d = (const char *)dotted.data;
        bool is_doc = BSON_ITER_HOLDS_DOCUMENT(&it);
        look.len = 0;
        buf_append(&look, d, dotted.len - 1);
        buf_append(&look, is_doc ? "." : "", is_doc ? 2 : 1);
        double w = 1;
        const char *found = fts_spec_lower_bound(spec, (const char *)look.data, &w);
        if (!spec->wildcard && (!found || !fts_match_prefix(d, found)))
            continue;
        bool exact = found && !strcmp(found, d);
        if (!found)
            w = 1;
        if (BSON_ITER_HOLDS_UTF8(&it)) {
            if (exact || spec->wildcard) {
                uint32_t len;
                const char *str = bson_iter_utf8(&it, &len);
                ok = fn(lang, str, len, w, ctx);
            }
        } else if (is_doc || BSON_ITER_HOLDS_ARRAY(&it)) {
            bool arr = !is_doc;
            if ((is_doc && (!exact || spec->wildcard)) || (arr && (!is_array || spec->wildcard))) {
                bson_t sub;
                if (bsonview_iter(&it, &sub))
                    ok = fts_walk_obj(spec, &sub, d, arr, lang, depth + 1, fn, ctx, err);
            }
        }
    }
    buf_destroy(&dotted);
    buf_destroy(&look);
    return ok;
}

static bool fts_walk_doc(const fts_spec_t *spec, const bson_t *doc, const char *prefix,
                         const fts_lang_t *lang, int depth, fts_string_fn fn, void *ctx,
                         dberr_t *err)
{
    return fts_walk_obj(spec, doc, prefix, false, lang, depth, fn, ctx, err);
}

/* -- scoring (mongod's FTSSpec::_scoreStringV2) -- */

typedef struct fts_count {
    char *term;
    double count, freq, exp;
    UT_hash_handle hh;
} fts_count_t;

typedef struct fts_score_ctx {
    fts_count_t *terms;   /* this string's */
    unsigned ntokens;
    fts_count_t *doc;     /* the document's: score in `freq` */
} fts_score_ctx_t;

static fts_count_t *fts_count_get(fts_count_t **set, const char *term, size_t len)
{
    fts_count_t *e;
    HASH_FIND(hh, *set, term, len, e);
    if (!e) {
        e = bson_malloc0(sizeof *e);
        e->term = bson_strndup(term, len);
        HASH_ADD_KEYPTR(hh, *set, e->term, len, e);
    }
    return e;
}

static void fts_count_clear(fts_count_t **set)
{
    fts_count_t *e, *tmp;
    HASH_ITER(hh, *set, e, tmp)
    {
        HASH_DEL(*set, e);
        bson_free(e->term);
        bson_free(e);
    }
}

static bool fts_score_term(const char *term, size_t len, void *p)
{
    fts_score_ctx_t *sc = p;
    fts_count_t *e = fts_count_get(&sc->terms, term, len);
    e->exp = e->exp ? e->exp * 2 : 1;
    e->count += 1;
    e->freq += 1 / e->exp;
    sc->ntokens++;
    return true;
}

static bool fts_score_string(const fts_lang_t *lang, const char *s, size_t len, double weight,
                             void *p)
{
    fts_score_ctx_t *sc = p;
    sc->terms = NULL;
    sc->ntokens = 0;
    fts_tokenize(lang, s, len, FTS_TOK_STOPWORDS, fts_score_term, sc);
    fts_count_t *e, *tmp;
    HASH_ITER(hh, sc->terms, e, tmp)
    {
        double coeff = (0.5 * e->count / sc->ntokens) + 0.5;
        size_t tl = strlen(e->term);
        double adjustment = 1;
        if (len == tl && !strncasecmp(s, e->term, len))
            adjustment += 0.1;
        fts_count_get(&sc->doc, e->term, tl)->freq += weight * e->freq * coeff * adjustment;
    }
    fts_count_clear(&sc->terms);
    return true;
}

bool fts_spec_terms(const fts_spec_t *spec, const bson_t *doc, fts_term_score_t **out, size_t *n,
                    dberr_t *err)
{
    fts_score_ctx_t sc = {0};
    *out = NULL;
    *n = 0;
    if (!fts_walk_doc(spec, doc, "", spec->language, 0, fts_score_string, &sc, err)) {
        fts_count_clear(&sc.terms);
        fts_count_clear(&sc.doc);
        return false;
    }
    size_t cnt = HASH_COUNT(sc.doc), i = 0;
    *out = bson_malloc0((cnt ? cnt : 1) * sizeof **out);
    fts_count_t *e, *tmp;
    HASH_ITER(hh, sc.doc, e, tmp)
    {
        (*out)[i].term = e->term;
        (*out)[i++].score = e->freq;
        e->term = NULL;
        HASH_DEL(sc.doc, e);
        bson_free(e);
    }
    *n = cnt;
    return true;
}

void fts_terms_free(fts_term_score_t *terms, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bson_free(terms[i].term);
    bson_free(terms);
}

/* -- queries -- */

typedef struct fts_strset {
    char **items;
    size_t n;
} fts_strset_t;

/* Scores already computed for this query, by document content: sorting by
 * textScore asks for each document's score many times. Entries keep a copy
 * of the document so a hit is always the same content; at most
 * FTS_MEMO_BYTES of them. Cleared when the query is bound again. */
#define FTS_MEMO_BYTES (32 * 1024 * 1024)

typedef struct fts_memo_entry {
    uint64_t hash;
    uint8_t *doc;
    uint32_t len;
    double score;
    UT_hash_handle hh;
} fts_memo_entry_t;

typedef struct fts_memo {
    fts_memo_entry_t *map;
    size_t bytes;
} fts_memo_t;

static void fts_memo_clear(fts_memo_t *m)
{
    fts_memo_entry_t *e, *tmp;
    HASH_ITER(hh, m->map, e, tmp)
    {
        HASH_DEL(m->map, e);
        bson_free(e->doc);
        bson_free(e);
    }
    m->bytes = 0;
}

static uint64_t fts_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

struct fts_query {
    fts_memo_t *memo;          /* owned; written through const queries */
    char *search;
    char *language;            /* $language as given, or NULL */
    bool case_sensitive, diacritic_sensitive;
    fts_spec_t bound;          /* a copy of the bound index's spec */
    const fts_spec_t *spec;    /* &bound once bound, else NULL */
    const fts_lang_t *lang;    /* resolved */
    fts_strset_t terms, negated, bounds; /* matcher terms; index terms */
    fts_strset_t phrases, negated_phrases;
};

static void fts_strset_add(fts_strset_t *s, const char *v, size_t len)
{
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->items[i]) == len && !memcmp(s->items[i], v, len))
            return;
    s->items = bson_realloc(s->items, (s->n + 1) * sizeof *s->items);
    s->items[s->n++] = bson_strndup(v, len);
}

static bool fts_strset_has(const fts_strset_t *s, const char *v, size_t len)
{
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->items[i]) == len && !memcmp(s->items[i], v, len))
            return true;
    return false;
}

static void fts_strset_clear(fts_strset_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        bson_free(s->items[i]);
    bson_free(s->items);
    s->items = NULL;
    s->n = 0;
}

/* Empties the query's term and phrase sets. */
static void fts_query_clear_terms(fts_query_t *q)
{
    fts_strset_clear(&q->terms);
    fts_strset_clear(&q->negated);
    fts_strset_clear(&q->bounds);
    fts_strset_clear(&q->phrases);
    fts_strset_clear(&q->negated_phrases);
}

void fts_query_destroy(fts_query_t *q)
{
    if (!q)
        return;
    fts_query_clear_terms(q);
    fts_spec_destroy(&q->bound);
    fts_memo_clear(q->memo);
    bson_free(q->memo);
    bson_free(q->search);
    bson_free(q->language);
    bson_free(q);
}

/* The fields of $text's argument: the type each must hold, and the string
 * (char *) or bool of fts_query_t it sets. */
static const struct {
    const char *name;
    bson_type_t type;
    size_t offset;
} fts_query_fields[] = {
    {"$search", BSON_TYPE_UTF8, offsetof(fts_query_t, search)},
    {"$language", BSON_TYPE_UTF8, offsetof(fts_query_t, language)},
    {"$caseSensitive", BSON_TYPE_BOOL, offsetof(fts_query_t, case_sensitive)},
    {"$diacriticSensitive", BSON_TYPE_BOOL, offsetof(fts_query_t, diacritic_sensitive)},
};

/* Sets the field of `q` that `it` names; false with `err` set for a wrong
 * type or a name $text does not have. */
static bool fts_query_set_field(fts_query_t *q, const bson_iter_t *it, dberr_t *err)
{
    const char *k = bson_iter_key(it);
    for (size_t i = 0; i < sizeof fts_query_fields / sizeof fts_query_fields[0]; i++) {
        if (strcmp(k, fts_query_fields[i].name) != 0)
            continue;
        char *field = (char *)q + fts_query_fields[i].offset;
        if (bson_iter_type(it) != fts_query_fields[i].type)
            return dberr_set(err, DBERR_TYPE_MISMATCH, "%s requires a %s value", k,
                             fts_query_fields[i].type == BSON_TYPE_UTF8 ? "string" : "boolean");
        if (fts_query_fields[i].type == BSON_TYPE_BOOL) {
            *(bool *)field = bson_iter_bool(it);
        } else {
            bson_free(*(char **)field);
            *(char **)field = bson_strdup(bson_iter_utf8(it, NULL));
        }
        return true;
    }
    return dberr_set(err, DBERR_BAD_VALUE, "extra fields in $text");
}

fts_query_t *fts_query_new(const bson_value_t *arg, dberr_t *err)
{
    bson_iter_t it;
    if (arg->value_type != BSON_TYPE_DOCUMENT ||
        !bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len)) {
        dberr_set(err, DBERR_BAD_VALUE, "$text expects an object");
        return NULL;
    }
    fts_query_t *q = bson_malloc0(sizeof *q);
    q->memo = bson_malloc0(sizeof *q->memo);
    while (bson_iter_next(&it)) {
        if (!fts_query_set_field(q, &it, err))
            goto fail;
    }
    if (!q->search) {
        dberr_set(err, DBERR_TYPE_MISMATCH, "$search requires a string value");
        goto fail;
    }
    if (q->language && !fts_lang_find(q->language)) {
        dberr_set(err, DBERR_BAD_VALUE, "unsupported language: \"%s\" for text index version 3",
                  q->language);
        goto fail;
    }
    return q;
fail:
    fts_query_destroy(q);
    return NULL;
}

static bool fts_add_to(const char *term, size_t len, void *set)
{
    fts_strset_add(set, term, len);
    return true;
}

/* mongod's _addTerms: index terms from the folded tokens; matcher terms
 * folded as the query's sensitivity says. */
static void fts_query_add_terms(fts_query_t *q, const char *sentence, size_t len, bool negated)
{
    fts_strset_t *active = negated ? &q->negated : &q->terms;
    if (!negated)
        fts_tokenize(q->lang, sentence, len, FTS_TOK_STOPWORDS, fts_add_to, &q->bounds);
    int opts = FTS_TOK_STOPWORDS | (q->case_sensitive ? FTS_TOK_CASE : 0) |
               (q->diacritic_sensitive ? FTS_TOK_DIACRITIC : 0);
    fts_tokenize(q->lang, sentence, len, opts, fts_add_to, active);
}

bool fts_query_bind(fts_query_t *q, const fts_spec_t *spec, dberr_t *err)
{
    (void)err;
    fts_memo_clear(q->memo);
    fts_spec_destroy(&q->bound);
    fts_spec_copy(spec, &q->bound);
    q->spec = &q->bound;
    q->lang = q->language ? fts_lang_find(q->language) : spec->language;
    fts_query_clear_terms(q);
    /* mongod's FTSQueryParser: white space separates, '-' and '"' are
     * delimiter tokens, everything else is text */
    buf_t pos, neg;
    buf_init(&pos);
    buf_init(&neg);
    const char *s = q->search;
    size_t n = strlen(s), i = 0, quote = 0;
    bool in_neg = false, in_phrase = false, prev_ws = true;
    while (i < n) {
        char c = s[i];
        if (c == ' ' || c == '\n' || c == '\v' || c == '\f' || c == '\r') {
            prev_ws = true;
            i++;
            continue;
        }
        if (c == '-' || c == '"') {
            if (c == '-') {
                if (!in_phrase && prev_ws)
                    in_neg = true;
            } else if (in_phrase) {
                fts_strset_add(in_neg ? &q->negated_phrases : &q->phrases, s + quote + 1,
                               i - quote - 1);
                in_phrase = false;
            } else {
                in_phrase = true;
                if (in_neg && prev_ws)
                    in_neg = false;
                quote = i;
            }
            prev_ws = false;
            i++;
            continue;
        }
        size_t start = i;
        while (i < n && !strchr(" \n\v\f\r-\"", s[i]))
            i++;
        if (!(in_phrase && in_neg)) {
            if (in_neg && prev_ws)
                in_neg = false;
            buf_t *b = in_neg ? &neg : &pos;
            buf_append(b, s + start, i - start);
            buf_append(b, " ", 1);
        }
        prev_ws = false;
    }
    fts_query_add_terms(q, (const char *)pos.data, pos.len, false);
    fts_query_add_terms(q, (const char *)neg.data, neg.len, true);
    buf_destroy(&pos);
    buf_destroy(&neg);
    return true;
}

const fts_spec_t *fts_query_spec(const fts_query_t *q)
{
    return q->spec;
}

const char *fts_query_index_term(const fts_query_t *q, size_t i)
{
    return q->bounds.items[i];
}

size_t fts_query_nindex_terms(const fts_query_t *q)
{
    return q->bounds.n;
}

const char *fts_query_search(const fts_query_t *q)
{
    return q->search;
}

const char *fts_query_language(const fts_query_t *q)
{
    return q->lang ? q->lang->name : q->language ? q->language : "english";
}

/* What matching one document looks for. */
typedef struct fts_match_ctx {
    const fts_query_t *q;
    const fts_strset_t *set; /* terms looked for */
    const char *phrase;      /* or the phrase looked for */
    bool found;
} fts_match_ctx_t;

static bool fts_match_term(const char *term, size_t len, void *p)
{
    fts_match_ctx_t *mc = p;
    if (fts_strset_has(mc->set, term, len)) {
        mc->found = true;
        return false;
    }
    return true;
}

static bool fts_match_string(const fts_lang_t *lang, const char *s, size_t len, double weight,
                             void *p)
{
    (void)weight;
    fts_match_ctx_t *mc = p;
    if (mc->phrase) {
        bool turkish = !strcmp(lang->name, "turkish");
        buf_t hay, needle;
        buf_init(&hay);
        buf_init(&needle);
        fts_fold_string(s, len, mc->q->case_sensitive, mc->q->diacritic_sensitive, turkish, &hay);
        fts_fold_string(mc->phrase, strlen(mc->phrase), mc->q->case_sensitive,
                        mc->q->diacritic_sensitive, turkish, &needle);
        mc->found = strstr((const char *)hay.data, (const char *)needle.data) != NULL;
        buf_destroy(&hay);
        buf_destroy(&needle);
        return !mc->found;
    }
    int opts = (mc->q->case_sensitive ? FTS_TOK_CASE : 0) |
               (mc->q->diacritic_sensitive ? FTS_TOK_DIACRITIC : 0);
    fts_tokenize(lang, s, len, opts, fts_match_term, mc);
    return !mc->found;
}

static bool fts_doc_has(const fts_query_t *q, const bson_t *doc, const fts_strset_t *set,
                        const char *phrase)
{
    fts_match_ctx_t mc = {q, set, phrase, false};
    dberr_t err;
    fts_walk_doc(q->spec, doc, "", q->spec->language, 0, fts_match_string, &mc, &err);
    return mc.found;
}

bool fts_query_matches(const fts_query_t *q, const bson_t *doc)
{
    if (!q->spec)
        return false;
    if (!fts_doc_has(q, doc, &q->terms, NULL))
        return false;
    if (q->negated.n && fts_doc_has(q, doc, &q->negated, NULL))
        return false;
    for (size_t i = 0; i < q->phrases.n; i++)
        if (!fts_doc_has(q, doc, NULL, q->phrases.items[i]))
            return false;
    for (size_t i = 0; i < q->negated_phrases.n; i++)
        if (fts_doc_has(q, doc, NULL, q->negated_phrases.items[i]))
            return false;
    return true;
}

double fts_query_score(const fts_query_t *q, const bson_t *doc)
{
    if (!q->spec)
        return 0;
    const uint8_t *data = bson_get_data(doc);
    uint64_t h = fts_hash(data, doc->len);
    fts_memo_entry_t *e;
    HASH_FIND(hh, q->memo->map, &h, sizeof h, e);
    if (e && e->len == doc->len && !memcmp(e->doc, data, doc->len))
        return e->score;
    fts_term_score_t *terms;
    size_t n;
    dberr_t err;
    double score = 0;
    if (!fts_spec_terms(q->spec, doc, &terms, &n, &err))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (fts_strset_has(&q->bounds, terms[i].term, strlen(terms[i].term)))
            score += terms[i].score;
    fts_terms_free(terms, n);
    if (!e && q->memo->bytes + doc->len <= FTS_MEMO_BYTES) {
        e = bson_malloc(sizeof *e);
        e->hash = h;
        e->len = doc->len;
        e->doc = bson_malloc(doc->len);
        memcpy(e->doc, data, doc->len);
        e->score = score;
        HASH_ADD(hh, q->memo->map, hash, sizeof h, e);
        q->memo->bytes += doc->len;
    }
    return score;
}

static void fts_append_set(bson_t *out, const char *field, const fts_strset_t *s)
{
    bson_t arr;
    char key[16];
    bson_append_array_begin(out, field, -1, &arr);
    for (size_t i = 0; i < s->n; i++) {
        snprintf(key, sizeof key, "%zu", i);
        BSON_APPEND_UTF8(&arr, key, s->items[i]);
    }
    bson_append_array_end(out, &arr);
}

void fts_query_append_parsed(const fts_query_t *q, bson_t *out, const char *field)
{
    bson_t d;
    bson_append_document_begin(out, field, -1, &d);
    fts_append_set(&d, "terms", &q->terms);
    fts_append_set(&d, "negatedTerms", &q->negated);
    fts_append_set(&d, "phrases", &q->phrases);
    fts_append_set(&d, "negatedPhrases", &q->negated_phrases);
    bson_append_document_end(out, &d);
}
