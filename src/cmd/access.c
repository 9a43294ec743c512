/* access: the access table (one row per command: what it needs), the check
 * cmd_run makes before every command when --auth is on, the connection's
 * login state, and privileges resolved from the roles stored in
 * admin.system.users / admin.system.roles. docs/security.md lists the
 * actions each command needs. */
#include "cmd/access.h"

#include <openssl/sha.h>
#include <string.h>

#include "store/catalog.h"
#include "util/log.h"

static uint64_t access_gen = 1;
static int32_t access_iter_sha1 = SCRAM_SHA1_ITER_DEFAULT;
static int32_t access_iter_sha256 = SCRAM_SHA256_ITER_DEFAULT;

/* ---- custom checks ---- */

static bool access_need(cmd_ctx_t *ctx, priv_target_kind_t kind, const char *db, const char *coll,
                        priv_action_t action, dberr_t *err)
{
    if (access_allowed(ctx, kind, db, coll, action))
        return true;
    return access_refuse(ctx, err);
}

/* The collection the command's first value names, or NULL. */
static const char *access_arg_coll(const cmd_ctx_t *ctx)
{
    if (!BSON_ITER_HOLDS_UTF8(&ctx->arg))
        return NULL;
    uint32_t len;
    const char *s = bson_iter_utf8(&ctx->arg, &len);
    return strlen(s) == len ? s : NULL;
}

/* An action on the command's collection, or on its database when the
 * first value is not a collection name (aggregate: 1). */
static bool access_need_arg(cmd_ctx_t *ctx, priv_action_t action, dberr_t *err)
{
    const char *coll = access_arg_coll(ctx);
    return coll ? access_need(ctx, PRIV_TARGET_NS, ctx->db, coll, action, err)
                : access_need(ctx, PRIV_TARGET_DB, ctx->db, NULL, action, err);
}

static bool access_check_update(cmd_ctx_t *ctx, dberr_t *err)
{
    if (!access_need_arg(ctx, ACT_UPDATE, err))
        return false;
    const char *coll = access_arg_coll(ctx);
    if (coll && access_allowed(ctx, PRIV_TARGET_NS, ctx->db, coll, ACT_INSERT))
        return true; /* upserts allowed too: no need to look for them (hot path) */
    bson_iter_t it, el, f;
    if (cmd_find(ctx, "updates", &it) && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &el))
        while (bson_iter_next(&el))
            if (BSON_ITER_HOLDS_DOCUMENT(&el) && bson_iter_recurse(&el, &f) &&
                bson_iter_find(&f, "upsert") && bson_iter_as_bool(&f))
                return access_need_arg(ctx, ACT_INSERT, err);
    return true;
}

static bool access_check_find_and_modify(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    bool remove = cmd_find(ctx, "remove", &it) && bson_iter_as_bool(&it);
    bool upsert = cmd_find(ctx, "upsert", &it) && bson_iter_as_bool(&it);
    return access_need_arg(ctx, ACT_FIND, err) &&
           access_need_arg(ctx, remove ? ACT_REMOVE : ACT_UPDATE, err) &&
           (!upsert || access_need_arg(ctx, ACT_INSERT, err));
}

/* A stage's target {db, coll} or "coll" string: the namespace into out. */
static void access_stage_ns(const bson_iter_t *v, const char *db, char *out_db, size_t dbcap,
                            char *out_coll, size_t collcap)
{
    snprintf(out_db, dbcap, "%s", db);
    out_coll[0] = '\0';
    if (BSON_ITER_HOLDS_UTF8(v)) {
        snprintf(out_coll, collcap, "%s", bson_iter_utf8(v, NULL));
        return;
    }
    bson_iter_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(v) || !bson_iter_recurse(v, &f))
        return;
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (!BSON_ITER_HOLDS_UTF8(&f))
            continue;
        if (strcmp(k, "db") == 0)
            snprintf(out_db, dbcap, "%s", bson_iter_utf8(&f, NULL));
        else if (strcmp(k, "coll") == 0)
            snprintf(out_coll, collcap, "%s", bson_iter_utf8(&f, NULL));
    }
}

/* Nesting of sub-pipelines checked: deeper ones fail to parse (232) and
 * never run, so nothing below this depth needs a privilege. */
#define ACCESS_MAX_PIPELINE_DEPTH 24

/* Checks the stages under `st` (an array iterator positioned before its
 * first stage) and, recursively, the pipelines of $lookup, $unionWith and
 * $facet: what each stage reads or writes. */
static bool access_check_stages(cmd_ctx_t *ctx, bson_iter_t *st, int depth, dberr_t *err)
{
    bson_iter_t op;
    if (depth > ACCESS_MAX_PIPELINE_DEPTH)
        return true;
    while (bson_iter_next(st)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(st) || !bson_iter_recurse(st, &op) || !bson_iter_next(&op))
            continue;
        const char *name = bson_iter_key(&op);
        char db[64], coll[256];
        if (strcmp(name, "$out") == 0 || strcmp(name, "$merge") == 0) {
            bson_iter_t target = op, into;
            if (name[1] == 'm' && BSON_ITER_HOLDS_DOCUMENT(&op) && bson_iter_recurse(&op, &into) &&
                bson_iter_find(&into, "into"))
                target = into;
            access_stage_ns(&target, ctx->db, db, sizeof db, coll, sizeof coll);
            if (!*coll)
                continue;
            if (!access_need(ctx, PRIV_TARGET_NS, db, coll, ACT_INSERT, err) ||
                !access_need(ctx, PRIV_TARGET_NS, db, coll, ACT_REMOVE, err) ||
                (name[1] == 'm' && !access_need(ctx, PRIV_TARGET_NS, db, coll, ACT_UPDATE, err)))
                return false;
        } else if (strcmp(name, "$currentOp") == 0) {
            if (!access_need(ctx, PRIV_TARGET_CLUSTER, NULL, NULL, ACT_INPROG, err))
                return false;
        } else if (strcmp(name, "$lookup") == 0 || strcmp(name, "$graphLookup") == 0 ||
                   strcmp(name, "$unionWith") == 0) {
            bson_iter_t from, sub;
            bool found = true;
            if (BSON_ITER_HOLDS_UTF8(&op)) {
                from = op;
            } else if (!BSON_ITER_HOLDS_DOCUMENT(&op) || !bson_iter_recurse(&op, &from) ||
                       !bson_iter_find(&from, name[1] == 'u' ? "coll" : "from")) {
                found = false;
            }
            if (found) {
                access_stage_ns(&from, ctx->db, db, sizeof db, coll, sizeof coll);
                if (*coll && !access_need(ctx, PRIV_TARGET_NS, db, coll, ACT_FIND, err))
                    return false;
            }
            /* a nested pipeline needs what its own stages need */
            if (BSON_ITER_HOLDS_DOCUMENT(&op) && bson_iter_recurse(&op, &sub) &&
                bson_iter_find(&sub, "pipeline") && BSON_ITER_HOLDS_ARRAY(&sub)) {
                bson_iter_t stages;
                bson_iter_recurse(&sub, &stages);
                if (!access_check_stages(ctx, &stages, depth + 1, err))
                    return false;
            }
        } else if (strcmp(name, "$facet") == 0 && BSON_ITER_HOLDS_DOCUMENT(&op)) {
            bson_iter_t facet, stages;
            bson_iter_recurse(&op, &facet);
            while (bson_iter_next(&facet))
                if (BSON_ITER_HOLDS_ARRAY(&facet) && bson_iter_recurse(&facet, &stages) &&
                    !access_check_stages(ctx, &stages, depth + 1, err))
                    return false;
        }
    }
    return true;
}

static bool access_check_aggregate(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it, st, op;
    bool pipeline = cmd_find(ctx, "pipeline", &it) && BSON_ITER_HOLDS_ARRAY(&it) &&
                    bson_iter_recurse(&it, &st);
    /* a pipeline that starts with $currentOp reads no collection: inprog
     * (checked below) is all it needs, as in mongod */
    bool current_op = false;
    if (pipeline) {
        bson_iter_t first = st;
        current_op = bson_iter_next(&first) && BSON_ITER_HOLDS_DOCUMENT(&first) &&
                     bson_iter_recurse(&first, &op) && bson_iter_next(&op) &&
                     strcmp(bson_iter_key(&op), "$currentOp") == 0;
    }
    if (!current_op && !access_need_arg(ctx, ACT_FIND, err))
        return false;
    if (!pipeline)
        return true; /* the handler reports the malformed pipeline */
    return access_check_stages(ctx, &st, 0, err);
}

static bool access_check_explain(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_t inner;
    if (!cmd_iter_doc(&ctx->arg, &inner) || !BSON_ITER_HOLDS_DOCUMENT(&ctx->arg))
        return true; /* the handler refuses it */
    cmd_ctx_t sub = *ctx;
    sub.cmd = &inner;
    if (!bson_iter_init(&sub.arg, &inner) || !bson_iter_next(&sub.arg))
        return true;
    sub.name = bson_iter_key(&sub.arg);
    cmd_ctx_index(&sub);
    const access_rule_t *rule = access_rule_find(sub.name);
    if (!rule || strcmp(sub.name, "explain") == 0)
        return true; /* the handler refuses what it cannot explain */
    bool ok = access_check(&sub, rule, err);
    if (!ok)
        access_refuse(ctx, err); /* name the explain command in the message */
    return ok;
}

/* "db.coll" into its parts; false when it has no dot. */
static bool access_split_ns(const char *ns, char *db, size_t dbcap, const char **coll)
{
    const char *dot = strchr(ns, '.');
    if (!dot || (size_t)(dot - ns) >= dbcap)
        return false;
    memcpy(db, ns, (size_t)(dot - ns));
    db[dot - ns] = '\0';
    *coll = dot + 1;
    return true;
}

static bool access_check_rename(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t to;
    const char *from_ns = access_arg_coll(ctx), *from_coll, *to_coll;
    char from_db[64], to_db[64];
    if (!from_ns || !cmd_find(ctx, "to", &to) || !BSON_ITER_HOLDS_UTF8(&to) ||
        !access_split_ns(from_ns, from_db, sizeof from_db, &from_coll) ||
        !access_split_ns(bson_iter_utf8(&to, NULL), to_db, sizeof to_db, &to_coll))
        return access_need(ctx, PRIV_TARGET_CLUSTER, NULL, NULL, ACT_INTERNAL, err);
    if (strcmp(from_db, to_db) == 0)
        return access_need(ctx, PRIV_TARGET_NS, from_db, from_coll,
                           ACT_RENAME_COLLECTION_SAME_DB, err) &&
               access_need(ctx, PRIV_TARGET_NS, to_db, to_coll, ACT_RENAME_COLLECTION_SAME_DB, err);
    return access_need(ctx, PRIV_TARGET_NS, from_db, from_coll, ACT_FIND, err) &&
           access_need(ctx, PRIV_TARGET_NS, from_db, from_coll, ACT_DROP_COLLECTION, err) &&
           access_need(ctx, PRIV_TARGET_NS, to_db, to_coll, ACT_INSERT, err) &&
           access_need(ctx, PRIV_TARGET_NS, to_db, to_coll, ACT_CREATE_INDEX, err);
}

/* cloneCollectionAsCapped: find on the source, insert and createCollection
 * on the target (mongod's clone_collection.cpp). */
static bool access_check_clone_capped(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t to;
    const char *from = access_arg_coll(ctx);
    if (!from || !cmd_find(ctx, "toCollection", &to) || !BSON_ITER_HOLDS_UTF8(&to))
        return true; /* the handler refuses it */
    return access_need(ctx, PRIV_TARGET_NS, ctx->db, from, ACT_FIND, err) &&
           access_need(ctx, PRIV_TARGET_NS, ctx->db, bson_iter_utf8(&to, NULL), ACT_INSERT, err) &&
           access_need(ctx, PRIV_TARGET_NS, ctx->db, bson_iter_utf8(&to, NULL),
                       ACT_CREATE_COLLECTION, err);
}

static bool access_check_get_more(cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    if (!cmd_find(ctx, "collection", &it) || !BSON_ITER_HOLDS_UTF8(&it))
        return true; /* the handler refuses it */
    return access_need(ctx, PRIV_TARGET_NS, ctx->db, bson_iter_utf8(&it, NULL), ACT_FIND, err);
}

/* listDatabases: anyone logged in; the handler shows only the databases
 * the user has privileges on unless it may list them all (mongod's
 * authorizedDatabases default). */
static bool access_check_list_databases(cmd_ctx_t *ctx, dberr_t *err)
{
    return true;
}

/* ---- the table ---- */

#define OPEN(n) {n, ACCESS_OPEN, ACT__COUNT, NULL}
#define AUTHED(n) {n, ACCESS_AUTHED, ACT__COUNT, NULL}
#define NS(n, a) {n, ACCESS_NS, a, NULL}
#define DB(n, a) {n, ACCESS_DB, a, NULL}
#define CLUSTER(n, a) {n, ACCESS_CLUSTER, a, NULL}
#define CUSTOM(n, f) {n, ACCESS_CUSTOM, ACT__COUNT, f}

static const access_rule_t access_rules[] = {
    /* the handshake and authentication */
    OPEN("hello"), OPEN("isMaster"), OPEN("ismaster"), OPEN("ping"), OPEN("buildInfo"),
    OPEN("buildinfo"), OPEN("whatsmyuri"), OPEN("connectionStatus"), OPEN("listCommands"),
    OPEN("saslStart"), OPEN("saslContinue"), OPEN("logout"), OPEN("authenticate"),
    /* server */
    CLUSTER("getParameter", ACT_GET_PARAMETER), CLUSTER("setParameter", ACT_SET_PARAMETER),
    CLUSTER("getCmdLineOpts", ACT_GET_CMD_LINE_OPTS), CLUSTER("getLog", ACT_GET_LOG),
    CLUSTER("replSetInitiate", ACT_REPL_SET_CONFIGURE),
    CLUSTER("replSetReconfig", ACT_REPL_SET_CONFIGURE),
    CLUSTER("replSetGetConfig", ACT_REPL_SET_GET_CONFIG),
    CLUSTER("replSetGetStatus", ACT_REPL_SET_GET_STATUS), CLUSTER("hostInfo", ACT_HOST_INFO),
    CLUSTER("serverStatus", ACT_SERVER_STATUS), CLUSTER("shutdown", ACT_SHUTDOWN),
    CLUSTER("fsync", ACT_FSYNC), CLUSTER("fsyncUnlock", ACT_UNLOCK),
    CLUSTER("atomdbFault", ACT_INTERNAL),
    CLUSTER("currentOp", ACT_INPROG), CLUSTER("killOp", ACT_KILLOP), CLUSTER("top", ACT_TOP),
    DB("profile", ACT_ENABLE_PROFILER),
    /* sessions and transactions: the caller's own */
    AUTHED("endSessions"), AUTHED("refreshSessions"), AUTHED("killSessions"),
    AUTHED("startSession"), AUTHED("commitTransaction"), AUTHED("abortTransaction"),
    CLUSTER("killAllSessions", ACT_KILL_ANY_SESSION),
    CLUSTER("killAllSessionsByPattern", ACT_KILL_ANY_SESSION),
    /* databases and collections */
    CUSTOM("listDatabases", access_check_list_databases),
    DB("listCollections", ACT_LIST_COLLECTIONS), NS("create", ACT_CREATE_COLLECTION),
    NS("drop", ACT_DROP_COLLECTION), DB("dropDatabase", ACT_DROP_DATABASE),
    DB("dbStats", ACT_DB_STATS), DB("dbstats", ACT_DB_STATS), NS("collStats", ACT_COLL_STATS),
    NS("collstats", ACT_COLL_STATS), NS("createIndexes", ACT_CREATE_INDEX),
    NS("collMod", ACT_COLL_MOD), NS("listIndexes", ACT_LIST_INDEXES),
    NS("convertToCapped", ACT_CONVERT_TO_CAPPED),
    CUSTOM("cloneCollectionAsCapped", access_check_clone_capped),
    NS("dropIndexes", ACT_DROP_INDEX), NS("deleteIndexes", ACT_DROP_INDEX),
    CUSTOM("renameCollection", access_check_rename), NS("validate", ACT_VALIDATE),
    DB("dbHash", ACT_DB_HASH), DB("dbhash", ACT_DB_HASH),
    /* reads and writes */
    NS("find", ACT_FIND), NS("count", ACT_FIND), NS("distinct", ACT_FIND),
    CUSTOM("aggregate", access_check_aggregate), CUSTOM("explain", access_check_explain),
    CUSTOM("getMore", access_check_get_more), NS("killCursors", ACT_KILL_CURSORS),
    NS("insert", ACT_INSERT), CUSTOM("update", access_check_update), NS("delete", ACT_REMOVE),
    CUSTOM("findAndModify", access_check_find_and_modify),
    CUSTOM("findandmodify", access_check_find_and_modify), NS("mapReduce", ACT_FIND),
    NS("mapreduce", ACT_FIND),
    /* lease locks (atomdb's own actions) */
    DB("acquireLock", ACT_LOCK), DB("renewLock", ACT_LOCK), DB("releaseLock", ACT_LOCK),
    DB("lockInfo", ACT_LOCK_INFO), DB("listLocks", ACT_LOCK_INFO),
    /* users and roles: the handlers check each role granted and each user shown */
    DB("createUser", ACT_CREATE_USER), AUTHED("updateUser"), DB("dropUser", ACT_DROP_USER),
    DB("dropAllUsersFromDatabase", ACT_DROP_USER), AUTHED("usersInfo"),
    AUTHED("grantRolesToUser"), AUTHED("revokeRolesFromUser"),
    DB("createRole", ACT_CREATE_ROLE), AUTHED("updateRole"), DB("dropRole", ACT_DROP_ROLE),
    DB("dropAllRolesFromDatabase", ACT_DROP_ROLE), AUTHED("rolesInfo"),
    AUTHED("grantPrivilegesToRole"), AUTHED("revokePrivilegesFromRole"),
    AUTHED("grantRolesToRole"), AUTHED("revokeRolesFromRole"),
};

const access_rule_t *access_rule_find(const char *name)
{
    for (size_t i = 0; i < sizeof access_rules / sizeof access_rules[0]; i++)
        if (access_rules[i].name[0] == name[0] && strcmp(access_rules[i].name, name) == 0)
            return &access_rules[i];
    return NULL;
}

/* ---- connection state ---- */

cmd_auth_t *access_auth(cmd_client_t *client)
{
    if (!client->auth) {
        cmd_auth_t *a = bson_malloc0(sizeof *a);
        priv_set_init(&a->privs);
        bson_init(&a->roles);
        client->auth = a;
    }
    return client->auth;
}

void access_client_closed(cmd_client_t *client)
{
    cmd_auth_t *a = client->auth;
    if (!a)
        return;
    sasl_end(a);
    if (a->backoff_timer) {
        uv_timer_stop(a->backoff_timer);
        uv_close((uv_handle_t *)a->backoff_timer, (uv_close_cb)bson_free);
    }
    priv_set_destroy(&a->privs);
    bson_destroy(&a->roles);
    bson_free(a->lock_pending);
    bson_free(a);
    client->auth = NULL;
}

void access_changed(void)
{
    access_gen++;
}

uint64_t access_generation(void)
{
    return access_gen;
}

collection_t *access_users(bool create, dberr_t *err)
{
    return create ? catalog_get_or_create(server.catalog, ACCESS_ADMIN_DB, ACCESS_USERS, err)
                  : catalog_get(server.catalog, ACCESS_ADMIN_DB, ACCESS_USERS);
}

collection_t *access_roles(bool create, dberr_t *err)
{
    return create ? catalog_get_or_create(server.catalog, ACCESS_ADMIN_DB, ACCESS_ROLES, err)
                  : catalog_get(server.catalog, ACCESS_ADMIN_DB, ACCESS_ROLES);
}

static record_t *access_find_id(collection_t *c, const char *db, const char *name)
{
    if (!c)
        return NULL;
    char *id = bson_strdup_printf("%s.%s", db, name);
    bson_value_t v = {.value_type = BSON_TYPE_UTF8};
    v.value.v_utf8.str = id;
    v.value.v_utf8.len = (uint32_t)strlen(id);
    record_t *r = collection_find_id(c, &v);
    bson_free(id);
    return r;
}

record_t *access_find_user(const char *db, const char *user)
{
    return access_find_id(access_users(false, NULL), db, user);
}

record_t *access_find_role(const char *db, const char *role)
{
    return access_find_id(access_roles(false, NULL), db, role);
}

/* Reads {role, db} from one entry of a roles array. */
static bool access_role_ref(bson_iter_t *el, const char **role, const char **db)
{
    bson_iter_t f;
    *role = *db = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(el) || !bson_iter_recurse(el, &f))
        return false;
    while (bson_iter_next(&f)) {
        if (!BSON_ITER_HOLDS_UTF8(&f))
            continue;
        if (strcmp(bson_iter_key(&f), "role") == 0)
            *role = bson_iter_utf8(&f, NULL);
        else if (strcmp(bson_iter_key(&f), "db") == 0)
            *db = bson_iter_utf8(&f, NULL);
    }
    return *role && *db;
}

#define ACCESS_ROLE_DEPTH 16

static void access_resolve_depth(const bson_t *roles, priv_set_t *out, bson_t *inherited,
                                 uint32_t *n, int depth)
{
    bson_iter_t el;
    if (depth > ACCESS_ROLE_DEPTH || !bson_iter_init(&el, roles))
        return;
    while (bson_iter_next(&el)) {
        const char *role, *db;
        if (!access_role_ref(&el, &role, &db))
            continue;
        if (inherited) {
            char key[16];
            bson_t one;
            bson_append_document_begin(inherited, cmd_index_key((*n)++, key, sizeof key), -1,
                                       &one);
            BSON_APPEND_UTF8(&one, "role", role);
            BSON_APPEND_UTF8(&one, "db", db);
            bson_append_document_end(inherited, &one);
        }
        if (priv_builtin_role(role, db, out))
            continue;
        record_t *r = access_find_role(db, role);
        if (!r)
            continue; /* a dropped role grants nothing */
        bson_t doc, sub;
        bson_iter_t it, p;
        record_view(r, &doc);
        if (bson_iter_init_find(&it, &doc, "privileges") && BSON_ITER_HOLDS_ARRAY(&it) &&
            bson_iter_recurse(&it, &p)) {
            while (bson_iter_next(&p)) {
                dberr_t ignored;
                if (cmd_iter_doc(&p, &sub))
                    priv_parse(&sub, out, &ignored);
            }
        }
        if (bson_iter_init_find(&it, &doc, "roles") && cmd_iter_doc(&it, &sub))
            access_resolve_depth(&sub, out, inherited, n, depth + 1);
    }
}

void access_resolve_roles(const bson_t *roles, priv_set_t *out, bson_t *inherited, uint32_t *n)
{
    uint32_t zero = 0;
    access_resolve_depth(roles, out, inherited, n ? n : &zero, 0);
}

/* Reads the logged-in user's roles again and resolves its privileges. */
static void access_refresh(cmd_auth_t *a)
{
    priv_set_clear(&a->privs);
    bson_reinit(&a->roles);
    a->generation = access_gen;
    record_t *r = access_find_user(a->db, a->user);
    if (!r)
        return; /* dropped: still logged in, with no privileges (as mongod) */
    bson_t doc, roles;
    bson_iter_t it;
    record_view(r, &doc);
    if (bson_iter_init_find(&it, &doc, "roles") && BSON_ITER_HOLDS_ARRAY(&it) &&
        cmd_iter_doc(&it, &roles)) {
        bson_destroy(&a->roles);
        bson_copy_to(&roles, &a->roles);
        access_resolve_roles(&roles, &a->privs, NULL, NULL);
    }
}

uint64_t access_owner(const cmd_client_t *client)
{
    const cmd_auth_t *a = client->auth;
    return a && a->authenticated ? a->owner : 0;
}

bool access_login(cmd_client_t *client, const char *db, const char *user, dberr_t *err)
{
    cmd_auth_t *a = access_auth(client);
    if (a->authenticated && (strcmp(a->user, user) || strcmp(a->db, db)))
        return dberr_set(err, 5626701,
                         "Each client connection may only be authenticated once. Previously "
                         "authenticated as: %s@%s",
                         a->user, a->db);
    a->authenticated = true;
    snprintf(a->user, sizeof a->user, "%s", user);
    snprintf(a->db, sizeof a->db, "%s", db);
    /* an opaque id for ownership: the first 8 bytes of SHA-256(user \0 db) */
    uint8_t md[32];
    size_t ul = strlen(user), dl = strlen(db);
    uint8_t *buf = bson_malloc(ul + dl + 1);
    memcpy(buf, user, ul);
    buf[ul] = 0;
    memcpy(buf + ul + 1, db, dl);
    SHA256(buf, ul + dl + 1, md);
    bson_free(buf);
    memcpy(&a->owner, md, sizeof a->owner);
    if (!a->owner)
        a->owner = 1;
    access_refresh(a);
    return true;
}

void access_logout(cmd_client_t *client)
{
    cmd_auth_t *a = client->auth;
    if (!a)
        return;
    sasl_end(a);
    a->authenticated = false;
    a->user[0] = a->db[0] = '\0';
    priv_set_clear(&a->privs);
    bson_reinit(&a->roles);
}

bool access_localhost_exception(const cmd_client_t *client)
{
    if (!server.auth || !client->is_local || (client->auth && client->auth->authenticated))
        return false;
    collection_t *u = access_users(false, NULL), *r = access_roles(false, NULL);
    return (!u || collection_count(u) == 0) && (!r || collection_count(r) == 0);
}

/* Normalises a roles argument (strings name roles on ctx->db) into the
 * array `out` of {role, db}, checking each role exists and that the caller
 * may grant it. */
bool access_store(collection_t *c, record_t *old, const bson_t *doc, dberr_t *err)
{
    if (!c)
        return false;
    bool ok = old ? collection_replace(c, old, doc, err) : collection_insert(c, doc, err);
    access_changed();
    return ok;
}

bool access_refuse_restrictions(const cmd_ctx_t *ctx, dberr_t *err)
{
    bson_iter_t it;
    if (cmd_find(ctx, "authenticationRestrictions", &it))
        return dberr_set(err, DBERR_NOT_IMPLEMENTED,
                         "authenticationRestrictions are not supported by atomdb");
    return true;
}

/* What access_records_of_db's scan collects into. */
typedef struct access_of_db {
    collection_t *c;
    const char *db;
    recvec_t *out;
} access_of_db_t;

static bool access_collect_db(const bson_t *doc, void *arg)
{
    access_of_db_t *u = arg;
    bson_iter_t it, id;
    if (bson_iter_init_find(&it, doc, "db") && BSON_ITER_HOLDS_UTF8(&it) &&
        strcmp(bson_iter_utf8(&it, NULL), u->db) == 0 && bson_iter_init_find(&id, doc, "_id")) {
        record_t *r = collection_find_id(u->c, bson_iter_value(&id));
        if (r)
            recvec_push_ref(u->out, r);
    }
    return true;
}

void access_records_of_db(collection_t *c, const char *db, recvec_t *out)
{
    access_of_db_t u = {.c = c, .db = db, .out = out};
    if (c)
        collection_foreach(c, access_collect_db, &u);
}

void access_role_list_change(const bson_t *old, const bson_t *given, bool grant, bson_t *out)
{
    uint32_t n = 0;
    char key[16];
    bson_iter_t el, g;
    bson_iter_init(&el, old);
    while (bson_iter_next(&el)) {
        bool listed = false;
        bson_iter_init(&g, given);
        while (bson_iter_next(&g)) {
            bson_t a, b;
            if (cmd_iter_doc(&el, &a) && cmd_iter_doc(&g, &b) && bson_equal(&a, &b))
                listed = true;
        }
        if (!listed)
            bson_append_value(out, cmd_index_key(n++, key, sizeof key), -1, bson_iter_value(&el));
    }
    if (!grant)
        return;
    bson_iter_init(&g, given);
    while (bson_iter_next(&g))
        bson_append_value(out, cmd_index_key(n++, key, sizeof key), -1, bson_iter_value(&g));
}

bool access_role_list(cmd_ctx_t *ctx, const bson_iter_t *it, bson_t *out, dberr_t *err)
{
    bson_iter_t el;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &el))
        return cmd_wrong_type(err, it, "type 'array'", "%s.roles", ctx->name);
    uint32_t n = 0;
    char key[16];
    bool exception = access_localhost_exception(ctx->client);
    while (bson_iter_next(&el)) {
        const char *role = NULL, *db = ctx->db;
        if (BSON_ITER_HOLDS_UTF8(&el)) {
            role = bson_iter_utf8(&el, NULL);
        } else if (BSON_ITER_HOLDS_DOCUMENT(&el)) {
            bson_iter_t f;
            bson_iter_recurse(&el, &f);
            db = NULL;
            while (bson_iter_next(&f)) {
                const char *k = bson_iter_key(&f);
                if (strcmp(k, "role") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                    role = bson_iter_utf8(&f, NULL);
                else if (strcmp(k, "db") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                    db = bson_iter_utf8(&f, NULL);
                else
                    return dberr_set(err, DBERR_BAD_VALUE,
                                     "Role names must be either strings or objects of the form "
                                     "{role: \"roleName\", db: \"databaseName\"}");
            }
        }
        if (!role || !db || !*role || !*db)
            return dberr_set(err, DBERR_BAD_VALUE,
                             "Role names must be either strings or objects of the form {role: "
                             "\"roleName\", db: \"databaseName\"}");
        if (!priv_is_builtin_role(role, db) && !access_find_role(db, role))
            return dberr_set(err, 31, "Could not find role: %s@%s", role, db);
        if (!exception && !access_allowed(ctx, PRIV_TARGET_DB, db, NULL, ACT_GRANT_ROLE))
            return access_refuse(ctx, err);
        bson_t one;
        bson_append_document_begin(out, cmd_index_key(n++, key, sizeof key), -1, &one);
        BSON_APPEND_UTF8(&one, "role", role);
        BSON_APPEND_UTF8(&one, "db", db);
        bson_append_document_end(out, &one);
    }
    return true;
}

/* ---- checks ---- */

bool access_allowed(cmd_ctx_t *ctx, priv_target_kind_t kind, const char *db, const char *coll,
                    priv_action_t action)
{
    if (!server.auth)
        return true;
    cmd_auth_t *a = ctx->client->auth;
    if (!a || !a->authenticated)
        return access_localhost_exception(ctx->client) && kind == PRIV_TARGET_DB && db &&
               strcmp(db, "admin") == 0 && (action == ACT_CREATE_USER || action == ACT_CREATE_ROLE);
    if (a->generation != access_gen)
        access_refresh(a);
    return priv_allows(&a->privs, kind, db, coll, action);
}

/* The command as the refusal shows it: passwords replaced by "xxx". */
static char *access_render_command(const bson_t *cmd)
{
    bson_t copy = BSON_INITIALIZER;
    bson_iter_t it;
    if (bson_iter_init(&it, cmd)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "pwd") == 0 || strcmp(k, "payload") == 0)
                BSON_APPEND_UTF8(&copy, k, "xxx");
            else
                bson_append_value(&copy, k, -1, bson_iter_value(&it));
        }
    }
    char *s = shellfmt_doc(&copy);
    bson_destroy(&copy);
    return s;
}

bool access_refuse(cmd_ctx_t *ctx, dberr_t *err)
{
    cmd_auth_t *a = ctx->client->auth;
    if (!a || !a->authenticated)
        return dberr_set(err, DBERR_UNAUTHORIZED, "command %s requires authentication",
                         ctx->name);
    char *s = access_render_command(ctx->cmd);
    dberr_set(err, DBERR_UNAUTHORIZED, "not authorized on %s to execute command %s", ctx->db, s);
    bson_free(s);
    return false;
}

bool access_check(cmd_ctx_t *ctx, const access_rule_t *rule, dberr_t *err)
{
    if (rule->kind == ACCESS_OPEN)
        return true;
    cmd_auth_t *a = ctx->client->auth;
    bool authed = a && a->authenticated;
    if (!authed && !(rule->kind == ACCESS_DB && access_allowed(ctx, PRIV_TARGET_DB, ctx->db, NULL,
                                                               rule->action)))
        return access_refuse(ctx, err);
    bool ok = true;
    switch (rule->kind) {
    case ACCESS_OPEN:
    case ACCESS_AUTHED:
        break;
    case ACCESS_NS:
        ok = access_need_arg(ctx, rule->action, err);
        break;
    case ACCESS_DB:
        ok = access_need(ctx, PRIV_TARGET_DB, ctx->db, NULL, rule->action, err);
        break;
    case ACCESS_CLUSTER:
        ok = access_need(ctx, PRIV_TARGET_CLUSTER, NULL, NULL, rule->action, err);
        break;
    case ACCESS_CUSTOM:
        ok = rule->check(ctx, err);
        break;
    }
    if (!ok)
        return false;
    bson_iter_t it;
    if (cmd_find(ctx, "fence", &it) &&
        !access_need(ctx, PRIV_TARGET_DB, ctx->db, NULL, ACT_FENCE, err))
        return false;
    if (cmd_find(ctx, "bypassDocumentValidation", &it) && bson_iter_as_bool(&it) &&
        !access_need_arg(ctx, ACT_BYPASS_DOCUMENT_VALIDATION, err))
        return false;
    return true;
}

bool access_db_visible(cmd_ctx_t *ctx, const char *db)
{
    if (!server.auth || access_allowed(ctx, PRIV_TARGET_CLUSTER, NULL, NULL, ACT_LIST_DATABASES))
        return true;
    cmd_auth_t *a = ctx->client->auth;
    if (!a || !a->authenticated)
        return false;
    for (size_t i = 0; i < a->privs.n; i++) {
        const priv_t *p = &a->privs.v[i];
        if (p->pattern == PRIV_ANY || p->pattern == PRIV_ANY_NORMAL || p->pattern == PRIV_COLL ||
            ((p->pattern == PRIV_DB || p->pattern == PRIV_NS) && strcmp(p->db, db) == 0))
            return true;
    }
    return false;
}

/* ---- parameters ---- */

int32_t access_iterations(scram_mech_t m)
{
    return m == SCRAM_SHA_1 ? access_iter_sha1 : access_iter_sha256;
}

bool access_set_iterations(scram_mech_t m, int64_t n, dberr_t *err)
{
    int64_t min = m == SCRAM_SHA_1 ? SCRAM_SHA1_ITER_MIN : SCRAM_SHA256_ITER_MIN;
    const char *name = m == SCRAM_SHA_1 ? "scramIterationCount" : "scramSHA256IterationCount";
    if (n < min || n > INT32_MAX)
        return dberr_set(err, DBERR_BAD_VALUE,
                         "Invalid value for parameter %s: %lld is not greater than or equal to "
                         "%lld",
                         name, (long long)n, (long long)min);
    if (m == SCRAM_SHA_1)
        access_iter_sha1 = (int32_t)n;
    else
        access_iter_sha256 = (int32_t)n;
    return true;
}
