/* cappedcmds: convertToCapped and cloneCollectionAsCapped, as mongod 7
 * (capped_utils.cpp): the capped options from `size`, the collection's
 * other options kept, documents copied in natural order so the newest that
 * fit survive. */
#include <string.h>

#include "cmd/cmd-private.h"
#include "cmd/view.h"
#include "doc/matcher.h"
#include "store/capped.h"
#include "store/catalog.h"
#include "util/fiber.h"

/* Checks the command's fields (its own `extra` besides `size`) and builds
 * the capped options: {capped: true, size} then `from`'s other options. */
static bool cappedcmds_options(const cmd_ctx_t *ctx, const char *extra, const collection_t *from,
                               bson_t *out, dberr_t *err)
{
    bson_iter_t it, size;
    const char *cmd = bson_iter_key(&ctx->arg);
    bson_iter_init(&it, ctx->cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!cmd_is_generic_arg(k) && strcmp(k, "size") && (!extra || strcmp(k, extra)))
            return dberr_set(err, 40415, "BSON field '%s.%s' is an unknown field.", cmd, k);
    }
    if (!cmd_find(ctx, "size", &size))
        return dberr_set(err, 40414, "BSON field '%s.size' is missing but a required field", cmd);
    bson_t flag = BSON_INITIALIZER;
    BSON_APPEND_BOOL(&flag, "capped", true);
    bson_iter_t capped;
    bson_iter_init_find(&capped, &flag, "capped");
    bool ok = capped_parse_options(&capped, &size, NULL, out, err);
    bson_destroy(&flag);
    if (!ok)
        return false;
    bson_iter_init(&it, collection_options(from));
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "capped") && strcmp(k, "size") && strcmp(k, "max"))
            bson_append_value(out, k, -1, bson_iter_value(&it));
    }
    return true;
}

/* The source collection: NamespaceNotFound 26, or 166 for a view. */
static collection_t *cappedcmds_source(const cmd_ctx_t *ctx, cmd_target_t *t, dberr_t *err)
{
    if (!cmd_target(ctx, t, err))
        return NULL;
    if (!t->c) {
        dberr_set(err, DBERR_NAMESPACE_NOT_FOUND, "source collection %s does not exist", t->ns);
        return NULL;
    }
    if (collection_is_view(t->c)) {
        dberr_set(err, 166, "Namespace %s is a view, not a collection", t->ns);
        return NULL;
    }
    return t->c;
}

bool cmd_convert_to_capped(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_target_t t;
    collection_t *c = cappedcmds_source(ctx, &t, err);
    if (!c)
        return false;
    bson_t options = BSON_INITIALIZER;
    bool ok = cappedcmds_options(ctx, NULL, c, &options, err);
    if (ok) {
        /* mongod builds a new collection: only the _id index comes along */
        collection_drop_all_indexes(c);
        collection_set_options(c, &options);
        collection_capped_trim_now(c);
    }
    bson_destroy(&options);
    return ok;
}

bool cmd_clone_collection_as_capped(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_target_t t;
    bson_iter_t to_it;
    collection_t *src = cappedcmds_source(ctx, &t, err);
    if (!src)
        return false;
    if (!cmd_find(ctx, "toCollection", &to_it))
        return dberr_set(err, 40414,
                         "BSON field 'cloneCollectionAsCapped.toCollection' is "
                         "missing but a required field");
    if (!BSON_ITER_HOLDS_UTF8(&to_it))
        return cmd_wrong_type(err, &to_it, "type 'string'", "cloneCollectionAsCapped.toCollection");
    const char *to = bson_iter_utf8(&to_it, NULL);
    bson_t options = BSON_INITIALIZER, empty = BSON_INITIALIZER;
    matcher_t *all = NULL;
    recvec_t recs;
    recvec_init(&recs);
    collection_t *dst = NULL;
    bool ok = false;
    if (!cappedcmds_options(ctx, "toCollection", src, &options, err))
        goto cleanup;
    if (catalog_get(server.catalog, ctx->db, to)) {
        dberr_set(err, DBERR_NAMESPACE_EXISTS,
                  "cloneCollectionAsCapped failed - destination collection %s.%s already "
                  "exists. source: %s",
                  ctx->db, to, t.ns);
        goto cleanup;
    }
    /* the source's documents in natural order, held while the copy yields */
    collection_query_opts_t o = {0};
    if (!(all = cmd_matcher_new(ctx, &empty, err)))
        goto cleanup;
    o.matcher = all;
    if (!collection_query(src, &o, &recs, NULL, err))
        goto cleanup;
    if (!(dst = catalog_create(server.catalog, ctx->db, to, &options, err)))
        goto cleanup;
    for (size_t i = 0; i < recs.len; i++) {
        if ((i & 63) == 63 && !fiber_check(err))
            break;
        if (catalog_get(server.catalog, ctx->db, to) != dst) {
            dberr_set(err, DBERR_NAMESPACE_NOT_FOUND, "%s.%s was dropped during the copy", ctx->db,
                      to);
            dst = NULL;
            break;
        }
        bson_t doc;
        record_view(recs.items[i], &doc);
        if (!collection_insert(dst, &doc, err))
            break;
        if (i + 1 == recs.len)
            ok = true;
    }
    if (recs.len == 0)
        ok = true;
    if (!ok && dst) /* nothing half-copied stays behind */
        catalog_drop(server.catalog, ctx->db, to);
cleanup:
    matcher_destroy(all);
    recvec_destroy(&recs);
    bson_destroy(&options);
    return ok;
}
