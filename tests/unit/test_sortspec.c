/* test_sortspec: sort specifications — parsing errors, multi-key order,
 * missing fields as null, arrays by their smallest (ascending) or largest
 * (descending) element, and empty arrays below null. */
#include <string.h>

#include "doc/sortspec.h"
#include "unit.h"

static sortspec_t *spec(bson_t *s)
{
    dberr_t err;
    sortspec_t *ss = sortspec_new(s, &err);
    bson_destroy(s);
    return ss;
}

static int cmp(sortspec_t *s, bson_t *a, bson_t *b)
{
    int c = sortspec_compare(s, a, b);
    bson_destroy(a);
    bson_destroy(b);
    return c < 0 ? -1 : c > 0 ? 1 : 0;
}

static void test_ascending_and_descending_single_key(void)
{
    sortspec_t *asc = spec(BCON_NEW("a", BCON_INT32(1)));
    sortspec_t *desc = spec(BCON_NEW("a", BCON_INT32(-1)));
    CHECK(cmp(asc, BCON_NEW("a", BCON_INT32(1)), BCON_NEW("a", BCON_DOUBLE(2.5))) < 0, "1 before 2.5 ascending");
    CHECK(cmp(desc, BCON_NEW("a", BCON_INT32(1)), BCON_NEW("a", BCON_DOUBLE(2.5))) > 0, "1 after 2.5 descending");
    CHECK(cmp(asc, BCON_NEW("a", BCON_INT64(3)), BCON_NEW("a", BCON_DOUBLE(3.0))) == 0, "3L ties 3.0");
    CHECK(cmp(asc, BCON_NEW("a", BCON_INT32(9)), BCON_NEW("a", BCON_UTF8("0"))) < 0, "numbers before strings");
    sortspec_destroy(asc);
    sortspec_destroy(desc);
}

static void test_missing_field_sorts_as_null(void)
{
    sortspec_t *asc = spec(BCON_NEW("a", BCON_INT32(1)));
    CHECK(cmp(asc, BCON_NEW("b", BCON_INT32(1)), BCON_NEW("a", BCON_NULL)) == 0, "missing ties null");
    CHECK(cmp(asc, BCON_NEW("b", BCON_INT32(1)), BCON_NEW("a", BCON_INT32(0))) < 0, "missing before 0");
    sortspec_destroy(asc);
}

static void test_array_sorts_by_min_ascending_and_max_descending(void)
{
    sortspec_t *asc = spec(BCON_NEW("a", BCON_INT32(1)));
    sortspec_t *desc = spec(BCON_NEW("a", BCON_INT32(-1)));
    /* [1, 10] vs 5: ascending key 1 < 5; descending key 10 > 5 so it comes first */
    CHECK(cmp(asc, BCON_NEW("a", "[", BCON_INT32(1), BCON_INT32(10), "]"), BCON_NEW("a", BCON_INT32(5))) < 0,
          "[1,10] sorts before 5 ascending (min 1)");
    CHECK(cmp(desc, BCON_NEW("a", "[", BCON_INT32(1), BCON_INT32(10), "]"), BCON_NEW("a", BCON_INT32(5))) < 0,
          "[1,10] sorts before 5 descending (max 10)");
    CHECK(cmp(asc, BCON_NEW("a", "[", "]"), BCON_NEW("a", BCON_NULL)) < 0, "an empty array sorts before null");
    CHECK(cmp(desc, BCON_NEW("a", "[", "]"), BCON_NEW("a", BCON_NULL)) > 0, "an empty array sorts after null descending");
    CHECK(cmp(asc, BCON_NEW("a", "[", "]"), BCON_NEW("a", BCON_MINKEY)) > 0, "an empty array sorts after MinKey");
    sortspec_destroy(asc);
    sortspec_destroy(desc);
}

static void test_dotted_key_through_array_of_documents(void)
{
    sortspec_t *asc = spec(BCON_NEW("a.b", BCON_INT32(1)));
    CHECK(cmp(asc, BCON_NEW("a", "[", "{", "b", BCON_INT32(7), "}", "{", "b", BCON_INT32(2), "}", "]"),
              BCON_NEW("a", "{", "b", BCON_INT32(3), "}")) < 0,
          "a.b over [{b:7},{b:2}] uses 2, before 3");
    sortspec_destroy(asc);
}

static void test_second_key_breaks_ties(void)
{
    sortspec_t *s = spec(BCON_NEW("a", BCON_INT32(1), "b", BCON_INT32(-1)));
    CHECK(cmp(s, BCON_NEW("a", BCON_INT32(1), "b", BCON_INT32(1)), BCON_NEW("a", BCON_INT32(1), "b", BCON_INT32(2))) > 0,
          "equal a, b descending puts b:2 first");
    CHECK(cmp(s, BCON_NEW("a", BCON_INT32(0), "b", BCON_INT32(1)), BCON_NEW("a", BCON_INT32(1), "b", BCON_INT32(2))) < 0,
          "the first key decides before the second");
    int dir = 0;
    CHECK(sortspec_nkeys(s) == 2 && strcmp(sortspec_key(s, 1, &dir), "b") == 0 && dir == -1,
          "keys are reported in order with their direction");
    sortspec_destroy(s);
}

static void test_bad_sort_values_are_rejected(void)
{
    dberr_t err;
    bson_t *s = BCON_NEW("a", BCON_INT32(2));
    CHECK(!sortspec_new(s, &err) && err.code == DBERR_BAD_VALUE, "{a: 2} is a BadValue");
    bson_destroy(s);
    s = BCON_NEW("a", BCON_UTF8("asc"));
    CHECK(!sortspec_new(s, &err) && err.code == DBERR_BAD_VALUE, "{a: 'asc'} is a BadValue");
    bson_destroy(s);
    s = BCON_NEW("a", "{", "$meta", BCON_UTF8("textScore"), "}");
    sortspec_t *ok = sortspec_new(s, &err);
    CHECK(ok != NULL, "{$meta: 'textScore'} is accepted");
    sortspec_destroy(ok);
    bson_destroy(s);
    s = BCON_NEW("a", BCON_DOUBLE(-1.0));
    ok = sortspec_new(s, &err);
    CHECK(ok != NULL, "-1.0 is accepted as descending");
    sortspec_destroy(ok);
    bson_destroy(s);
}

int main(void)
{
    UNIT_RUN(test_ascending_and_descending_single_key);
    UNIT_RUN(test_missing_field_sorts_as_null);
    UNIT_RUN(test_array_sorts_by_min_ascending_and_max_descending);
    UNIT_RUN(test_dotted_key_through_array_of_documents);
    UNIT_RUN(test_second_key_breaks_ties);
    UNIT_RUN(test_bad_sort_values_are_rejected);
    return unit_finish();
}
