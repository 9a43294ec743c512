/* test_fts: text search driven by cases/fts.json — the tokenizer per
 * language (Snowball stems, stop words, case and diacritic folding), the
 * language names, per-document term scores, index spec errors, and how
 * $search strings parse and match. */
#include <math.h>
#include <string.h>

#include "doc/fts.h"
#include "unit.h"

static bool iter_doc(const bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *data;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) && !BSON_ITER_HOLDS_ARRAY(it))
        return false;
    bson_iter_document(it, &len, &data);
    if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &len, &data);
    return bson_init_static(out, data, len);
}

static bool field_doc(const bson_t *c, const char *name, bson_t *out)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, c, name) && iter_doc(&it, out);
}

static const char *field_str(const bson_t *c, const char *name)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, c, name) && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : "";
}

static bool field_bool(const bson_t *c, const char *name, bool dflt)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, c, name) ? bson_iter_as_bool(&it) : dflt;
}

typedef struct collected {
    bson_t arr;
    int n;
} collected_t;

static bool collect(const char *term, size_t len, void *ctx)
{
    collected_t *c = ctx;
    char key[16];
    snprintf(key, sizeof key, "%d", c->n++);
    bson_append_utf8(&c->arr, key, -1, term, (int)len);
    return true;
}

/* True when the string arrays `a` and `b` hold the same strings (any order). */
static bool same_set(const bson_t *a, const bson_t *b)
{
    if (bson_count_keys(a) != bson_count_keys(b))
        return false;
    bson_iter_t x, y;
    bson_iter_init(&x, a);
    while (bson_iter_next(&x)) {
        bool found = false;
        bson_iter_init(&y, b);
        while (bson_iter_next(&y))
            if (!strcmp(bson_iter_utf8(&x, NULL), bson_iter_utf8(&y, NULL)))
                found = true;
        if (!found)
            return false;
    }
    return true;
}

static void run_tokenize(const bson_t *file)
{
    bson_t cases, c, want;
    bson_iter_t it;
    field_doc(file, "tokenize", &cases);
    bson_iter_init(&it, &cases);
    while (bson_iter_next(&it)) {
        iter_doc(&it, &c);
        const char *name = field_str(&c, "name");
        const fts_lang_t *lang = fts_lang_find(field_str(&c, "language"));
        const char *text = field_str(&c, "text");
        int opts = (field_bool(&c, "stopwords", true) ? FTS_TOK_STOPWORDS : 0) |
                   (field_bool(&c, "case", false) ? FTS_TOK_CASE : 0) |
                   (field_bool(&c, "diacritic", false) ? FTS_TOK_DIACRITIC : 0);
        collected_t got = {BSON_INITIALIZER, 0};
        if (lang)
            fts_tokenize(lang, text, strlen(text), opts, collect, &got);
        field_doc(&c, "terms", &want);
        bool ok = lang && bson_equal(&got.arr, &want);
        if (!ok) {
            char *g = bson_as_relaxed_extended_json(&got.arr, NULL);
            fprintf(stderr, "  %s: got %s\n", name, g);
            bson_free(g);
        }
        unit_case(name, ok);
        bson_destroy(&got.arr);
    }
}

static void run_languages(const bson_t *file)
{
    bson_t cases, c;
    bson_iter_t it;
    field_doc(file, "languages", &cases);
    bson_iter_init(&it, &cases);
    while (bson_iter_next(&it)) {
        iter_doc(&it, &c);
        const char *name = field_str(&c, "name");
        bool known = field_bool(&c, "known", false);
        char label[128];
        snprintf(label, sizeof label, "language '%s' is %s", name, known ? "known" : "unknown");
        unit_case(label, (fts_lang_find(name) != NULL) == known);
    }
}

static void run_scores(const bson_t *file)
{
    bson_t cases, c, spec, doc, want;
    bson_iter_t it;
    field_doc(file, "scores", &cases);
    bson_iter_init(&it, &cases);
    while (bson_iter_next(&it)) {
        iter_doc(&it, &c);
        const char *name = field_str(&c, "name");
        field_doc(&c, "spec", &spec);
        field_doc(&c, "doc", &doc);
        field_doc(&c, "scores", &want);
        fts_spec_t fs;
        bson_t resolved = BSON_INITIALIZER;
        dberr_t err;
        fts_term_score_t *terms = NULL;
        size_t n = 0;
        bool ok = fts_spec_init(&fs, &spec, &resolved, &err) &&
                  fts_spec_terms(&fs, &doc, &terms, &n, &err);
        ok = ok && n == bson_count_keys(&want);
        for (size_t i = 0; ok && i < n; i++) {
            bson_iter_t w;
            ok = bson_iter_init_find(&w, &want, terms[i].term) &&
                 fabs(bson_iter_as_double(&w) - terms[i].score) < 1e-9;
            if (!ok)
                fprintf(stderr, "  %s: term %s scored %.17g\n", name, terms[i].term,
                        terms[i].score);
        }
        unit_case(name, ok);
        fts_terms_free(terms, n);
        fts_spec_destroy(&fs);
        bson_destroy(&resolved);
    }
}

static void run_spec_errors(const bson_t *file)
{
    bson_t cases, c, spec;
    bson_iter_t it, code;
    field_doc(file, "specErrors", &cases);
    bson_iter_init(&it, &cases);
    while (bson_iter_next(&it)) {
        iter_doc(&it, &c);
        field_doc(&c, "spec", &spec);
        bson_iter_init_find(&code, &c, "code");
        fts_spec_t fs;
        bson_t resolved = BSON_INITIALIZER;
        dberr_t err;
        dberr_clear(&err);
        bool ok = !fts_spec_init(&fs, &spec, &resolved, &err) &&
                  err.code == (int)bson_iter_as_int64(&code);
        if (!ok)
            fprintf(stderr, "  got code %d: %s\n", err.code, err.msg);
        unit_case(field_str(&c, "name"), ok);
        bson_destroy(&resolved);
    }
}

static bool docs_match(const fts_query_t *q, const bson_t *docs, bool want)
{
    bson_iter_t it;
    bson_t d;
    bson_iter_init(&it, docs);
    while (bson_iter_next(&it)) {
        iter_doc(&it, &d);
        if (fts_query_matches(q, &d) != want) {
            char *s = bson_as_relaxed_extended_json(&d, NULL);
            fprintf(stderr, "  %s should %smatch\n", s, want ? "" : "not ");
            bson_free(s);
            return false;
        }
    }
    return true;
}

static void run_queries(const bson_t *file)
{
    bson_t cases, c, search, parsed_doc, got, want, docs;
    bson_iter_t it;
    field_doc(file, "queries", &cases);
    bson_t spec_doc = BSON_INITIALIZER, key;
    BSON_APPEND_DOCUMENT_BEGIN(&spec_doc, "key", &key);
    BSON_APPEND_UTF8(&key, "subject", "text");
    bson_append_document_end(&spec_doc, &key);
    fts_spec_t fs;
    bson_t resolved = BSON_INITIALIZER;
    dberr_t err;
    CHECK(fts_spec_init(&fs, &spec_doc, &resolved, &err), "the {subject: 'text'} spec parses");
    bson_iter_init(&it, &cases);
    while (bson_iter_next(&it)) {
        iter_doc(&it, &c);
        const char *name = field_str(&c, "name");
        bson_iter_t s;
        bson_iter_init_find(&s, &c, "search");
        fts_query_t *q = fts_query_new(bson_iter_value(&s), &err);
        bool ok = q && fts_query_bind(q, &fs, &err);
        bson_t parsed = BSON_INITIALIZER;
        if (ok) {
            fts_query_append_parsed(q, &parsed, "p");
            field_doc(&parsed, "p", &parsed_doc);
            const char *parts[] = {"terms", "negatedTerms", "phrases", "negatedPhrases"};
            for (int i = 0; ok && i < 4; i++) {
                ok = field_doc(&parsed_doc, parts[i], &got) && field_doc(&c, parts[i], &want) &&
                     same_set(&got, &want);
                if (!ok) {
                    char *g = bson_as_relaxed_extended_json(&got, NULL);
                    fprintf(stderr, "  %s: %s are %s\n", name, parts[i], g);
                    bson_free(g);
                }
            }
            ok = ok && field_doc(&c, "match", &docs) && docs_match(q, &docs, true) &&
                 field_doc(&c, "nomatch", &docs) && docs_match(q, &docs, false);
        }
        unit_case(name, ok);
        bson_destroy(&parsed);
        fts_query_destroy(q);
        (void)search;
    }
    fts_spec_destroy(&fs);
    bson_destroy(&resolved);
    bson_destroy(&spec_doc);
}

static void run_query_errors(const bson_t *file)
{
    bson_t cases, c;
    bson_iter_t it, s, code;
    field_doc(file, "queryErrors", &cases);
    bson_iter_init(&it, &cases);
    while (bson_iter_next(&it)) {
        iter_doc(&it, &c);
        bson_iter_init_find(&s, &c, "search");
        bson_iter_init_find(&code, &c, "code");
        dberr_t err;
        dberr_clear(&err);
        fts_query_t *q = fts_query_new(bson_iter_value(&s), &err);
        bool ok = !q && err.code == (int)bson_iter_as_int64(&code);
        if (!ok)
            fprintf(stderr, "  got code %d: %s\n", err.code, err.msg);
        unit_case(field_str(&c, "name"), ok);
        fts_query_destroy(q);
    }
}

static void test_score_of_a_query_sums_its_terms(void)
{
    bson_t spec = BSON_INITIALIZER, key;
    BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
    BSON_APPEND_UTF8(&key, "subject", "text");
    bson_append_document_end(&spec, &key);
    fts_spec_t fs;
    bson_t resolved = BSON_INITIALIZER;
    dberr_t err;
    CHECK(fts_spec_init(&fs, &spec, &resolved, &err), "spec parses");
    bson_t *arg = BCON_NEW("$search", "coffee shop tea");
    bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};
    v.value.v_doc.data = (uint8_t *)bson_get_data(arg);
    v.value.v_doc.data_len = arg->len;
    fts_query_t *q = fts_query_new(&v, &err);
    CHECK(q && fts_query_bind(q, &fs, &err), "query parses and binds");
    bson_t *doc = BCON_NEW("subject", "Coffee Shopping");
    CHECK(fabs(fts_query_score(q, doc) - 1.5) < 1e-9,
          "coffe (0.75) + shop (0.75) = 1.5, as mongod scores it (got %g)",
          fts_query_score(q, doc));
    bson_t *w;
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, &resolved, "textIndexVersion") && bson_iter_as_int64(&it) == 3,
          "the resolved spec says textIndexVersion 3");
    CHECK(bson_iter_init_find(&it, &resolved, "default_language") &&
              !strcmp(bson_iter_utf8(&it, NULL), "english"),
          "english is the default language");
    (void)w;
    bson_destroy(doc);
    bson_destroy(arg);
    fts_query_destroy(q);
    fts_spec_destroy(&fs);
    bson_destroy(&resolved);
    bson_destroy(&spec);
}

int main(void)
{
    bson_t *file = unit_load_json("cases/fts.json");
    run_tokenize(file);
    run_languages(file);
    run_scores(file);
    run_spec_errors(file);
    run_queries(file);
    run_query_errors(file);
    UNIT_RUN(test_score_of_a_query_sums_its_terms);
    bson_destroy(file);
    return unit_finish();
}
