/* collection-query: the query side of a collection — the planner (point
 * lookup by _id, an index range on an equality prefix, an index that gives
 * the sort order, text, 2dsphere and wildcard scans, or a full scan in _id
 * or natural order) and collection_query, with reads at a snapshot and
 * scans that yield between slices. */
#include "store/collection.h"
#include "store/collection-private.h"

#include <stdlib.h>
#include <string.h>

#include "doc/collation.h"
#include "doc/compare.h"
#include "doc/keystring.h"
#include "store/capped.h"
#include "store/geoscan.h"
#include "store/mvcc.h"
#include "store/textindex.h"
#include "store/wildcard.h"
#include "util/bsonview.h"
#include "util/fiber.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/omap.h"
#include "util/shellfmt.h"

/* The records a multikey scan already returned (util/hash.h, keyed by the
 * record pointer): each is returned once. */
typedef struct seen_record {
    const void *rec;
    UT_hash_handle hh;
} seen_record_t;

/* Adds `rec` to `*set`; false when it was there already. */
static bool seen_add(seen_record_t **set, const void *rec)
{
    seen_record_t *e;
    HASH_FIND_PTR(*set, &rec, e);
    if (e)
        return false;
    e = bson_malloc(sizeof *e);
    e->rec = rec;
    HASH_ADD_PTR(*set, rec, e);
    return true;
}

static void seen_clear(seen_record_t **set)
{
    seen_record_t *e, *tmp;
    HASH_ITER(hh, *set, e, tmp)
    {
        HASH_DEL(*set, e);
        bson_free(e);
    }
}

/* A planned index scan: keys from `lo` while they start with `prefix` and
 * (when has_hi) their first hi.len bytes are <= hi. */
typedef struct scan_plan {
    index_t *ix;
    buf_t lo;
    buf_t prefix;
    buf_t hi;
    bool has_hi;
    int score;
    char wc_path[WILDCARD_PATH_MAX]; /* a wildcard index's scanned path, else "" */
    /* A hashed field bound by $in: the plan is one range per entry of
     * `alts` (distinct hash key parts, in index order), each lo/prefix/hi
     * with the bytes [alt_off, alt_off + alt_len) replaced by the entry.
     * NULL: the one range lo/prefix/hi. nalts 0 with alts set: no range. */
    buf_t *alts;
    size_t nalts;
    size_t alt_off, alt_len;
    /* the first bytes of lo, prefix and hi: an _id lookup's keys cost no
     * malloc (copy a plan with scan_plan_move) */
    uint8_t lo_room[48], prefix_room[48], hi_room[48];
} scan_plan_t;

/* Moves the plan `src` into `dst` (src is left to be dropped, not destroyed). */
static void scan_plan_move(scan_plan_t *dst, const scan_plan_t *src)
{
    *dst = *src;
    buf_relocate(&dst->lo, src->lo_room, dst->lo_room);
    buf_relocate(&dst->prefix, src->prefix_room, dst->prefix_room);
    buf_relocate(&dst->hi, src->hi_room, dst->hi_room);
}

static void scan_plan_destroy(scan_plan_t *p)
{
    buf_destroy(&p->lo);
    buf_destroy(&p->prefix);
    buf_destroy(&p->hi);
    for (size_t i = 0; i < p->nalts; i++)
        buf_destroy(&p->alts[i]);
    bson_free(p->alts);
    p->alts = NULL;
    p->nalts = 0;
}

/* The ranges of `p`: 1, or one per $in alternative of its hashed field. */
static size_t scan_plan_nranges(const scan_plan_t *p)
{
    return p->alts ? p->nalts : 1;
}

/* `src` (p's lo, prefix or hi) as range `i` has it: `src` itself when it
 * holds no alternative (no copy), else spliced into `out`. */
static const buf_t *scan_plan_splice(const scan_plan_t *p, const buf_t *src, size_t i,
                                     buf_t *out)
{
    if (!p->alts || src->len < p->alt_off + p->alt_len)
        return src;
    out->len = 0;
    buf_append(out, src->data, p->alt_off);
    buf_append(out, p->alts[i].data, p->alts[i].len);
    buf_append(out, src->data + p->alt_off + p->alt_len, src->len - p->alt_off - p->alt_len);
    return out;
}

static bool collection_value_indexable(const bson_value_t *v)
{
    return v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_REGEX;
}

bool collection_value_has_string(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_UTF8 || v->value_type == BSON_TYPE_SYMBOL)
        return true;
    if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
        return false;
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return true;
    while (bson_iter_next(&it))
        if (collection_value_has_string(bson_iter_value(&it)))
            return true;
    return false;
}

/* True when a wildcard index holds every document a bound `v` on a
 * covered path can match, under that path: not null (it matches missing
 * paths), nor a non-empty document (keyed by its leaves), nor MinKey,
 * MaxKey, arrays or regexes. Range bounds take no documents at all. */
static bool collection_wildcard_value_ok(const bson_value_t *v, bool range)
{
    switch (v->value_type) {
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_REGEX:
        return false;
    case BSON_TYPE_DOCUMENT:
        return !range && v->value.v_doc.data_len <= 5;
    default:
        return true;
    }
}

/* The bounds `m` allows on the wildcard index `ix`: as mongod's planner,
 * which expands $** into one {$_path: 1, <path>: 1} index per queried
 * path, it scans the best-bounded covered path (equality over range) from
 * the filter's top-level AND; 0 when none qualifies ($exists, $ne, $not,
 * null, $or and sort-only queries are never answered from it). */
static int collection_plan_wildcard(index_t *ix, const matcher_t *m, scan_plan_t *p)
{
    bool same_coll = collation_same(ix->collation, matcher_collation(m));
    const char *paths[32];
    int n = matcher_bound_paths(m, paths, 32);
    int best = 0;
    const char *best_path = NULL;
    matcher_bounds_t bb;
    for (int i = 0; i < n; i++) {
        matcher_bounds_t b;
        if (strlen(paths[i]) >= WILDCARD_PATH_MAX || !wildcard_covers(ix->wildcard, paths[i]) ||
            !matcher_bounds(m, paths[i], &b))
            continue;
        int score = 0;
        if (b.has_eq && collection_wildcard_value_ok(&b.eq, false) &&
            (same_coll || !collection_value_has_string(&b.eq)))
            score = 2;
        else if ((b.has_lower || b.has_upper) &&
                 (!b.has_lower || (collection_wildcard_value_ok(&b.lower, true) &&
                                   (same_coll || !collection_value_has_string(&b.lower)))) &&
                 (!b.has_upper || (collection_wildcard_value_ok(&b.upper, true) &&
                                   (same_coll || !collection_value_has_string(&b.upper)))))
            score = 1;
        if (score > best) {
            best = score;
            best_path = paths[i];
            bb = b;
        }
    }
    p->score = best;
    if (!best)
        return 0;
    snprintf(p->wc_path, sizeof p->wc_path, "%s", best_path);
    wildcard_append_path(&p->prefix, best_path);
    if (best == 2) {
        keystring_append_coll(&p->prefix, &bb.eq, false, ix->collation);
        buf_append(&p->lo, p->prefix.data, p->prefix.len);
        return best;
    }
    buf_append(&p->lo, p->prefix.data, p->prefix.len);
    if (bb.has_lower)
        keystring_append_coll(&p->lo, &bb.lower, false, ix->collation);
    /* an array's elements may meet the two bounds separately */
    if (bb.has_upper && !(wildcard_path_multikey(ix->wildcard, best_path) && bb.has_lower)) {
        buf_append(&p->hi, p->prefix.data, p->prefix.len);
        keystring_append_coll(&p->hi, &bb.upper, false, ix->collation);
        p->has_hi = true;
    }
    return best;
}

/* A {path: {$in: [...]}} on the hashed field `f` of `ix`, as mongod's
 * hashed bounds: one point per distinct hash (values hashing alike, 1 and
 * 1.0 or colliding ones, give one), in index order; the fetched documents
 * are matched against the whole filter, so collisions are harmless. An
 * array in the list gives no point (a hashed field never holds one: such
 * documents are refused, 16766); a regex, or strings under another
 * collation than the index's, make the index unusable. Appends the first
 * point to p->prefix and keeps the others in p->alts. */
static bool collection_plan_hashed_in(index_t *ix, int f, const matcher_t *m, bool same_coll,
                                      scan_plan_t *p)
{
    const bson_value_t *vals;
    size_t n;
    if (p->alts || !matcher_in_values(m, ix->paths[f], &vals, &n))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!same_coll && collection_value_has_string(&vals[i]))
            return false;
    buf_t *alts = bson_malloc0((n ? n : 1) * sizeof *alts);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (vals[i].value_type == BSON_TYPE_ARRAY)
            continue;
        buf_init(&alts[k]);
        index_append_key_part(ix, f, &vals[i], &alts[k++]);
    }
    size_t w = buf_sort_unique(alts, k);
    p->alts = alts;
    p->nalts = w;
    p->alt_off = p->prefix.len;
    p->alt_len = w ? alts[0].len : 0;
    if (w)
        buf_append(&p->prefix, alts[0].data, alts[0].len);
    return true;
}

/* Works out the bounds `m` allows on `ix`; returns the plan's score (0 =
 * the index narrows nothing). As mongod: bounds that hold strings are used
 * only when the query's collation is the index's. */
static int collection_plan_index(index_t *ix, const matcher_t *m, scan_plan_t *p)
{
    bool same_coll = collation_same(ix->collation, matcher_collation(m));
    buf_init_fixed(&p->lo, p->lo_room, sizeof p->lo_room);
    buf_init_fixed(&p->prefix, p->prefix_room, sizeof p->prefix_room);
    buf_init_fixed(&p->hi, p->hi_room, sizeof p->hi_room);
    p->ix = ix;
    p->has_hi = false;
    p->alts = NULL;
    p->nalts = 0;
    p->wc_path[0] = '\0';
    if (ix->wildcard)
        return collection_plan_wildcard(ix, m, p);
    int score = 0;
    for (int f = 0; f < ix->nfields; f++) {
        matcher_bounds_t b;
        bool bounded = matcher_bounds(m, ix->paths[f], &b);
        if (f == ix->hashed) { /* a hash serves equality and $in only */
            if (bounded && b.has_eq && collection_value_indexable(&b.eq) &&
                (same_coll || !collection_value_has_string(&b.eq))) {
                index_append_key_part(ix, f, &b.eq, &p->prefix);
                score += 2;
                continue;
            }
            if (!collection_plan_hashed_in(ix, f, m, same_coll, p))
                break;
            score += 2;
            continue;
        }
        if (!bounded)
            break;
        bool desc = ix->dirs[f] < 0;
        if (!same_coll && ((b.has_eq && collection_value_has_string(&b.eq)) ||
                           (b.has_lower && collection_value_has_string(&b.lower)) ||
                           (b.has_upper && collection_value_has_string(&b.upper))))
            break;
        if (b.has_eq && collection_value_indexable(&b.eq)) {
            keystring_append_coll(&p->prefix, &b.eq, desc, ix->collation);
            score += 2;
            continue;
        }
        if (!b.has_lower && !b.has_upper)
            break;
        /* a range on this field ends the usable prefix */
        p->has_hi = index_append_range(ix, f, &b, &p->prefix, &p->lo, &p->hi);
        p->score = score + 1;
        return p->score;
    }
    buf_append(&p->lo, p->prefix.data, p->prefix.len);
    p->score = score;
    return score;
}

/* True when `ix` delivers documents in `sort` order (forward or, with
 * *reverse, backward). */
static bool collection_index_sorts(const index_t *ix, const sortspec_t *sort, bool *reverse)
{
    int n = sortspec_nkeys(sort);
    if (n == 0 || n > ix->nfields || ix->multikey || ix->sparse || ix->partial || ix->hidden ||
        (ix->hashed >= 0 && ix->hashed < n) || /* hash order is no value order */
        ix->is_2dsphere || ix->geo2d)
        return false;
    if (!collation_same(ix->collation, sortspec_collation(sort)))
        return false; /* strings would come in the index's order, not the sort's */
    int flip = 0;
    for (int i = 0; i < n; i++) {
        int dir;
        const char *path = sortspec_key(sort, i, &dir);
        if (!path || strcmp(path, ix->paths[i]) != 0)
            return false;
        int f = dir == ix->dirs[i] ? 1 : -1;
        if (flip == 0)
            flip = f;
        else if (flip != f)
            return false;
    }
    *reverse = flip < 0;
    return true;
}

static int collection_sort_cmp(const void *a, const void *b, void *ctx)
{
    const record_t *x = *(record_t *const *)a, *y = *(record_t *const *)b;
    bson_t dx, dy;
    record_view(x, &dx);
    record_view(y, &dy);
    return sortspec_compare(ctx, &dx, &dy);
}

static bool collection_has_index(const collection_t *c, const index_t *ix)
{
    for (int i = 0; i < c->nindexes; i++)
        if (c->indexes[i] == ix)
            return true;
    return false;
}

/* Counts record `r` as examined and adds it to `out` when it matches the
 * query's filter; true when it does. */
static bool collection_examine(const collection_query_opts_t *o, record_t *r, recvec_t *out,
                               collection_plan_t *plan)
{
    plan->docs_examined++;
    bson_t doc;
    record_view(r, &doc);
    if (!matcher_matches(o->matcher, &doc, NULL))
        return false;
    recvec_push_ref(out, r);
    return true;
}

/* After a scan that yielded: adds, for each document of `c` whose first
 * change since `snap` came after the scan passed it, the version the
 * snapshot saw (the one that change replaced), unless the scan already
 * returned it. Returns how many it added. */
static size_t collection_scan_add_replaced(collection_t *c, const collection_query_opts_t *o,
                                           uint64_t snap, size_t first, recvec_t *out,
                                           collection_plan_t *plan)
{
    size_t n, added = 0;
    const mvcc_change_t *ch = mvcc_changes_after(snap, &n);
    seen_record_t *want = NULL, *have = NULL;
    /* a change whose `before` was made at or before the snapshot is that
     * document's first change since it */
    for (size_t i = 0; i < n; i++)
        if (ch[i].coll_id == c->id && ch[i].before && record_seq(ch[i].before) <= snap)
            seen_add(&want, ch[i].before);
    if (!want)
        return 0;
    for (size_t i = first; i < out->len; i++) {
        seen_record_t *e;
        const void *r = out->items[i];
        HASH_FIND_PTR(want, &r, e);
        if (e)
            seen_add(&have, r);
    }
    for (size_t i = 0; i < n; i++) {
        record_t *r = ch[i].before;
        if (ch[i].coll_id != c->id || !r || record_seq(r) > snap || !seen_add(&have, r))
            continue;
        if (collection_examine(o, r, out, plan))
            added++;
    }
    seen_clear(&want);
    seen_clear(&have);
    return added;
}

/* Visits records of an index scan in key order, matching each. On a
 * fiber it gives the loop back between slices (util/fiber.h): at its
 * first yield it opens an mvcc snapshot, afterwards it goes on from the
 * key it stopped at, skips versions made since, and at the end adds the
 * snapshot's versions of documents changed behind it, so the whole scan
 * reads one snapshot. *unordered is set when such versions were added
 * out of key order. False when the operation was killed or timed out, or
 * the index was dropped meanwhile (QueryPlanKilled 175). */
static bool collection_run_scan(collection_t *c, const scan_plan_t *p,
                                const collection_query_opts_t *o, bool stop_early, int64_t want,
                                recvec_t *out, collection_plan_t *plan, bool *unordered,
                                dberr_t *err)
{
    seen_record_t *seen = NULL;
    size_t first = out->len;
    uint64_t snap = 0;
    bool ok = true;
    bool done = false;
    buf_t at, lo_alt, prefix_alt, hi_alt;
    buf_init(&at);
    buf_init(&lo_alt);
    buf_init(&prefix_alt);
    buf_init(&hi_alt);
    /* one range, or one per $in point of a hashed field, in index order */
    for (size_t ri = 0; ri < scan_plan_nranges(p) && !done; ri++) {
        const buf_t *lo = scan_plan_splice(p, &p->lo, ri, &lo_alt);
        const buf_t *prefix = scan_plan_splice(p, &p->prefix, ri, &prefix_alt);
        const buf_t *hi = scan_plan_splice(p, &p->hi, ri, &hi_alt);
        btree_pos_t n;
        bool more = btree_seek(p->ix->map, lo->len ? lo->data : NULL, lo->len, &n);
        for (; more; more = btree_next(&n)) {
            size_t klen;
            const uint8_t *key = btree_pos_key(&n, &klen);
            if (fiber_running && (plan->keys_examined & 15) == 0 && fiber_due()) {
                /* give the loop back; go on from this key afterwards */
                at.len = 0;
                buf_append(&at, key, klen);
                if (!snap)
                    snap = mvcc_snapshot_open();
                uint64_t y = fiber_yields(fiber_running);
                if (!fiber_check(err)) {
                    ok = false;
                    done = true;
                    break;
                }
                if (fiber_yields(fiber_running) != y) {
                    if (!collection_has_index(c, p->ix)) {
                        ok = dberr_set(err, 175, "index '%s' dropped", p->ix->name);
                        done = true;
                        break;
                    }
                    if (!btree_seek(p->ix->map, at.data, at.len, &n))
                        break;
                    key = btree_pos_key(&n, &klen);
                }
            }
            if (prefix->len &&
                (klen < prefix->len || memcmp(key, prefix->data, prefix->len) != 0))
                break;
            if (p->has_hi) {
                size_t cmpn = klen < hi->len ? klen : hi->len;
                if (memcmp(key, hi->data, cmpn) > 0)
                    break;
            }
            plan->keys_examined++;
            record_t *r = btree_pos_value(&n);
            if (snap && record_seq(r) > snap)
                continue; /* made since the snapshot: its older version comes at the end */
            if (p->ix->multikey && !seen_add(&seen, r))
                continue;
            if (!collection_examine(o, r, out, plan))
                continue;
            if (stop_early && want > 0 && (int64_t)out->len - (int64_t)first >= want) {
                done = true;
                break;
            }
        }
    }
    buf_destroy(&lo_alt);
    buf_destroy(&prefix_alt);
    buf_destroy(&hi_alt);
    seen_clear(&seen);
    buf_destroy(&at);
    if (snap) {
        if (ok && collection_scan_add_replaced(c, o, snap, first, out, plan))
            *unordered = true;
        mvcc_snapshot_close(snap);
    }
    return ok;
}

/* True when bound `q` (the query's) lies inside bound `p` (the partial
 * filter's) on one side: lower (`upper` false) or upper. */
static bool collection_bound_within(bool p_has, const bson_value_t *p, bool p_incl, bool q_has,
                                    const bson_value_t *q, bool q_incl, bool upper)
{
    if (!p_has)
        return true;
    if (!q_has || compare_type_rank(p->value_type) != compare_type_rank(q->value_type))
        return false;
    int c = compare_values(q, p);
    if (upper)
        c = -c;
    return c > 0 || (c == 0 && (p_incl || !q_incl));
}

/* True when every document the query `m` can match is in partial index
 * `ix`: each top-level predicate of its partialFilterExpression is implied
 * by the query's bounds on the same path (equality, ranges, $exists:
 * true). Anything the check cannot follow ($or, $in...) counts as not
 * implied, so the planner never uses a partial index that would miss
 * documents. */
static bool collection_partial_implied(const index_t *ix, const matcher_t *m)
{
    bson_iter_t it, f;
    if (!bson_iter_init_find(&it, &ix->spec, "partialFilterExpression") ||
        !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &f))
        return false;
    while (bson_iter_next(&f)) {
        const char *path = bson_iter_key(&f);
        if (path[0] == '$')
            return false;
        matcher_bounds_t qb, pb;
        if (!matcher_bounds(m, path, &qb))
            return false;
        bson_iter_t op;
        if (BSON_ITER_HOLDS_DOCUMENT(&f) && bson_iter_recurse(&f, &op) && bson_iter_next(&op) &&
            !strcmp(bson_iter_key(&op), "$exists")) {
            /* $exists: true holds when the query bounds the path by a non-null value */
            if (!bson_iter_as_bool(&op) || bson_iter_next(&op))
                return false;
            if (qb.has_eq ? qb.eq.value_type == BSON_TYPE_NULL : !qb.has_lower && !qb.has_upper)
                return false;
            continue;
        }
        if (!matcher_bounds(ix->partial, path, &pb))
            return false;
        if (pb.has_eq) {
            if (!qb.has_eq || compare_type_rank(qb.eq.value_type) !=
                                  compare_type_rank(pb.eq.value_type) ||
                compare_values(&qb.eq, &pb.eq) != 0)
                return false;
            continue;
        }
        bool lo_has = qb.has_eq || qb.has_lower, hi_has = qb.has_eq || qb.has_upper;
        const bson_value_t *lo = qb.has_eq ? &qb.eq : &qb.lower;
        const bson_value_t *hi = qb.has_eq ? &qb.eq : &qb.upper;
        bool lo_incl = qb.has_eq || qb.lower_inclusive, hi_incl = qb.has_eq || qb.upper_inclusive;
        if (!collection_bound_within(pb.has_lower, &pb.lower, pb.lower_inclusive, lo_has, lo,
                                     lo_incl, false) ||
            !collection_bound_within(pb.has_upper, &pb.upper, pb.upper_inclusive, hi_has, hi,
                                     hi_incl, true))
            return false;
    }
    return true;
}

static index_t *collection_hinted(collection_t *c, const collection_query_opts_t *o, dberr_t *err)
{
    for (int i = 0; i < c->nindexes; i++) {
        if (c->indexes[i]->hidden)
            continue; /* as mongod: a hidden index cannot be hinted */
        if (o->hint_name && strcmp(c->indexes[i]->name, o->hint_name) == 0)
            return c->indexes[i];
        if (o->hint && index_key_equals(c->indexes[i], o->hint))
            return c->indexes[i];
    }
    dberr_set(err, DBERR_BAD_VALUE, "hint provided does not correspond to an existing index");
    return NULL;
}

/* A hint by key pattern that several wildcard indexes share (other
 * projections): as mongod, any of them that answers the filter serves.
 * Replaces `best` (score 0) with the first that does. */
static bool collection_hinted_wildcard(collection_t *c, const collection_query_opts_t *o,
                                       scan_plan_t *best)
{
    for (int i = 0; i < c->nindexes; i++) {
        index_t *ix = c->indexes[i];
        if (ix->hidden || !ix->wildcard || ix == best->ix || !index_key_equals(ix, o->hint))
            continue;
        scan_plan_t p;
        if (collection_plan_index(ix, o->matcher, &p) > 0) {
            scan_plan_destroy(best);
            scan_plan_move(best, &p);
            return true;
        }
        scan_plan_destroy(&p);
    }
    return false;
}

/* The _id of a stored version (every record has one). */
static bool collection_record_id(const record_t *r, bson_value_t *id)
{
    bson_t doc;
    record_view(r, &doc);
    return collection_doc_id(&doc, id);
}

bool collection_changed_since(const collection_t *c, const bson_value_t *id, uint64_t snapshot)
{
    record_t *cur = collection_find_id(c, id);
    if (cur)
        return record_seq(cur) > snapshot; /* any change since made a new version */
    if (!mvcc_deletes_after(snapshot))
        return false;
    size_t n;
    const mvcc_change_t *ch = mvcc_changes_after(snapshot, &n);
    for (size_t i = 0; i < n; i++) {
        bson_value_t x;
        if (ch[i].coll_id == c->id && !ch[i].after && collection_record_id(ch[i].before, &x) &&
            compare_equal(&x, id))
            return true;
    }
    return false;
}

static bool collection_query_opts_plain(collection_t *c, const collection_query_opts_t *o,
                                        recvec_t *out, collection_plan_t *plan, dberr_t *err);

/* A read as of an older snapshot: each document of the snapshot once, in
 * the snapshot's version. The current read (the normal plan, indexes
 * included) sees the store as it is when it starts, even when its scan
 * yields (it then reads one snapshot taken at its first yield, when
 * nothing else has run yet): it gives the versions of the documents
 * unchanged since the older snapshot (those made at or before it). The
 * changes made between the older snapshot and the start of the current
 * read give, for each document they touched, the version its first such
 * change replaced. A change made while the current read runs is left to
 * it: the version it replaced is the one the read already returns, so
 * counting it here too would list the document twice. */
static bool collection_query_snapshot(collection_t *c, const collection_query_opts_t *o,
                                      recvec_t *out, collection_plan_t *plan, dberr_t *err)
{
    collection_query_opts_t now = *o;
    now.snapshot = 0;
    now.skip = 0;
    now.limit = 0;
    now.sort = NULL;
    now.near_want = 0;
    recvec_t cur;
    recvec_init(&cur);
    uint64_t start = mvcc_current_seq();
    if (!collection_query_opts_plain(c, &now, &cur, plan, err)) {
        recvec_destroy(&cur);
        return false;
    }
    for (size_t i = 0; i < cur.len; i++)
        if (record_seq(cur.items[i]) <= o->snapshot)
            recvec_push_ref(out, cur.items[i]);
    recvec_destroy(&cur);
    size_t n;
    const mvcc_change_t *ch = mvcc_changes_after(o->snapshot, &n);
    omap_t *seen = NULL;
    buf_t key;
    buf_init(&key);
    for (size_t i = 0; i < n && ch[i].seq <= start; i++) {
        if (ch[i].coll_id != c->id)
            continue;
        bson_value_t id;
        if (!collection_record_id(ch[i].before ? ch[i].before : ch[i].after, &id))
            continue;
        key.len = 0;
        keystring_append(&key, &id, false);
        if (!seen)
            seen = omap_new();
        if (omap_get(seen, key.data, key.len))
            continue; /* not this document's first change since the snapshot */
        omap_insert(seen, key.data, key.len, (void *)1);
        if (!ch[i].before)
            continue; /* inserted since */
        collection_examine(o, ch[i].before, out, plan);
    }
    buf_destroy(&key);
    omap_destroy(seen, NULL);
    return true;
}

static bool collection_finish(recvec_t *out, size_t first, const collection_query_opts_t *o,
                              bool sort, bool reverse, dberr_t *err);

bool collection_query(collection_t *c, const collection_query_opts_t *o, recvec_t *out,
                      collection_plan_t *plan, dberr_t *err)
{
    collection_plan_t local;
    if (!plan)
        plan = &local;
    memset(plan, 0, sizeof *plan);
    plan->direction = 1;
    size_t first = out->len;
    bool need_sort = o->sort && sortspec_nkeys(o->sort) > 0;
    if (o->snapshot && o->snapshot < mvcc_current_seq()) {
        size_t n;
        mvcc_changes_after(o->snapshot, &n);
        if (n > 0) {
            if (!collection_query_snapshot(c, o, out, plan, err))
                return false;
            return collection_finish(out, first, o, need_sort, false, err);
        }
    }
    return collection_query_opts_plain(c, o, out, plan, err);
}

/* A $text query: the text index's records holding a query term, each
 * then matched against the whole filter (phrases, negations, the rest). */
static bool collection_query_text(collection_t *c, const collection_query_opts_t *o,
                                  fts_query_t *q, recvec_t *out, collection_plan_t *plan,
                                  dberr_t *err)
{
    index_t *ix = NULL;
    for (int i = 0; i < c->nindexes && !ix; i++)
        if (c->indexes[i]->text)
            ix = c->indexes[i];
    if (!ix)
        return dberr_set(err, DBERR_INDEX_NOT_FOUND, "text index required for $text query");
    if ((o->hint_name && strcmp(o->hint_name, ix->name)) ||
        (o->hint && !bson_empty(o->hint) && !index_key_equals(ix, o->hint)))
        return dberr_set(err, DBERR_BAD_VALUE, "hint provided does not correspond to the text "
                                               "index a $text query needs");
    if (!fts_query_bind(q, textindex_spec(ix->text), err))
        return false;
    size_t first = out->len;
    recvec_t cand;
    recvec_init(&cand);
    strcpy(plan->stage, "TEXT_MATCH");
    plan->index = ix;
    plan->text = q;
    plan->reason = "$text needs the text index";
    bool ok = textindex_scan(ix, q, o->matcher, &cand, &plan->keys_examined, err);
    /* the candidates are referenced: yielding between them is safe */
    for (size_t i = 0; ok && i < cand.len; i++) {
        if (!fiber_check(err)) {
            ok = false;
            break;
        }
        collection_examine(o, cand.items[i], out, plan);
    }
    recvec_destroy(&cand);
    if (!ok)
        return false;
    bool need_sort = o->sort && sortspec_nkeys(o->sort) > 0;
    return collection_finish(out, first, o, need_sort, false, err);
}

/* The geo index (2dsphere or 2d, geoscan_geo_field) the filter's
 * geospatial predicate on its geometry is scanned on: the hinted one, else
 * the first not hidden nor partial that is relevant (geoscan_relevant: its
 * geometry first, or a predicate on its first field) and bounds the
 * predicate (geoscan_bounded); NULL when none (a hint to a geo index no
 * predicate bounds fails as mongod's planner: BadValue). */
static index_t *collection_geo_index(collection_t *c, const collection_query_opts_t *o,
                                     const geo_pred_t **pred, dberr_t *err)
{
    if (o->hint_name || (o->hint && !bson_empty(o->hint))) {
        index_t *ix = collection_hinted(c, o, err);
        if (!ix || geoscan_geo_field(ix) < 0)
            return NULL;
        *pred = matcher_geo_on(o->matcher, ix->paths[geoscan_geo_field(ix)]);
        if (*pred && geoscan_bounded(ix, *pred))
            return ix;
        dberr_set(err, DBERR_BAD_VALUE,
                  "error processing query: ns=%s planner returned error :: caused by :: hint "
                  "provided does not correspond to an existing index",
                  c->ns);
        return NULL;
    }
    for (int i = 0; i < c->nindexes; i++) {
        index_t *ix = c->indexes[i];
        if (ix->hidden || ix->partial || geoscan_geo_field(ix) < 0 ||
            !geoscan_relevant(ix, o->matcher))
            continue;
        *pred = matcher_geo_on(o->matcher, ix->paths[geoscan_geo_field(ix)]);
        if (*pred && geoscan_bounded(ix, *pred))
            return ix;
    }
    return NULL;
}

/* Matches the candidates `cand` into `out`; counts those whose $near
 * distance is at most `within` (< 0: none counted) into `*close`. */
static bool collection_geo_match(const collection_query_opts_t *o, const recvec_t *cand,
                                 double within, recvec_t *out, size_t *close,
                                 collection_plan_t *plan, dberr_t *err)
{
    for (size_t i = 0; i < cand->len; i++) {
        if ((i & 15) == 15 && !fiber_check(err)) /* the candidates are referenced */
            return false;
        bson_t doc;
        record_view(cand->items[i], &doc);
        plan->docs_examined++;
        if (!matcher_matches(o->matcher, &doc, NULL))
            continue;
        recvec_push_ref(out, cand->items[i]);
        if (within >= 0 && matcher_near_distance(o->matcher, &doc) <= within)
            (*close)++;
    }
    return true;
}

/* A compound 2dsphere index whose leading fields give a range (not
 * points, geoscan_bounds_t): that range of its keys read as any index
 * scan (in slices, at one snapshot), each document once, matched against
 * the whole filter; the caller orders a $near by distance. */
static bool collection_query_geo_range(collection_t *c, const collection_query_opts_t *o,
                                       index_t *ix, const geoscan_bounds_t *gb, recvec_t *out,
                                       collection_plan_t *plan, dberr_t *err)
{
    scan_plan_t sp = {0};
    buf_init(&sp.lo);
    buf_init(&sp.prefix);
    buf_init(&sp.hi);
    sp.ix = ix;
    buf_append(&sp.lo, gb->lo.data, gb->lo.len);
    buf_append(&sp.prefix, gb->prefix.data, gb->prefix.len);
    buf_append(&sp.hi, gb->hi.data, gb->hi.len);
    sp.has_hi = gb->has_hi;
    bool unordered = false;
    bool ok = collection_run_scan(c, &sp, o, false, 0, out, plan, &unordered, err);
    scan_plan_destroy(&sp);
    return ok;
}

/* A geospatial query on the geo index `ix`: the key ranges covering the
 * predicate's region (under the bounds of a compound 2dsphere index's
 * leading fields); a $near without $maxDistance scans caps that
 * double in radius until the nearest near_want matches lie inside one
 * (every match outside is farther), the whole sphere without a limit. */
static bool collection_query_geo(collection_t *c, const collection_query_opts_t *o, index_t *ix,
                                 const geo_pred_t *pred, recvec_t *out, collection_plan_t *plan,
                                 dberr_t *err)
{
    size_t first = out->len;
    /* as mongod: a $near on a 2d index is its own stage */
    strcpy(plan->stage, ix->geo2d && geo_pred_is_near(pred) ? "GEO_NEAR_2D" : "IXSCAN");
    plan->index = ix;
    plan->reason = o->hint_name || o->hint ? "the index the hint names"
                   : ix->geo2d             ? "the 2d index bounds the geospatial predicate"
                                           : "the 2dsphere index bounds the geospatial predicate";
    recvec_t cand;
    recvec_init(&cand);
    bool ok;
    geoscan_bounds_t gb; /* the fields before the geometry of a compound index */
    geoscan_bounds_init(&gb, ix, o->matcher);
    if (!gb.points) { /* a range of the leading fields: read as any index scan, in slices */
        ok = collection_query_geo_range(c, o, ix, &gb, out, plan, err);
    } else if (geoscan_candidates_in(ix, &gb, pred, -1, &cand, &plan->keys_examined)) {
        size_t close = 0;
        ok = collection_geo_match(o, &cand, -1, out, &close, plan, err);
    } else {
        double whole = geoscan_near_whole(ix, pred);
        double r = o->near_want > 0 ? whole / 65536 : whole;
        for (;;) {
            size_t close = 0;
            geoscan_candidates_in(ix, &gb, pred, r, &cand, &plan->keys_examined);
            ok = collection_geo_match(o, &cand, r, out, &close, plan, err);
            recvec_destroy(&cand);
            recvec_init(&cand);
            if (!ok || r >= whole || (int64_t)close >= o->near_want)
                break;
            for (size_t i = first; i < out->len; i++) /* drops what this cap found */
                record_unref(out->items[i]);
            out->len = first;
            r = r * 2 < whole ? r * 2 : whole;
        }
    }
    recvec_destroy(&cand);
    geoscan_bounds_destroy(&gb);
    if (!ok)
        return false;
    bool need_sort = o->sort && sortspec_nkeys(o->sort) > 0;
    return collection_finish(out, first, o, need_sort, false, err);
}

/* A {$natural: 1|-1} sort or hint: *dir 1 or -1 (0: neither). A $natural
 * sort with other keys is refused (not yet). */
static bool collection_natural_dir(const collection_query_opts_t *o, int *dir, dberr_t *err)
{
    bson_iter_t it;
    *dir = 0;
    if (o->hint && bson_iter_init(&it, o->hint) && bson_iter_next(&it) &&
        !strcmp(bson_iter_key(&it), "$natural")) {
        *dir = BSON_ITER_HOLDS_NUMBER(&it) && bson_iter_as_double(&it) < 0 ? -1 : 1;
    }
    int n = o->sort ? sortspec_nkeys(o->sort) : 0;
    for (int i = 0; i < n; i++) {
        int d;
        if (strcmp(sortspec_key(o->sort, i, &d), "$natural") != 0)
            continue;
        if (n > 1)
            return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                             "atomdb does not support a $natural sort with other keys yet");
        *dir = d < 0 ? -1 : 1;
    }
    return true;
}

/* Visits a capped collection in natural (insertion) order, matching each
 * record. On a fiber it gives the loop back between slices and goes on
 * after the position it stopped at (documents inserted meanwhile come
 * after it, as a tailable cursor sees them). */
static bool collection_run_natural(collection_t *c, const collection_query_opts_t *o,
                                   int64_t want, recvec_t *out, collection_plan_t *plan,
                                   dberr_t *err)
{
    size_t first = out->len;
    uint64_t pos = 0;
    for (;;) {
        /* a yield may remove records: fetch the next one after it */
        if ((plan->docs_examined & 15) == 15 && !fiber_check(err))
            return false;
        record_t *r = c->capped ? capped_next(c->capped, pos, &pos) : NULL;
        if (!r)
            break;
        if (collection_examine(o, r, out, plan) && want > 0 &&
            (int64_t)out->len - (int64_t)first >= want)
            break;
    }
    return true;
}

/* The latest data, by the best plan. */
static bool collection_query_opts_plain(collection_t *c, const collection_query_opts_t *o,
                                        recvec_t *out, collection_plan_t *plan, dberr_t *err)
{
    fts_query_t *text = matcher_text(o->matcher);
    if (text)
        return collection_query_text(c, o, text, out, plan, err);
    size_t first = out->len;
    bool need_sort = o->sort && sortspec_nkeys(o->sort) > 0;
    int64_t want = o->limit > 0 ? o->skip + o->limit : 0;
    int natural = 0;
    if (!collection_natural_dir(o, &natural, err))
        return false;
    if (natural && o->sort && sortspec_nkeys(o->sort) == 1 &&
        !strcmp(sortspec_key(o->sort, 0, NULL), "$natural"))
        need_sort = false; /* the $natural sort is the scan's order */
    if (!natural) {
        const geo_pred_t *pred = NULL;
        dberr_t why = {0};
        index_t *gix = collection_geo_index(c, o, &pred, &why);
        if (gix)
            return collection_query_geo(c, o, gix, pred, out, plan, err);
        if (why.code) {
            *err = why;
            return false;
        }
    }
    if (natural && c->capped) {
        strcpy(plan->stage, "COLLSCAN");
        plan->direction = natural;
        plan->reason = "$natural: the capped collection in insertion order";
        if (!collection_run_natural(c, o, natural > 0 && !need_sort ? want : 0, out, plan, err))
            return false;
        return collection_finish(out, first, o, need_sort, !need_sort && natural < 0, err);
    }
    /* choose */
    scan_plan_t best = {0};
    bool have_best = false;
    bool reverse = false;
    bool use_hint = !natural && (o->hint_name || (o->hint && !bson_empty(o->hint)));
    if (natural) {
        /* not capped: atomdb stores documents in _id order, its natural order */
        collection_plan_index(c->indexes[0], o->matcher, &best);
        strcpy(plan->stage, "COLLSCAN");
        plan->direction = natural;
        plan->reason = "$natural: the collection in storage (_id) order";
        bool unordered = false;
        bool ok = collection_run_scan(c, &best, o, natural > 0 && !need_sort, want, out, plan,
                                      &unordered, err);
        scan_plan_destroy(&best);
        return ok && collection_finish(out, first, o, need_sort, !need_sort && natural < 0, err);
    }
    if (use_hint) {
        index_t *ix = collection_hinted(c, o, err);
        if (!ix)
            return false;
        if (ix->wildcard && collection_plan_index(ix, o->matcher, &best) == 0 &&
            !(o->hint && !o->hint_name && collection_hinted_wildcard(c, o, &best))) {
            /* as mongod: the planner finds no plan on a $** index for it */
            scan_plan_destroy(&best);
            return dberr_set(err, DBERR_BAD_VALUE,
                             "error processing query: ns=%s planner returned error :: caused "
                             "by :: hint provided does not correspond to an existing index",
                             c->ns);
        }
        if (!ix->wildcard)
            collection_plan_index(ix, o->matcher, &best);
        have_best = true;
    } else {
        for (int i = 0; i < c->nindexes; i++) {
            index_t *ix = c->indexes[i];
            if (ix->hidden || ix->sparse || ix->is_2dsphere || ix->geo2d ||
                (ix->partial && !collection_partial_implied(ix, o->matcher)))
                continue;
            scan_plan_t p;
            int score = collection_plan_index(ix, o->matcher, &p);
            bool better = score > 0 && (!have_best || score > best.score ||
                                        (score == best.score && ix->nfields < best.ix->nfields));
            if (better) {
                if (have_best)
                    scan_plan_destroy(&best);
                scan_plan_move(&best, &p);
                have_best = true;
            } else {
                scan_plan_destroy(&p);
            }
        }
        if (!have_best && need_sort) {
            for (int i = 0; i < c->nindexes; i++) {
                if (collection_index_sorts(c->indexes[i], o->sort, &reverse)) {
                    collection_plan_index(c->indexes[i], o->matcher, &best);
                    have_best = true;
                    break;
                }
            }
        }
    }
    if (!have_best && collection_notablescan() && !matcher_is_empty(o->matcher) &&
        strcmp(c->db, "admin") && strcmp(c->db, "local") && strcmp(c->db, "config") &&
        strncmp(c->name, "system.", 7))
        return dberr_set(err, 291 /* NoQueryExecutionPlans */,
                         "error processing query: ns=%s planner returned error :: caused by :: "
                         "No indexed plans available, and running with 'notablescan'",
                         c->ns);
    if (!have_best && c->capped && !need_sort) {
        strcpy(plan->stage, "COLLSCAN");
        plan->reason = "no index bounds the filter: the capped collection in natural order";
        if (!collection_run_natural(c, o, want, out, plan, err))
            return false;
        return collection_finish(out, first, o, false, false, err);
    }
    if (!have_best) {
        collection_plan_index(c->indexes[0], o->matcher, &best); /* full _id scan */
        strcpy(plan->stage, "COLLSCAN");
        plan->reason = "no index bounds the filter or gives the sort";
    } else if (best.ix->is_id && best.score == 2 && !use_hint) {
        strcpy(plan->stage, "IDHACK");
        plan->index = best.ix;
        plan->reason = "equality on _id";
    } else {
        strcpy(plan->stage, "IXSCAN");
        plan->index = best.ix;
        memcpy(plan->wildcard_path, best.wc_path, sizeof plan->wildcard_path);
        plan->reason = use_hint                ? "the index the hint names"
                       : best.score == 0       ? "the index's order gives the sort"
                       : best.ix->partial      ? "the index bounds the filter best; the filter "
                                                 "implies the index's partialFilterExpression"
                                               : "the index bounds the filter best";
    }
    /* with no equality prefix the scan runs in the index's own order */
    bool sorted = need_sort && best.prefix.len == 0 &&
                  collection_index_sorts(best.ix, o->sort, &reverse);
    plan->sorted_by_index = sorted;
    plan->direction = sorted && reverse ? -1 : 1;
    bool stop_early = (!need_sort || sorted) && !reverse;
    bool unordered = false;
    bool ok = collection_run_scan(c, &best, o, stop_early, want, out, plan, &unordered, err);
    scan_plan_destroy(&best);
    if (!ok)
        return false;
    if (unordered && sorted) /* versions added behind the index order: sort them in */
        return collection_finish(out, first, o, true, false, err);
    return collection_finish(out, first, o, need_sort && !sorted, sorted && reverse, err);
}

bool collection_sort_memory_check(const recvec_t *out, size_t first,
                                  const collection_query_opts_t *o, dberr_t *err)
{
    if (o->sort_max_bytes <= 0)
        return true;
    /* what a blocking sort holds: every input document, or the top
     * skip+limit of them with a limit (mongod's top-k sort) */
    size_t n = out->len - first, keep = n;
    if (o->limit > 0 && (uint64_t)o->skip + (uint64_t)o->limit < n)
        keep = (size_t)(o->skip + o->limit);
    int64_t bytes = 0;
    for (size_t i = 0; i < keep; i++) {
        bytes += (int64_t)record_len(out->items[first + i]) + (int64_t)sizeof(bson_t);
        if (bytes > o->sort_max_bytes)
            return dberr_set(err, DBERR_QUERY_EXCEEDED_MEMORY_NO_DISK,
                             o->allow_disk_use
                                 ? "Executor error during find command :: caused by :: Sort "
                                   "exceeded memory limit of %lld bytes, and atomdb cannot sort "
                                   "externally: allowDiskUse is not implemented (raise "
                                   "internalQueryMaxBlockingSortMemoryUsageBytes, add a limit or "
                                   "an index that gives the sort)"
                                 : "Executor error during find command :: caused by :: Sort "
                                   "exceeded memory limit of %lld bytes, but did not opt in to "
                                   "external sorting.",
                             (long long)o->sort_max_bytes);
    }
    return true;
}

/* Sorts (or reverses) the records appended after `first`, checks the
 * sort's memory cap, then applies skip and limit. */
static bool collection_finish(recvec_t *out, size_t first, const collection_query_opts_t *o,
                              bool sort, bool reverse, dberr_t *err)
{
    size_t n = out->len - first;
    record_t **items = n ? out->items + first : NULL; /* items may be NULL when empty */
    if (reverse) {
        for (size_t i = 0; i < n / 2; i++) {
            record_t *t = items[i];
            items[i] = items[n - 1 - i];
            items[n - 1 - i] = t;
        }
    } else if (sort && n > 1) {
        qsort_r(items, n, sizeof *items, collection_sort_cmp, (void *)o->sort);
        if (!collection_sort_memory_check(out, first, o, err))
            return false;
    }
    recvec_skip_limit(out, first, o->skip, o->limit);
    return true;
}

