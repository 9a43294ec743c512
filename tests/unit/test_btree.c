/* test_btree: src/util/btree.c, the B+tree under every index — order,
 * seeks, inline and long keys, splits, merges and root collapse under
 * many random inserts and removals checked against util/omap.h, and
 * freeing a slice at a time. */
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "util/btree.h"
#include "util/omap.h"

/* True when `t` holds exactly what `ref` holds, in the same order. */
static bool btree_matches(const btree_t *t, const omap_t *ref)
{
    if (btree_count(t) != omap_count(ref))
        return false;
    btree_pos_t p;
    bool more = btree_seek(t, NULL, 0, &p);
    for (omap_node_t *n = omap_seek(ref, NULL, 0); n; n = omap_next(n)) {
        if (!more)
            return false;
        size_t a, b;
        const uint8_t *ka = btree_pos_key(&p, &a), *kb = omap_node_key(n, &b);
        if (a != b || memcmp(ka, kb, a) != 0 || btree_pos_value(&p) != omap_node_value(n))
            return false;
        more = btree_next(&p);
    }
    return !more;
}

static void test_keys_come_back_in_memcmp_order_shorter_prefix_first(void)
{
    btree_t *t = btree_new();
    const char *keys[] = {"b", "ab", "a", "abc", "", "ba"};
    for (size_t i = 0; i < 6; i++)
        CHECK(btree_insert(t, keys[i], strlen(keys[i]), (void *)keys[i]), "insert %s", keys[i]);
    const char *want[] = {"", "a", "ab", "abc", "b", "ba"};
    size_t i = 0;
    btree_pos_t p;
    for (bool more = btree_seek(t, NULL, 0, &p); more; more = btree_next(&p), i++) {
        size_t len;
        const uint8_t *k = btree_pos_key(&p, &len);
        CHECK(i < 6 && len == strlen(want[i]) && memcmp(k, want[i], len) == 0,
              "key %zu is \"%s\"", i, i < 6 ? want[i] : "?");
    }
    CHECK(i == 6 && btree_count(t) == 6, "six keys, six entries");
    btree_destroy(t, NULL);
}

static void test_insert_of_an_existing_key_changes_nothing(void)
{
    btree_t *t = btree_new();
    int a = 1, b = 2;
    CHECK(btree_insert(t, "k", 1, &a), "first insert succeeds");
    CHECK(!btree_insert(t, "k", 1, &b), "second insert of the same key fails");
    CHECK(btree_get(t, "k", 1) == &a, "the first value stays");
    CHECK(btree_count(t) == 1, "one entry");
    btree_destroy(t, NULL);
}

static void test_seek_and_find_on_an_empty_tree_find_nothing(void)
{
    btree_t *t = btree_new();
    btree_pos_t p;
    CHECK(!btree_seek(t, NULL, 0, &p) && !p.leaf, "no first entry");
    CHECK(!btree_seek(t, "a", 1, &p), "nothing at or after a");
    CHECK(!btree_find(t, "a", 1, &p) && btree_get(t, "a", 1) == NULL, "a is absent");
    CHECK(btree_remove(t, "a", 1) == NULL, "removing an absent key gives NULL");
    btree_destroy(t, NULL);
}

static void test_long_keys_are_kept_whole_and_ordered(void)
{
    btree_t *t = btree_new();
    omap_t *ref = omap_new();
    char key[200];
    for (int i = 0; i < 3000; i++) {
        int len = 10 + (i * 37) % 150; /* inline (<= 23) and long keys mixed */
        memset(key, 'k', sizeof key);
        snprintf(key, sizeof key, "%08d", (i * 7919) % 3000);
        key[8] = 'k';
        btree_insert(t, key, (size_t)len, (void *)(intptr_t)(i + 1));
        omap_insert(ref, key, (size_t)len, (void *)(intptr_t)(i + 1));
    }
    CHECK(btree_matches(t, ref), "3000 long and short keys in memcmp order");
    btree_pos_t p;
    memset(key, 'k', sizeof key);
    snprintf(key, sizeof key, "%08d", 1234);
    key[8] = 'k';
    CHECK(btree_seek(t, key, 9, &p), "a seek lands");
    size_t len;
    const uint8_t *k = btree_pos_key(&p, &len);
    CHECK(len >= 9 && memcmp(k, key, 9) == 0, "on the first key with that prefix");
    btree_destroy(t, NULL);
    omap_destroy(ref, NULL);
}

static void test_ascending_inserts_fill_every_leaf(void)
{
    btree_t *t = btree_new();
    for (uint32_t i = 0; i < 100000; i++) {
        uint8_t k[13] = {7};
        uint32_t be = __builtin_bswap32(i);
        memcpy(k + 9, &be, 4);
        btree_insert(t, k, sizeof k, (void *)(uintptr_t)(i + 1));
    }
    double per = (double)btree_bytes(t) / 100000.0;
    CHECK(per < 34, "an ascending load costs %.1f bytes per 13-byte key (< 34)", per);
    btree_pos_t p;
    uint32_t want = 1;
    bool ordered = true;
    for (bool more = btree_seek(t, NULL, 0, &p); more; more = btree_next(&p))
        ordered = ordered && (uintptr_t)btree_pos_value(&p) == want++;
    CHECK(ordered && want == 100001, "all 100000 come back in order");
    btree_destroy(t, NULL);
}

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static void test_random_inserts_and_removals_agree_with_the_skiplist(void)
{
    btree_t *t = btree_new();
    omap_t *ref = omap_new();
    bool agree = true, seeks = true;
    char key[64];
    for (int round = 0; round < 200000; round++) {
        uint32_t r = next_rand();
        int len = snprintf(key, sizeof key, "%u", r % 20000);
        if (r % 40 == 0) /* some long keys */
            len = snprintf(key, sizeof key, "%u-a-long-key-that-spills-to-the-heap", r % 20000);
        bool remove = round > 100000 ? (r >> 20) % 3 != 0 : (r >> 20) % 3 == 0;
        if (remove) {
            void *a = btree_remove(t, key, (size_t)len);
            void *b = omap_remove(ref, key, (size_t)len);
            agree = agree && a == b;
        } else {
            bool a = btree_insert(t, key, (size_t)len, (void *)(intptr_t)(round + 1));
            bool b = omap_insert(ref, key, (size_t)len, (void *)(intptr_t)(round + 1));
            agree = agree && a == b;
        }
        if (round % 997 == 0) {
            btree_pos_t p;
            omap_node_t *n = omap_seek(ref, key, (size_t)len - 1);
            bool got = btree_seek(t, key, (size_t)len - 1, &p);
            seeks = seeks && got == (n != NULL) && (!n || btree_pos_value(&p) == omap_node_value(n));
        }
        if (round % 20000 == 0)
            agree = agree && btree_matches(t, ref);
    }
    CHECK(agree, "every insert and remove answered as the skiplist's, same contents");
    CHECK(seeks, "seeks land on the same entries");
    /* empty it entirely: merges, dropped leaves, the root collapsing */
    for (omap_node_t *n = omap_seek(ref, NULL, 0); n; n = omap_seek(ref, NULL, 0)) {
        size_t len;
        const uint8_t *k = omap_node_key(n, &len);
        char copy[64];
        memcpy(copy, k, len);
        agree = agree && btree_remove(t, copy, len) == omap_node_value(n);
        omap_remove(ref, copy, len);
    }
    btree_pos_t p;
    CHECK(agree && btree_count(t) == 0 && !btree_seek(t, NULL, 0, &p), "emptied completely");
    CHECK(btree_insert(t, "again", 5, "v") && btree_get(t, "again", 5), "usable after emptying");
    btree_destroy(t, NULL);
    omap_destroy(ref, NULL);
}

static int freed_values;
static void count_free(void *v)
{
    (void)v;
    freed_values++;
}

static void test_destroy_some_frees_a_slice_at_a_time_and_every_value_once(void)
{
    btree_t *t = btree_new();
    for (uint32_t i = 0; i < 5000; i++) {
        uint32_t be = __builtin_bswap32(i);
        btree_insert(t, &be, 4, (void *)(uintptr_t)(i + 1));
    }
    freed_values = 0;
    size_t total = 0, freed, calls = 0;
    bool done;
    do {
        done = btree_destroy_some(t, count_free, 256, &freed);
        total += freed;
        calls++;
    } while (!done);
    CHECK(freed_values == 5000 && total == 5000, "5000 values freed once each (%d)", freed_values);
    CHECK(calls > 10, "in slices (%zu calls)", calls);
}

int main(void)
{
    UNIT_RUN(test_keys_come_back_in_memcmp_order_shorter_prefix_first);
    UNIT_RUN(test_insert_of_an_existing_key_changes_nothing);
    UNIT_RUN(test_seek_and_find_on_an_empty_tree_find_nothing);
    UNIT_RUN(test_long_keys_are_kept_whole_and_ordered);
    UNIT_RUN(test_ascending_inserts_fill_every_leaf);
    UNIT_RUN(test_random_inserts_and_removals_agree_with_the_skiplist);
    UNIT_RUN(test_destroy_some_frees_a_slice_at_a_time_and_every_value_once);
    return unit_finish();
}
