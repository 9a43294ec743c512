/* fts: mongod's text search (textIndexVersion 3) — languages, the Unicode
 * tokenizer with Snowball stemming, stop words and ICU case/diacritic folding,
 * text index specs (weights, languages), $text queries and their scores.
 * The index that stores the terms is store/textindex.c; the design is in
 * docs/text-search.md. */
#ifndef ATOMDB_FTS_H
#define ATOMDB_FTS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/dberr.h"

/* One language text search knows (mongod's list for version 3). */
typedef struct fts_lang fts_lang_t;

/* The language named `name` (mongod's name, "english", or its ISO code,
 * "en"; "none" stems nothing and has no stop words), or NULL. */
const fts_lang_t *fts_lang_find(const char *name);
/* Its canonical name ("english"). */
const char *fts_lang_name(const fts_lang_t *l);

/* Tokenizer options (mongod's FTSTokenizer options). */
enum {
    FTS_TOK_STOPWORDS = 1, /* drop the language's stop words */
    FTS_TOK_CASE = 2,      /* keep case (terms are not lower-cased) */
    FTS_TOK_DIACRITIC = 4, /* keep diacritics */
};

/* Called with each term (stemmed, folded as the options say), borrowed for
 * the call; return false to stop. */
typedef bool (*fts_term_fn)(const char *term, size_t len, void *ctx);

/* Splits the UTF-8 `text` into terms as mongod's Unicode tokenizer does:
 * Unicode delimiters (white space, dashes, quotation marks, punctuation,
 * pattern syntax; not the apostrophe in English), lower-cased, stop words
 * dropped (option), stemmed with Snowball, diacritics removed. Invalid
 * UTF-8 is tokenized as Latin-1 bytes would be: never an error. */
void fts_tokenize(const fts_lang_t *lang, const char *text, size_t len, int opts, fts_term_fn fn,
                  void *ctx);

/* One weighted field of a text index. */
typedef struct fts_weight {
    char *path;
    double weight;
} fts_weight_t;

/* The fields a text index covers and how: parsed from an index spec. */
typedef struct fts_spec {
    fts_weight_t *fields;      /* weighted fields ("$**" not among them) */
    int nfields;
    bool wildcard;             /* "$**": every string field */
    const fts_lang_t *language;/* default_language */
    char *language_override;   /* the per-document language field */
} fts_spec_t;

/* Fills `spec` from a createIndexes spec whose key holds "text" fields (or
 * the resolved {_fts: "text", _ftsx: 1} with weights), and writes mongod's
 * resolved spec fields (weights, default_language, language_override,
 * textIndexVersion) to `resolved_out`. Errors as mongod's fixSpec
 * (17283 weights not numeric, 16674 weight out of range, 17264 default
 * language, 17136 language override, 17293/17364 textIndexVersion...). */
bool fts_spec_init(fts_spec_t *spec, const bson_t *index_spec, bson_t *resolved_out, dberr_t *err);
void fts_spec_destroy(fts_spec_t *spec);
/* A deep copy of `from` into `to` (destroy it with fts_spec_destroy). */
void fts_spec_copy(const fts_spec_t *from, fts_spec_t *to);

/* One term of a document and its score (mongod's scoreDocument). */
typedef struct fts_term_score {
    char *term;
    double score;
} fts_term_score_t;

/* The terms of `doc` under `spec`, each with its weighted score: per
 * string, weight × frequency (1 + 1/2 + 1/4 ... per repeat) × (0.5 +
 * 0.5 × count/tokens), × 1.1 when the string is that one word. *out is an
 * array the caller frees with fts_terms_free. False with 17261/17262 for a
 * bad language override field. */
bool fts_spec_terms(const fts_spec_t *spec, const bson_t *doc, fts_term_score_t **out, size_t *n,
                    dberr_t *err);
void fts_terms_free(fts_term_score_t *terms, size_t n);

/* A parsed $text query. */
typedef struct fts_query fts_query_t;

/* Parses the argument of $text ({$search, $language, $caseSensitive,
 * $diacriticSensitive}). The terms depend on the language, which may come
 * from the index (default_language): they are computed by fts_query_bind. */
fts_query_t *fts_query_new(const bson_value_t *arg, dberr_t *err);
void fts_query_destroy(fts_query_t *q);

/* Resolves the query against the text index spec (copied): its language, terms, phrases. False with BadValue 2 for
 * an unsupported $language. */
bool fts_query_bind(fts_query_t *q, const fts_spec_t *spec, dberr_t *err);
/* The bound spec, or NULL. */
const fts_spec_t *fts_query_spec(const fts_query_t *q);

/* The positive terms the index is searched for (lower case, no
 * diacritics), the i-th of *n; valid while `q` lives. */
const char *fts_query_index_term(const fts_query_t *q, size_t i);
size_t fts_query_nindex_terms(const fts_query_t *q);

/* True when bound `q` matches `doc`: a positive term, no negated term,
 * every phrase, no negated phrase. */
bool fts_query_matches(const fts_query_t *q, const bson_t *doc);

/* The textScore of `doc` for bound `q`: the sum of the document's scores
 * of the query's positive index terms (what the index scan sums). */
double fts_query_score(const fts_query_t *q, const bson_t *doc);

/* explain's parsedTextQuery: {terms, negatedTerms, phrases, negatedPhrases}. */
void fts_query_append_parsed(const fts_query_t *q, bson_t *out, const char *field);
/* The $search string and the resolved language name, for explain. */
const char *fts_query_search(const fts_query_t *q);
const char *fts_query_language(const fts_query_t *q);

#endif
