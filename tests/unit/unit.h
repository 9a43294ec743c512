/* unit: the tiny harness every C unit test uses. A test is a function named
 * after the behaviour it checks; CHECK states what it checks and records a
 * failure without stopping; UNIT_RUN runs one test; unit_finish prints
 * "N passed, N failed" and returns the exit status. Case files are JSON read
 * with unit_load_json (libbson's JSON parser, relaxed or canonical
 * extended JSON). */
#ifndef ATOMDB_TEST_UNIT_H
#define ATOMDB_TEST_UNIT_H

#include <bson/bson.h>
#include <stdio.h>
#include <stdlib.h>

static int unit_passed, unit_failed, unit_current_failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            unit_current_failed = 1;                                                               \
            fprintf(stderr, "  FAIL %s:%d: ", __FILE__, __LINE__);                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

#define UNIT_RUN(fn)                                                                               \
    do {                                                                                           \
        unit_current_failed = 0;                                                                   \
        fn();                                                                                      \
        if (unit_current_failed) {                                                                 \
            unit_failed++;                                                                         \
            fprintf(stderr, "FAIL %s\n", #fn);                                                     \
        } else {                                                                                   \
            unit_passed++;                                                                         \
        }                                                                                          \
    } while (0)

/* Counts one named case (from a case file) as passed or failed. */
static inline void unit_case(const char *name, int ok)
{
    if (ok) {
        unit_passed++;
    } else {
        unit_failed++;
        fprintf(stderr, "FAIL case: %s\n", name);
    }
}

/* Prints the closing line and returns the process exit status. */
static inline int unit_finish(void)
{
    printf("%d passed, %d failed\n", unit_passed, unit_failed);
    return unit_failed ? 1 : 0;
}

/* Reads a whole JSON file into a new bson_t (caller destroys); exits on error. */
static inline bson_t *unit_load_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (fread(text, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    text[n] = '\0';
    fclose(f);
    bson_error_t error;
    bson_t *doc = bson_new_from_json((const uint8_t *)text, n, &error);
    free(text);
    if (!doc) {
        fprintf(stderr, "%s: %s\n", path, error.message);
        exit(2);
    }
    return doc;
}

#endif
