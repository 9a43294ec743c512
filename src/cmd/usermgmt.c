/* usermgmt: the steps the user commands (users.c) and the role commands
 * (roles.c) take alike, over admin.system.users and admin.system.roles. */
#include "cmd/usermgmt.h"

#include <stdio.h>

/* How each kind is found, and how mongod words its absence (from the name
 * and the db). */
static const struct {
    record_t *(*find)(const char *db, const char *name);
    int missing_code;
    const char *missing_fmt;
} usermgmt_kinds[] = {
    [USERMGMT_USER] = {access_find_user, 11, "Could not find user \"%s\" for db \"%s\""},
    [USERMGMT_ROLE] = {access_find_role, 31, "Role %s@%s not found"},
};

record_t *usermgmt_existing(const cmd_ctx_t *ctx, usermgmt_kind_t kind, const char *name,
                            dberr_t *err)
{
    record_t *r = usermgmt_kinds[kind].find(ctx->db, name);
    if (!r)
        dberr_set(err, usermgmt_kinds[kind].missing_code, usermgmt_kinds[kind].missing_fmt, name,
                  ctx->db);
    return r;
}

bool usermgmt_required(const cmd_ctx_t *ctx, const char *key, bson_iter_t *it, dberr_t *err)
{
    if (!cmd_find(ctx, key, it))
        return dberr_set(err, 40414, "BSON field '%s.%s' is missing but a required field",
                         ctx->name, key);
    return true;
}

bool usermgmt_each_name(const bson_iter_t *arg,
                        bool (*fn)(const bson_iter_t *name, void *fn_arg, dberr_t *err),
                        void *fn_arg, dberr_t *err)
{
    bson_iter_t el;
    if (!BSON_ITER_HOLDS_ARRAY(arg))
        return fn(arg, fn_arg, err);
    if (bson_iter_recurse(arg, &el))
        while (bson_iter_next(&el))
            if (!fn(&el, fn_arg, err))
                return false;
    return true;
}

void usermgmt_drop_all(cmd_ctx_t *ctx, collection_t *c,
                       void (*removed)(const char *db, const char *role))
{
    recvec_t recs;
    recvec_init(&recs);
    access_records_of_db(c, ctx->db, &recs);
    for (size_t i = 0; i < recs.len; i++) {
        char role[300] = ""; /* copied: the document goes with the record */
        bson_t doc;
        bson_iter_t it;
        record_view(recs.items[i], &doc);
        if (removed && bson_iter_init_find(&it, &doc, "role") && BSON_ITER_HOLDS_UTF8(&it))
            snprintf(role, sizeof role, "%s", bson_iter_utf8(&it, NULL));
        collection_remove(c, recs.items[i]);
        if (*role)
            removed(ctx->db, role);
    }
    BSON_APPEND_INT32(ctx->reply, "n", (int32_t)recs.len);
    recvec_destroy(&recs);
    access_changed();
}
