/* test_omap: src/util/omap.c, the skiplist under every index and the
 * catalog — ordered iteration, seeks, removal, and agreement with a sorted
 * reference over many random keys. */
#include <string.h>

#include "unit.h"
#include "util/omap.h"

static void test_keys_come_back_in_memcmp_order_shorter_prefix_first(void)
{
    omap_t *m = omap_new();
    const char *keys[] = {"b", "ab", "a", "abc", "", "ba"};
    for (size_t i = 0; i < 6; i++)
        CHECK(omap_insert(m, keys[i], strlen(keys[i]), (void *)keys[i]), "insert %s", keys[i]);
    const char *want[] = {"", "a", "ab", "abc", "b", "ba"};
    size_t i = 0;
    for (omap_node_t *n = omap_seek(m, NULL, 0); n; n = omap_next(n), i++) {
        size_t len;
        const uint8_t *k = omap_node_key(n, &len);
        CHECK(i < 6 && len == strlen(want[i]) && memcmp(k, want[i], len) == 0, "key %zu is \"%s\"",
              i, i < 6 ? want[i] : "?");
    }
    CHECK(i == 6 && omap_count(m) == 6, "six keys, six nodes");
    omap_destroy(m, NULL);
}

static void test_insert_of_an_existing_key_changes_nothing(void)
{
    omap_t *m = omap_new();
    int a = 1, b = 2;
    CHECK(omap_insert(m, "k", 1, &a), "first insert succeeds");
    CHECK(!omap_insert(m, "k", 1, &b), "second insert of the same key fails");
    CHECK(omap_get(m, "k", 1) == &a, "the first value stays");
    CHECK(omap_count(m) == 1, "one entry");
    omap_destroy(m, NULL);
}

static void test_seek_finds_the_first_key_at_or_after_and_seek_last_before(void)
{
    omap_t *m = omap_new();
    omap_insert(m, "b", 1, "b");
    omap_insert(m, "d", 1, "d");
    omap_node_t *n = omap_seek(m, "c", 1);
    CHECK(n && strcmp(omap_node_value(n), "d") == 0, "seek(c) lands on d");
    n = omap_seek_last(m, "c", 1);
    CHECK(n && strcmp(omap_node_value(n), "b") == 0, "seek_last(c) lands on b");
    CHECK(omap_seek(m, "e", 1) == NULL, "nothing at or after e");
    CHECK(omap_seek_last(m, "a", 1) == NULL, "nothing at or before a");
    CHECK(omap_prev(omap_find(m, "d", 1)) == omap_find(m, "b", 1), "prev of d is b");
    omap_destroy(m, NULL);
}

static void test_remove_returns_the_value_and_unlinks_the_key(void)
{
    omap_t *m = omap_new();
    omap_insert(m, "x", 1, "vx");
    omap_insert(m, "y", 1, "vy");
    CHECK(strcmp(omap_remove(m, "x", 1), "vx") == 0, "remove returns the value");
    CHECK(omap_remove(m, "x", 1) == NULL, "a second remove finds nothing");
    CHECK(omap_get(m, "x", 1) == NULL && omap_count(m) == 1, "x is gone, y stays");
    CHECK(omap_seek(m, NULL, 0) == omap_find(m, "y", 1), "y is now first");
    omap_destroy(m, NULL);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void test_many_random_keys_iterate_sorted_after_removing_half(void)
{
    enum { N = 5000 };
    static uint32_t keys[N], kept[N];
    omap_t *m = omap_new();
    uint32_t x = 12345;
    size_t n = 0, nkept = 0;
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        uint32_t be = BSON_UINT32_TO_BE(x);
        if (omap_insert(m, &be, 4, NULL))
            keys[n++] = x;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t be = BSON_UINT32_TO_BE(keys[i]);
        if (i % 2)
            omap_remove(m, &be, 4);
        else
            kept[nkept++] = keys[i];
    }
    qsort(kept, nkept, sizeof *kept, cmp_u32);
    size_t i = 0;
    bool in_order = true;
    for (omap_node_t *node = omap_seek(m, NULL, 0); node; node = omap_next(node), i++) {
        size_t len;
        uint32_t be;
        memcpy(&be, omap_node_key(node, &len), 4);
        in_order = in_order && i < nkept && BSON_UINT32_FROM_BE(be) == kept[i];
    }
    CHECK(in_order && i == nkept, "%zu kept keys iterate in sorted order (%zu seen)", nkept, i);
    CHECK(omap_count(m) == nkept, "count is the kept keys");
    omap_destroy(m, NULL);
}

int main(void)
{
    UNIT_RUN(test_keys_come_back_in_memcmp_order_shorter_prefix_first);
    UNIT_RUN(test_insert_of_an_existing_key_changes_nothing);
    UNIT_RUN(test_seek_finds_the_first_key_at_or_after_and_seek_last_before);
    UNIT_RUN(test_remove_returns_the_value_and_unlinks_the_key);
    UNIT_RUN(test_many_random_keys_iterate_sorted_after_removing_half);
    return unit_finish();
}
