/* roles: mongod's user-defined role commands — createRole, updateRole,
 * dropRole, dropAllRolesFromDatabase, rolesInfo, grantPrivilegesToRole,
 * revokePrivilegesFromRole, grantRolesToRole, revokeRolesFromRole — over
 * admin.system.roles ({_id: "db.role", role, db, privileges, roles}). */
#include "cmd/usermgmt.h"

#include <string.h>

/* The role name in the command's first value. */
static bool roles_name(cmd_ctx_t *ctx, const char **out, dberr_t *err)
{
    uint32_t len;
    if (!BSON_ITER_HOLDS_UTF8(&ctx->arg))
        return cmd_wrong_type(err, &ctx->arg, "type 'string'", "%s.%s", ctx->name, ctx->name);
    *out = bson_iter_utf8(&ctx->arg, &len);
    if (len == 0 || strlen(*out) != len || len > 256)
        return dberr_set(err, DBERR_BAD_VALUE, "Role name must be 1 to 256 bytes without NUL");
    if (strcmp(ctx->db, "$external") == 0 || strcmp(ctx->db, "local") == 0)
        return dberr_set(err, DBERR_BAD_VALUE, "Cannot create or change roles in the %s database",
                         ctx->db);
    return true;
}

/* Parses a privileges argument into `set`, checking that a role outside
 * admin only names its own database (as mongod). */
static bool roles_privileges(cmd_ctx_t *ctx, const bson_iter_t *it, priv_set_t *set, dberr_t *err)
{
    bson_iter_t el;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &el))
        return cmd_wrong_type(err, it, "type 'array'", "%s.privileges", ctx->name);
    while (bson_iter_next(&el)) {
        bson_t doc;
        if (!BSON_ITER_HOLDS_DOCUMENT(&el) || !cmd_iter_doc(&el, &doc))
            return dberr_set(err, DBERR_BAD_VALUE, "privileges must be objects");
        if (!priv_parse(&doc, set, err))
            return false;
    }
    if (strcmp(ctx->db, "admin") != 0)
        for (size_t i = 0; i < set->n; i++)
            if ((set->v[i].pattern != PRIV_NS && set->v[i].pattern != PRIV_DB) ||
                strcmp(set->v[i].db, ctx->db) != 0)
                return dberr_set(err, DBERR_BAD_VALUE,
                                 "Roles on the '%s' database cannot be granted privileges that "
                                 "target other databases or the cluster",
                                 ctx->db);
    return true;
}

/* Writes role db.role, holding `privs` and `roles`, as its document
 * (replacing `old` when not NULL). */
static bool roles_write(record_t *old, const char *db, const char *role, const priv_set_t *privs,
                        const bson_t *roles, dberr_t *err)
{
    bson_t doc = BSON_INITIALIZER, arr;
    char *id = bson_strdup_printf("%s.%s", db, role);
    BSON_APPEND_UTF8(&doc, "_id", id);
    bson_free(id);
    BSON_APPEND_UTF8(&doc, "role", role);
    BSON_APPEND_UTF8(&doc, "db", db);
    bson_append_array_begin(&doc, "privileges", -1, &arr);
    priv_set_append(privs, &arr);
    bson_append_array_end(&doc, &arr);
    BSON_APPEND_ARRAY(&doc, "roles", roles);
    bool ok = access_store(access_roles(true, err), old, &doc, err);
    bson_destroy(&doc);
    return ok;
}

/* Reads a {role, db} document under `it` into *role and *db (NULL when
 * missing; any other string field is taken as the db). */
static void roles_pair(const bson_iter_t *it, const char **role, const char **db)
{
    bson_iter_t f;
    *role = *db = NULL;
    if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &f))
        while (bson_iter_next(&f))
            if (BSON_ITER_HOLDS_UTF8(&f))
                *(strcmp(bson_iter_key(&f), "role") == 0 ? role : db) = bson_iter_utf8(&f, NULL);
}

/* Reads a stored role's privileges and roles. */
static void roles_read(record_t *r, priv_set_t *privs, bson_t *roles)
{
    bson_t doc, sub;
    bson_iter_t it, p;
    record_view(r, &doc);
    if (bson_iter_init_find(&it, &doc, "privileges") && bson_iter_recurse(&it, &p))
        while (bson_iter_next(&p)) {
            dberr_t ignored;
            if (cmd_iter_doc(&p, &sub))
                priv_parse(&sub, privs, &ignored);
        }
    if (bson_iter_init_find(&it, &doc, "roles") && cmd_iter_doc(&it, &sub))
        bson_copy_to(&sub, roles);
    else
        bson_init(roles);
}

/* True when `roles` (an array of {role, db}) reaches role@db. */
static bool roles_reaches(const bson_t *roles, const char *role, const char *db, int depth)
{
    bson_iter_t el;
    if (depth > 16 || !bson_iter_init(&el, roles))
        return false;
    while (bson_iter_next(&el)) {
        const char *r, *d;
        roles_pair(&el, &r, &d);
        if (!r || !d)
            continue;
        if (!strcmp(r, role) && !strcmp(d, db))
            return true;
        record_t *rec = access_find_role(d, r);
        if (rec) {
            priv_set_t ignored;
            bson_t sub;
            priv_set_init(&ignored);
            roles_read(rec, &ignored, &sub);
            bool hit = roles_reaches(&sub, role, db, depth + 1);
            bson_destroy(&sub);
            priv_set_destroy(&ignored);
            if (hit)
                return true;
        }
    }
    return false;
}

bool cmd_create_role(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"privileges", "roles", "authenticationRestrictions"};
    const char *role;
    bson_iter_t it;
    bool ok = false;
    priv_set_t privs;
    priv_set_init(&privs);
    bson_t roles = BSON_INITIALIZER;
    if (!cmd_only_fields(ctx, known, 3, err) || !roles_name(ctx, &role, err) ||
        !access_refuse_restrictions(ctx, err))
        goto cleanup;
    if (priv_is_builtin_role(role, ctx->db) || priv_is_builtin_role(role, "admin")) {
        dberr_set(err, 51, "Cannot create roles with the same name as a built-in role");
        goto cleanup;
    }
    if (!usermgmt_required(ctx, "privileges", &it, err) ||
        !roles_privileges(ctx, &it, &privs, err) || !usermgmt_required(ctx, "roles", &it, err) ||
        !access_role_list(ctx, &it, &roles, err))
        goto cleanup;
    if (access_find_role(ctx->db, role))
        dberr_set(err, 51002, "Role \"%s@%s\" already exists", role, ctx->db);
    else
        ok = roles_write(NULL, ctx->db, role, &privs, &roles, err);
cleanup:
    priv_set_destroy(&privs);
    bson_destroy(&roles);
    return ok;
}

/* What a role-changing command does to the stored role. */
typedef enum roles_change {
    ROLES_UPDATE, /* replace privileges and/or roles */
    ROLES_GRANT_PRIVS,
    ROLES_REVOKE_PRIVS,
    ROLES_GRANT_ROLES,
    ROLES_REVOKE_ROLES,
} roles_change_t;

/* The role-changing commands by what they do; cmd_change_role answers them
 * all. */
static const char *const roles_change_names[] = {[ROLES_UPDATE] = "updateRole",
                                                 [ROLES_GRANT_PRIVS] = "grantPrivilegesToRole",
                                                 [ROLES_REVOKE_PRIVS] = "revokePrivilegesFromRole",
                                                 [ROLES_GRANT_ROLES] = "grantRolesToRole",
                                                 [ROLES_REVOKE_ROLES] = "revokeRolesFromRole"};

bool cmd_change_role(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"privileges", "roles", "authenticationRestrictions"};
    roles_change_t what = ROLES_UPDATE;
    for (size_t i = 0; i < sizeof roles_change_names / sizeof roles_change_names[0]; i++)
        if (strcmp(ctx->name, roles_change_names[i]) == 0)
            what = (roles_change_t)i;
    const char *role;
    bson_iter_t pit, rit;
    bool ok = false;
    priv_set_t privs, given;
    priv_set_init(&privs);
    priv_set_init(&given);
    bson_t roles = BSON_INITIALIZER, roles_given = BSON_INITIALIZER, merged = BSON_INITIALIZER;
    if (!cmd_only_fields(ctx, known, 3, err) || !roles_name(ctx, &role, err) ||
        !access_refuse_restrictions(ctx, err))
        goto cleanup;
    bool has_p = cmd_find(ctx, "privileges", &pit), has_r = cmd_find(ctx, "roles", &rit);
    bool need_p = what == ROLES_GRANT_PRIVS || what == ROLES_REVOKE_PRIVS;
    bool need_r = what == ROLES_GRANT_ROLES || what == ROLES_REVOKE_ROLES;
    if ((need_p && !has_p) || (need_r && !has_r) || (what == ROLES_UPDATE && !has_p && !has_r)) {
        dberr_set(err, DBERR_BAD_VALUE, "%s: %s", ctx->name,
                  what == ROLES_UPDATE ? "Must specify at least one field to update in updateRole"
                                       : need_p ? "privileges is required" : "roles is required");
        goto cleanup;
    }
    bool revoking = what == ROLES_REVOKE_PRIVS || what == ROLES_REVOKE_ROLES;
    if (!access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL,
                        revoking ? ACT_REVOKE_ROLE : ACT_GRANT_ROLE) ||
        (what == ROLES_UPDATE &&
         !access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL, ACT_REVOKE_ROLE))) {
        access_refuse(ctx, err);
        goto cleanup;
    }
    if (has_p && (need_p || what == ROLES_UPDATE) && !roles_privileges(ctx, &pit, &given, err))
        goto cleanup;
    if (has_r && (need_r || what == ROLES_UPDATE) && !access_role_list(ctx, &rit, &roles_given, err))
        goto cleanup;
    record_t *r = usermgmt_existing(ctx, USERMGMT_ROLE, role, err);
    if (!r)
        goto cleanup;
    bson_destroy(&roles);
    roles_read(r, &privs, &roles);
    if ((what == ROLES_GRANT_ROLES || what == ROLES_UPDATE) &&
        roles_reaches(&roles_given, role, ctx->db, 0)) {
        dberr_set(err, 17, "Granting %s@%s would introduce a cycle in the role graph", role,
                  ctx->db);
        goto cleanup;
    }
    switch (what) {
    case ROLES_UPDATE:
        if (has_p) {
            priv_set_clear(&privs);
            priv_set_merge(&privs, &given);
        }
        if (has_r) {
            bson_destroy(&roles);
            bson_copy_to(&roles_given, &roles);
        }
        break;
    case ROLES_GRANT_PRIVS:
        priv_set_merge(&privs, &given);
        break;
    case ROLES_REVOKE_PRIVS:
        for (size_t i = 0; i < given.n; i++)
            priv_set_remove(&privs, given.v[i].pattern, given.v[i].db, given.v[i].coll,
                            given.v[i].actions);
        break;
    case ROLES_GRANT_ROLES:
    case ROLES_REVOKE_ROLES:
        access_role_list_change(&roles, &roles_given, what == ROLES_GRANT_ROLES, &merged);
        bson_destroy(&roles);
        bson_copy_to(&merged, &roles);
        break;
    }
    ok = roles_write(r, ctx->db, role, &privs, &roles, err);
cleanup:
    priv_set_destroy(&privs);
    priv_set_destroy(&given);
    bson_destroy(&roles);
    bson_destroy(&roles_given);
    bson_destroy(&merged);
    return ok;
}

typedef struct roles_all {
    collection_t *c;
    recvec_t recs;
} roles_all_t;

static bool roles_collect_all(const bson_t *doc, void *arg)
{
    roles_all_t *a = arg;
    bson_iter_t id;
    if (bson_iter_init_find(&id, doc, "_id")) {
        record_t *r = collection_find_id(a->c, bson_iter_value(&id));
        if (r)
            recvec_push_ref(&a->recs, r);
    }
    return true;
}

/* Removes role@db from the roles array of every user and role holding it
 * (as mongod's dropRole). */
static void roles_forget(const char *db, const char *role)
{
    collection_t *cols[2] = {access_users(false, NULL), access_roles(false, NULL)};
    for (int k = 0; k < 2; k++) {
        if (!cols[k])
            continue;
        roles_all_t all = {.c = cols[k]};
        recvec_init(&all.recs);
        collection_foreach(cols[k], roles_collect_all, &all);
        recvec_t recs = all.recs;
        dberr_t err;
        for (size_t i = 0; i < recs.len; i++) {
            bson_t doc, out = BSON_INITIALIZER, arr;
            bson_iter_t it, el;
            record_view(recs.items[i], &doc);
            bool changed = false;
            uint32_t n = 0;
            char key[16];
            bson_iter_init(&it, &doc);
            while (bson_iter_next(&it)) {
                if (strcmp(bson_iter_key(&it), "roles") || !BSON_ITER_HOLDS_ARRAY(&it)) {
                    bson_append_value(&out, bson_iter_key(&it), -1, bson_iter_value(&it));
                    continue;
                }
                bson_append_array_begin(&out, "roles", -1, &arr);
                bson_iter_recurse(&it, &el);
                while (bson_iter_next(&el)) {
                    const char *r, *d;
                    roles_pair(&el, &r, &d);
                    if (r && d && !strcmp(r, role) && !strcmp(d, db)) {
                        changed = true;
                        continue;
                    }
                    bson_append_value(&arr, cmd_index_key(n++, key, sizeof key), -1,
                                      bson_iter_value(&el));
                }
                bson_append_array_end(&out, &arr);
            }
            if (changed)
                collection_replace(cols[k], recs.items[i], &out, &err);
            bson_destroy(&out);
        }
        recvec_destroy(&recs);
    }
}

bool cmd_drop_role(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *role;
    if (!roles_name(ctx, &role, err))
        return false;
    record_t *r = usermgmt_existing(ctx, USERMGMT_ROLE, role, err);
    if (!r)
        return false;
    collection_remove(access_roles(false, NULL), r);
    roles_forget(ctx->db, role);
    access_changed();
    return true;
}

bool cmd_drop_all_roles_from_database(cmd_ctx_t *ctx, dberr_t *err)
{
    usermgmt_drop_all(ctx, access_roles(false, NULL), roles_forget);
    return true;
}

/* ---- rolesInfo ---- */

typedef struct roles_info {
    cmd_ctx_t *ctx;
    bool privs;
    bson_t arr;
    uint32_t n;
} roles_info_t;

/* Appends role@db (built-in or stored) as rolesInfo shows it. */
static void roles_info_one(roles_info_t *ri, const char *db, const char *role)
{
    bool builtin = priv_is_builtin_role(role, db);
    record_t *r = builtin ? NULL : access_find_role(db, role);
    if (!builtin && !r)
        return;
    priv_set_t own, all;
    priv_set_init(&own);
    priv_set_init(&all);
    bson_t roles = BSON_INITIALIZER, one, arr;
    if (builtin)
        priv_builtin_role(role, db, &own);
    else {
        bson_destroy(&roles);
        roles_read(r, &own, &roles);
    }
    char key[16];
    bson_append_document_begin(&ri->arr, cmd_index_key(ri->n++, key, sizeof key), -1, &one);
    BSON_APPEND_UTF8(&one, "role", role);
    BSON_APPEND_UTF8(&one, "db", db);
    BSON_APPEND_BOOL(&one, "isBuiltin", builtin);
    BSON_APPEND_ARRAY(&one, "roles", &roles);
    uint32_t n = 0;
    bson_append_array_begin(&one, "inheritedRoles", -1, &arr);
    priv_set_merge(&all, &own);
    access_resolve_roles(&roles, &all, &arr, &n);
    bson_append_array_end(&one, &arr);
    if (ri->privs) {
        bson_append_array_begin(&one, "privileges", -1, &arr);
        priv_set_append(&own, &arr);
        bson_append_array_end(&one, &arr);
        bson_append_array_begin(&one, "inheritedPrivileges", -1, &arr);
        priv_set_append(&all, &arr);
        bson_append_array_end(&one, &arr);
    }
    bson_append_document_end(&ri->arr, &one);
    bson_destroy(&roles);
    priv_set_destroy(&own);
    priv_set_destroy(&all);
}

static bool roles_info_each_db(const bson_t *doc, void *arg)
{
    void **a = arg;
    roles_info_t *ri = a[0];
    const char *db = a[1];
    bson_iter_t d, r;
    if (bson_iter_init_find(&d, doc, "db") && BSON_ITER_HOLDS_UTF8(&d) &&
        strcmp(bson_iter_utf8(&d, NULL), db) == 0 && bson_iter_init_find(&r, doc, "role") &&
        BSON_ITER_HOLDS_UTF8(&r))
        roles_info_one(ri, db, bson_iter_utf8(&r, NULL));
    return true;
}

/* One named role: "name" (on ctx->db) or {role, db}. */
static bool roles_info_named(const bson_iter_t *el, void *arg, dberr_t *err)
{
    roles_info_t *ri = arg;
    const char *role = NULL, *db = ri->ctx->db;
    if (BSON_ITER_HOLDS_UTF8(el))
        role = bson_iter_utf8(el, NULL);
    else if (BSON_ITER_HOLDS_DOCUMENT(el))
        roles_pair(el, &role, &db);
    if (!role || !db)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Role name must be either a string or an object of the form {role: "
                         "\"roleName\", db: \"databaseName\"}");
    if (!access_allowed(ri->ctx, PRIV_TARGET_DB, db, NULL, ACT_VIEW_ROLE))
        return access_refuse(ri->ctx, err);
    roles_info_one(ri, db, role);
    return true;
}

bool cmd_roles_info(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"showPrivileges", "showBuiltinRoles",
                                        "showAuthenticationRestrictions"};
    static const char *const builtins[] = {"read", "readWrite", "dbAdmin", "userAdmin",
                                           "dbOwner", "lockUser"};
    roles_info_t ri = {.ctx = ctx};
    bool show_builtin = false, ok = false;
    bson_iter_t sp;
    if (!cmd_only_fields(ctx, known, 3, err) || !cmd_opt_bool(ctx, "showBuiltinRoles",
                                                               &show_builtin, err))
        return false;
    /* showPrivileges may be a bool or "asUserFragment" */
    ri.privs = cmd_find(ctx, "showPrivileges", &sp) && bson_iter_as_bool(&sp);
    bson_init(&ri.arr);
    const bson_iter_t *arg = &ctx->arg;
    if (BSON_ITER_HOLDS_NUMBER(arg) && bson_iter_as_int64(arg) == 1) {
        if (!access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL, ACT_VIEW_ROLE)) {
            access_refuse(ctx, err);
            goto cleanup;
        }
        if (show_builtin) {
            for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
                roles_info_one(&ri, ctx->db, builtins[i]);
        }
        collection_t *c = access_roles(false, NULL);
        void *a[2] = {&ri, (void *)ctx->db};
        if (c)
            collection_foreach(c, roles_info_each_db, a);
    } else if (!usermgmt_each_name(arg, roles_info_named, &ri, err)) {
        goto cleanup;
    }
    BSON_APPEND_ARRAY(ctx->reply, "roles", &ri.arr);
    ok = true;
cleanup:
    bson_destroy(&ri.arr);
    return ok;
}
