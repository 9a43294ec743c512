/* users: mongod's user-management commands — createUser, updateUser,
 * dropUser, dropAllUsersFromDatabase, usersInfo, grantRolesToUser,
 * revokeRolesFromUser — over admin.system.users, whose documents hold
 * salted SCRAM credentials only (never a password). Written through the
 * store, so the journal logs them like any other document. */
#include "cmd/usermgmt.h"

#include <openssl/rand.h>
#include <string.h>

#include "doc/matcher.h"
#include "store/catalog.h"

#define USERS_MECH_SHA1 1
#define USERS_MECH_SHA256 2

/* ---- arguments ---- */

/* The user name in the command's first value. */
static bool users_name(cmd_ctx_t *ctx, const char **out, dberr_t *err)
{
    uint32_t len;
    if (!BSON_ITER_HOLDS_UTF8(&ctx->arg))
        return cmd_wrong_type(err, &ctx->arg, "type 'string'", "%s.%s", ctx->name, ctx->name);
    *out = bson_iter_utf8(&ctx->arg, &len);
    if (len == 0 || strlen(*out) != len)
        return dberr_set(err, DBERR_BAD_VALUE, "User name must not be empty or contain NUL");
    if (len > SCRAM_USER_MAX)
        return dberr_set(err, DBERR_BAD_VALUE, "User name is longer than %d bytes", SCRAM_USER_MAX);
    if (strcmp(ctx->db, "$external") == 0 || strcmp(ctx->db, "local") == 0)
        return dberr_set(err, DBERR_BAD_VALUE, "Cannot create or change users in the %s database",
                         ctx->db);
    return true;
}

/* The mechanisms argument as USERS_MECH_* bits (both when absent). */
static bool users_mechanisms(cmd_ctx_t *ctx, int *out, dberr_t *err)
{
    bson_iter_t it, el;
    *out = USERS_MECH_SHA1 | USERS_MECH_SHA256;
    if (!cmd_find(ctx, "mechanisms", &it))
        return true;
    if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &el))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "mechanisms field must be an array");
    *out = 0;
    while (bson_iter_next(&el)) {
        scram_mech_t m;
        if (!BSON_ITER_HOLDS_UTF8(&el) || !scram_mech_parse(bson_iter_utf8(&el, NULL), &m))
            return dberr_set(err, DBERR_BAD_VALUE, "Unknown auth mechanism '%s'",
                             BSON_ITER_HOLDS_UTF8(&el) ? bson_iter_utf8(&el, NULL) : "?");
        *out |= m == SCRAM_SHA_1 ? USERS_MECH_SHA1 : USERS_MECH_SHA256;
    }
    if (!*out)
        return dberr_set(err, DBERR_BAD_VALUE, "mechanisms field must not be empty");
    return true;
}

/* Appends credentials {SCRAM-SHA-1: ..., SCRAM-SHA-256: ...} for `pwd`. */
static bool users_credentials(const char *user, const char *pwd, int mechs, bson_t *doc,
                              dberr_t *err)
{
    bson_t creds;
    bool ok = true;
    bson_append_document_begin(doc, "credentials", -1, &creds);
    for (int i = 0; i < 2 && ok; i++) {
        scram_mech_t m = i == 0 ? SCRAM_SHA_1 : SCRAM_SHA_256;
        if (!(mechs & (i == 0 ? USERS_MECH_SHA1 : USERS_MECH_SHA256)))
            continue;
        char *prep = scram_prepare_password(m, user, pwd, err);
        scram_cred_t c;
        ok = prep && scram_cred_make(m, prep, access_iterations(m), &c, err);
        scram_free_secret(prep);
        if (ok)
            scram_cred_append(&creds, scram_mech_name(m), &c);
    }
    bson_append_document_end(doc, &creds);
    return ok;
}

/* The pwd argument: a non-empty string. */
static bool users_pwd(cmd_ctx_t *ctx, const bson_iter_t *it, const char **out, dberr_t *err)
{
    uint32_t len;
    if (!BSON_ITER_HOLDS_UTF8(it))
        return cmd_wrong_type(err, it, "type 'string'", "%s.pwd", ctx->name);
    *out = bson_iter_utf8(it, &len);
    if (len == 0 || strlen(*out) != len)
        return dberr_set(err, DBERR_BAD_VALUE, "Password cannot be empty");
    bson_iter_t d;
    if (cmd_find(ctx, "digestPassword", &d) && !bson_iter_as_bool(&d))
        return dberr_set(err, DBERR_BAD_VALUE,
                         "digestPassword: false is not supported by atomdb: send the password "
                         "and let the server derive the credentials");
    return true;
}

/* Writes `doc` as the user document (replacing `old` when not NULL). */
static bool users_store(record_t *old, const bson_t *doc, dberr_t *err)
{
    return access_store(access_users(true, err), old, doc, err);
}

/* ---- createUser / updateUser / dropUser ---- */

bool cmd_create_user(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"pwd", "roles", "customData", "mechanisms",
                                        "digestPassword", "authenticationRestrictions"};
    const char *user, *pwd = NULL;
    int mechs;
    bson_iter_t it;
    bool ok = false;
    bson_t roles = BSON_INITIALIZER, doc = BSON_INITIALIZER;
    if (!cmd_only_fields(ctx, known, 6, err) || !users_name(ctx, &user, err) ||
        !access_refuse_restrictions(ctx, err) || !users_mechanisms(ctx, &mechs, err))
        goto cleanup;
    if (!cmd_find(ctx, "pwd", &it)) {
        dberr_set(err, DBERR_BAD_VALUE, "Must provide a 'pwd' field for all user documents, "
                                        "except those with '$external' as the user's source db");
        goto cleanup;
    }
    if (!users_pwd(ctx, &it, &pwd, err) || !usermgmt_required(ctx, "roles", &it, err) ||
        !access_role_list(ctx, &it, &roles, err))
        goto cleanup;
    if (access_find_user(ctx->db, user)) {
        dberr_set(err, 51003, "User \"%s@%s\" already exists", user, ctx->db);
        goto cleanup;
    }
    char *id = bson_strdup_printf("%s.%s", ctx->db, user);
    BSON_APPEND_UTF8(&doc, "_id", id);
    bson_free(id);
    uint8_t uuid[16];
    RAND_bytes(uuid, sizeof uuid);
    uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40);
    uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
    bson_append_binary(&doc, "userId", -1, BSON_SUBTYPE_UUID, uuid, 16);
    BSON_APPEND_UTF8(&doc, "user", user);
    BSON_APPEND_UTF8(&doc, "db", ctx->db);
    if (!users_credentials(user, pwd, mechs, &doc, err))
        goto cleanup;
    if (cmd_find(ctx, "customData", &it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            dberr_set(err, DBERR_TYPE_MISMATCH, "\"customData\" must be an object");
            goto cleanup;
        }
        bson_append_value(&doc, "customData", -1, bson_iter_value(&it));
    }
    BSON_APPEND_ARRAY(&doc, "roles", &roles);
    ok = users_store(NULL, &doc, err);
cleanup:
    bson_destroy(&roles);
    bson_destroy(&doc);
    return ok;
}

/* Copies `old` into `out`, leaving out the fields in `skip`. */
static void users_copy_except(const bson_t *old, bson_t *out, const char *const *skip, size_t n)
{
    bson_iter_t it;
    bson_iter_init(&it, old);
    while (bson_iter_next(&it)) {
        size_t i = 0;
        while (i < n && strcmp(bson_iter_key(&it), skip[i]))
            i++;
        if (i == n)
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
}

/* The USERS_MECH_* bits of a stored user's credentials. */
static int users_stored_mechs(const bson_t *doc)
{
    bson_iter_t it, c;
    int m = 0;
    if (bson_iter_init_find(&it, doc, "credentials") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &c))
        while (bson_iter_next(&c)) {
            if (strcmp(bson_iter_key(&c), "SCRAM-SHA-1") == 0)
                m |= USERS_MECH_SHA1;
            else if (strcmp(bson_iter_key(&c), "SCRAM-SHA-256") == 0)
                m |= USERS_MECH_SHA256;
        }
    return m;
}

bool cmd_update_user(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"pwd", "roles", "customData", "mechanisms",
                                        "digestPassword", "authenticationRestrictions"};
    const char *user, *pwd = NULL;
    bson_iter_t it, pwd_it, cd_it, roles_it;
    bool ok = false;
    bson_t roles = BSON_INITIALIZER, doc = BSON_INITIALIZER, old;
    int mechs = 0;
    if (!cmd_only_fields(ctx, known, 6, err) || !users_name(ctx, &user, err) ||
        !access_refuse_restrictions(ctx, err))
        goto cleanup;
    bool has_pwd = cmd_find(ctx, "pwd", &pwd_it), has_cd = cmd_find(ctx, "customData", &cd_it);
    bool has_roles = cmd_find(ctx, "roles", &roles_it);
    bool has_mechs = cmd_find(ctx, "mechanisms", &it);
    if (!has_pwd && !has_cd && !has_roles && !has_mechs) {
        dberr_set(err, DBERR_BAD_VALUE, "Must specify at least one field to update in updateUser");
        goto cleanup;
    }
    if ((has_pwd && !access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL, ACT_CHANGE_PASSWORD)) ||
        (has_cd && !access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL, ACT_CHANGE_CUSTOM_DATA)) ||
        (has_roles && !access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL, ACT_REVOKE_ROLE))) {
        access_refuse(ctx, err);
        goto cleanup;
    }
    if (has_pwd && !users_pwd(ctx, &pwd_it, &pwd, err))
        goto cleanup;
    if (has_roles && !access_role_list(ctx, &roles_it, &roles, err))
        goto cleanup;
    if (has_cd && !BSON_ITER_HOLDS_DOCUMENT(&cd_it)) {
        dberr_set(err, DBERR_TYPE_MISMATCH, "\"customData\" must be an object");
        goto cleanup;
    }
    record_t *r = usermgmt_existing(ctx, USERMGMT_USER, user, err);
    if (!r)
        goto cleanup;
    record_view(r, &old);
    int stored = users_stored_mechs(&old);
    if (!users_mechanisms(ctx, &mechs, err))
        goto cleanup;
    if (!has_mechs)
        mechs = stored;
    if (!has_pwd && (mechs & ~stored)) {
        dberr_set(err, DBERR_BAD_VALUE,
                  "mechanisms field must be a subset of previously set mechanisms");
        goto cleanup;
    }
    static const char *const replaced[] = {"credentials", "customData", "roles"};
    users_copy_except(&old, &doc, replaced, 3);
    if (has_pwd) {
        if (!users_credentials(user, pwd, mechs, &doc, err))
            goto cleanup;
    } else {
        /* keep the stored credentials of the mechanisms still wanted */
        bson_t creds;
        bson_iter_t c;
        bson_append_document_begin(&doc, "credentials", -1, &creds);
        if (bson_iter_init_find(&it, &old, "credentials") && bson_iter_recurse(&it, &c))
            while (bson_iter_next(&c)) {
                bool sha1 = strcmp(bson_iter_key(&c), "SCRAM-SHA-1") == 0;
                if (mechs & (sha1 ? USERS_MECH_SHA1 : USERS_MECH_SHA256))
                    bson_append_value(&creds, bson_iter_key(&c), -1, bson_iter_value(&c));
            }
        bson_append_document_end(&doc, &creds);
    }
    if (has_cd)
        bson_append_value(&doc, "customData", -1, bson_iter_value(&cd_it));
    else if (bson_iter_init_find(&it, &old, "customData"))
        bson_append_value(&doc, "customData", -1, bson_iter_value(&it));
    if (has_roles)
        BSON_APPEND_ARRAY(&doc, "roles", &roles);
    else if (bson_iter_init_find(&it, &old, "roles"))
        bson_append_value(&doc, "roles", -1, bson_iter_value(&it));
    ok = users_store(r, &doc, err);
cleanup:
    bson_destroy(&roles);
    bson_destroy(&doc);
    return ok;
}

bool cmd_drop_user(cmd_ctx_t *ctx, dberr_t *err)
{
    const char *user;
    if (!users_name(ctx, &user, err))
        return false;
    record_t *r = access_find_user(ctx->db, user);
    if (!r)
        return dberr_set(err, 11, "User '%s@%s' not found", user, ctx->db);
    collection_remove(access_users(false, NULL), r);
    access_changed();
    return true;
}

bool cmd_drop_all_users_from_database(cmd_ctx_t *ctx, dberr_t *err)
{
    usermgmt_drop_all(ctx, access_users(false, NULL), NULL);
    return true;
}

/* grantRolesToUser, and revokeRolesFromUser. */
bool cmd_change_user_roles(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"roles"};
    bool grant = strcmp(ctx->name, "grantRolesToUser") == 0;
    const char *user;
    bson_iter_t it, ol;
    bool ok = false;
    bson_t roles = BSON_INITIALIZER, doc = BSON_INITIALIZER, merged = BSON_INITIALIZER, old;
    if (!cmd_only_fields(ctx, known, 1, err) || !users_name(ctx, &user, err) ||
        !usermgmt_required(ctx, "roles", &it, err))
        goto cleanup;
    if (!grant && !access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL, ACT_REVOKE_ROLE)) {
        access_refuse(ctx, err);
        goto cleanup;
    }
    if (!access_role_list(ctx, &it, &roles, err))
        goto cleanup;
    record_t *r = usermgmt_existing(ctx, USERMGMT_USER, user, err);
    if (!r)
        goto cleanup;
    record_view(r, &old);
    /* the new roles array: old ones (less the revoked), then new grants */
    bson_t old_roles = BSON_INITIALIZER;
    if (bson_iter_init_find(&ol, &old, "roles") && BSON_ITER_HOLDS_ARRAY(&ol))
        cmd_iter_doc(&ol, &old_roles);
    access_role_list_change(&old_roles, &roles, grant, &merged);
    static const char *const replaced[] = {"roles"};
    users_copy_except(&old, &doc, replaced, 1);
    BSON_APPEND_ARRAY(&doc, "roles", &merged);
    ok = users_store(r, &doc, err);
cleanup:
    bson_destroy(&roles);
    bson_destroy(&doc);
    bson_destroy(&merged);
    return ok;
}

/* ---- usersInfo ---- */

typedef struct users_info {
    cmd_ctx_t *ctx;
    bool creds, privs, custom;
    matcher_t *filter;
    bson_t arr;
    uint32_t n;
    bool refused;
} users_info_t;

/* Appends one user as usersInfo shows it. */
static void users_info_one(users_info_t *ui, const bson_t *doc)
{
    bson_iter_t it;
    const char *db = NULL, *user = NULL;
    if (bson_iter_init_find(&it, doc, "db") && BSON_ITER_HOLDS_UTF8(&it))
        db = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "user") && BSON_ITER_HOLDS_UTF8(&it))
        user = bson_iter_utf8(&it, NULL);
    if (!db || !user)
        return;
    cmd_auth_t *a = ui->ctx->client->auth;
    bool self = a && a->authenticated && !strcmp(a->user, user) && !strcmp(a->db, db);
    if (!self && !access_allowed(ui->ctx, PRIV_TARGET_DB, db, NULL, ACT_VIEW_USER)) {
        ui->refused = true;
        return;
    }
    if (ui->filter && !matcher_matches(ui->filter, doc, NULL))
        return;
    char key[16];
    bson_t one, mechs, roles;
    bson_append_document_begin(&ui->arr, cmd_index_key(ui->n++, key, sizeof key), -1, &one);
    static const char *const fields[] = {"_id", "userId", "user", "db"};
    for (size_t i = 0; i < 4; i++)
        if (bson_iter_init_find(&it, doc, fields[i]))
            bson_append_value(&one, fields[i], -1, bson_iter_value(&it));
    if (ui->creds && bson_iter_init_find(&it, doc, "credentials"))
        bson_append_value(&one, "credentials", -1, bson_iter_value(&it));
    bool has_roles = bson_iter_init_find(&it, doc, "roles") && cmd_iter_doc(&it, &roles);
    if (has_roles)
        bson_append_value(&one, "roles", -1, bson_iter_value(&it));
    if (ui->custom && bson_iter_init_find(&it, doc, "customData"))
        bson_append_value(&one, "customData", -1, bson_iter_value(&it));
    bson_append_array_begin(&one, "mechanisms", -1, &mechs);
    int m = users_stored_mechs(doc), k = 0;
    if (m & USERS_MECH_SHA1)
        bson_append_utf8(&mechs, cmd_index_key((uint32_t)k++, key, sizeof key), -1, "SCRAM-SHA-1", -1);
    if (m & USERS_MECH_SHA256)
        bson_append_utf8(&mechs, cmd_index_key((uint32_t)k++, key, sizeof key), -1, "SCRAM-SHA-256", -1);
    bson_append_array_end(&one, &mechs);
    if (ui->privs && has_roles) {
        priv_set_t ps;
        priv_set_init(&ps);
        bson_t inh, parr;
        uint32_t n = 0;
        bson_append_array_begin(&one, "inheritedRoles", -1, &inh);
        access_resolve_roles(&roles, &ps, &inh, &n);
        bson_append_array_end(&one, &inh);
        bson_append_array_begin(&one, "inheritedPrivileges", -1, &parr);
        priv_set_append(&ps, &parr);
        bson_append_array_end(&one, &parr);
        priv_set_destroy(&ps);
    }
    bson_append_document_end(&ui->arr, &one);
}

static bool users_info_each(const bson_t *doc, void *arg)
{
    users_info_one(arg, doc);
    return true;
}

typedef struct users_info_db {
    users_info_t *ui;
    const char *db;
} users_info_db_t;

static bool users_info_each_db(const bson_t *doc, void *arg)
{
    users_info_db_t *d = arg;
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "db") && BSON_ITER_HOLDS_UTF8(&it) &&
        strcmp(bson_iter_utf8(&it, NULL), d->db) == 0)
        users_info_one(d->ui, doc);
    return true;
}

/* One named user: "name" (on ctx->db) or {user, db}. */
static bool users_info_named(const bson_iter_t *el, void *arg, dberr_t *err)
{
    users_info_t *ui = arg;
    const char *user = NULL, *db = ui->ctx->db;
    if (BSON_ITER_HOLDS_UTF8(el)) {
        user = bson_iter_utf8(el, NULL);
    } else if (BSON_ITER_HOLDS_DOCUMENT(el)) {
        bson_iter_t f;
        bson_iter_recurse(el, &f);
        db = NULL;
        while (bson_iter_next(&f)) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                continue;
            if (strcmp(bson_iter_key(&f), "user") == 0)
                user = bson_iter_utf8(&f, NULL);
            else if (strcmp(bson_iter_key(&f), "db") == 0)
                db = bson_iter_utf8(&f, NULL);
        }
    }
    if (!user || !db)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "User name must be either a string or an object of the form {user: "
                         "\"userName\", db: \"databaseName\"}");
    record_t *r = access_find_user(db, user);
    if (r) {
        bson_t doc;
        record_view(r, &doc);
        users_info_one(ui, &doc);
    } else {
        cmd_auth_t *a = ui->ctx->client->auth;
        bool self = a && a->authenticated && !strcmp(a->user, user) && !strcmp(a->db, db);
        if (!self && !access_allowed(ui->ctx, PRIV_TARGET_DB, db, NULL, ACT_VIEW_USER))
            ui->refused = true;
    }
    return true;
}

bool cmd_users_info(cmd_ctx_t *ctx, dberr_t *err)
{
    static const char *const known[] = {"showCredentials", "showPrivileges", "showCustomData",
                                        "showAuthenticationRestrictions", "filter"};
    users_info_t ui = {.ctx = ctx, .custom = true};
    bson_t filter;
    bool has_filter, ok = false;
    if (!cmd_only_fields(ctx, known, 5, err) || !cmd_opt_bool(ctx, "showCredentials", &ui.creds, err) ||
        !cmd_opt_bool(ctx, "showPrivileges", &ui.privs, err) ||
        !cmd_opt_bool(ctx, "showCustomData", &ui.custom, err) ||
        !cmd_opt_doc(ctx, "filter", &filter, &has_filter, err))
        return false;
    if (has_filter && !(ui.filter = matcher_new(&filter, err)))
        return false;
    collection_t *c = access_users(false, NULL);
    bson_init(&ui.arr);
    const bson_iter_t *arg = &ctx->arg;
    bson_iter_t f;
    if (BSON_ITER_HOLDS_NUMBER(arg) && bson_iter_as_int64(arg) == 1) {
        users_info_db_t d = {&ui, ctx->db};
        if (!access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL, ACT_VIEW_USER))
            ui.refused = true;
        else if (c)
            collection_foreach(c, users_info_each_db, &d);
    } else if (BSON_ITER_HOLDS_DOCUMENT(arg) && bson_iter_recurse(arg, &f) &&
               bson_iter_find(&f, "forAllDBs")) {
        if (!access_allowed(ctx, PRIV_TARGET_CLUSTER, NULL, NULL, ACT_VIEW_USER) &&
            !access_allowed(ctx, PRIV_TARGET_DB, "admin", NULL, ACT_VIEW_USER))
            ui.refused = true;
        else if (c)
            collection_foreach(c, users_info_each, &ui);
    } else if (!usermgmt_each_name(arg, users_info_named, &ui, err)) {
        goto cleanup;
    }
    if (ui.refused) {
        access_refuse(ctx, err);
        goto cleanup;
    }
    BSON_APPEND_ARRAY(ctx->reply, "users", &ui.arr);
    ok = true;
cleanup:
    bson_destroy(&ui.arr);
    matcher_destroy(ui.filter);
    return ok;
}
