/* privilege: actions, resource patterns and the built-in roles as mongod
 * defines them (src/mongo/db/auth/builtin_roles.cpp), reduced to the
 * actions atomdb's commands need, plus atomdb's lock and fence actions. */
#include "auth/privilege.h"

#include <string.h>

#include "util/bsonview.h"

static const char *const priv_action_names[ACT__COUNT] = {
    [ACT_FIND] = "find",
    [ACT_INSERT] = "insert",
    [ACT_UPDATE] = "update",
    [ACT_REMOVE] = "remove",
    [ACT_BYPASS_DOCUMENT_VALIDATION] = "bypassDocumentValidation",
    [ACT_CREATE_COLLECTION] = "createCollection",
    [ACT_DROP_COLLECTION] = "dropCollection",
    [ACT_CREATE_INDEX] = "createIndex",
    [ACT_DROP_INDEX] = "dropIndex",
    [ACT_COLL_MOD] = "collMod",
    [ACT_LIST_COLLECTIONS] = "listCollections",
    [ACT_LIST_INDEXES] = "listIndexes",
    [ACT_COLL_STATS] = "collStats",
    [ACT_DB_STATS] = "dbStats",
    [ACT_DB_HASH] = "dbHash",
    [ACT_VALIDATE] = "validate",
    [ACT_RENAME_COLLECTION_SAME_DB] = "renameCollectionSameDB",
    [ACT_DROP_DATABASE] = "dropDatabase",
    [ACT_KILL_CURSORS] = "killCursors",
    [ACT_CHANGE_STREAM] = "changeStream",
    [ACT_PLAN_CACHE_READ] = "planCacheRead",
    [ACT_LIST_DATABASES] = "listDatabases",
    [ACT_SERVER_STATUS] = "serverStatus",
    [ACT_GET_PARAMETER] = "getParameter",
    [ACT_SET_PARAMETER] = "setParameter",
    [ACT_GET_CMD_LINE_OPTS] = "getCmdLineOpts",
    [ACT_GET_LOG] = "getLog",
    [ACT_HOST_INFO] = "hostInfo",
    [ACT_REPL_SET_GET_CONFIG] = "replSetGetConfig",
    [ACT_REPL_SET_GET_STATUS] = "replSetGetStatus",
    [ACT_REPL_SET_CONFIGURE] = "replSetConfigure",
    [ACT_SHUTDOWN] = "shutdown",
    [ACT_FSYNC] = "fsync",
    [ACT_UNLOCK] = "unlock",
    [ACT_KILL_ANY_SESSION] = "killAnySession",
    [ACT_LIST_SESSIONS] = "listSessions",
    [ACT_CREATE_USER] = "createUser",
    [ACT_DROP_USER] = "dropUser",
    [ACT_CHANGE_PASSWORD] = "changePassword",
    [ACT_CHANGE_CUSTOM_DATA] = "changeCustomData",
    [ACT_GRANT_ROLE] = "grantRole",
    [ACT_REVOKE_ROLE] = "revokeRole",
    [ACT_VIEW_USER] = "viewUser",
    [ACT_CREATE_ROLE] = "createRole",
    [ACT_DROP_ROLE] = "dropRole",
    [ACT_VIEW_ROLE] = "viewRole",
    [ACT_LOCK] = "atomdbLock",
    [ACT_LOCK_INFO] = "atomdbLockInfo",
    [ACT_FENCE] = "atomdbFence",
    [ACT_INTERNAL] = "atomdbInternal",
    [ACT_INPROG] = "inprog",
    [ACT_KILLOP] = "killop",
    [ACT_TOP] = "top",
    [ACT_ENABLE_PROFILER] = "enableProfiler",
    [ACT_CONVERT_TO_CAPPED] = "convertToCapped",
};

const char *priv_action_name(priv_action_t a)
{
    return (unsigned)a < ACT__COUNT ? priv_action_names[a] : NULL;
}

bool priv_action_parse(const char *name, priv_action_t *out)
{
    for (int i = 0; i < ACT__COUNT; i++)
        if (priv_action_names[i] && strcmp(priv_action_names[i], name) == 0)
            return (*out = (priv_action_t)i, true);
    return false;
}

/* ---- sets ---- */

void priv_set_init(priv_set_t *s)
{
    memset(s, 0, sizeof *s);
}

void priv_set_destroy(priv_set_t *s)
{
    bson_free(s->v);
    memset(s, 0, sizeof *s);
}

void priv_set_clear(priv_set_t *s)
{
    s->n = 0;
}

static bool priv_same_pattern(const priv_t *p, priv_pattern_t pattern, const char *db,
                              const char *coll)
{
    return p->pattern == pattern && strcmp(p->db, db ? db : "") == 0 &&
           strcmp(p->coll, coll ? coll : "") == 0;
}

void priv_set_add(priv_set_t *s, priv_pattern_t pattern, const char *db, const char *coll,
                  priv_actions_t actions)
{
    for (size_t i = 0; i < s->n; i++) {
        if (priv_same_pattern(&s->v[i], pattern, db, coll)) {
            s->v[i].actions |= actions;
            return;
        }
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->v = bson_realloc(s->v, s->cap * sizeof *s->v);
    }
    priv_t *p = &s->v[s->n++];
    memset(p, 0, sizeof *p);
    p->pattern = pattern;
    snprintf(p->db, sizeof p->db, "%s", db ? db : "");
    snprintf(p->coll, sizeof p->coll, "%s", coll ? coll : "");
    p->actions = actions;
}

void priv_set_merge(priv_set_t *s, const priv_set_t *other)
{
    for (size_t i = 0; i < other->n; i++)
        priv_set_add(s, other->v[i].pattern, other->v[i].db, other->v[i].coll,
                     other->v[i].actions);
}

void priv_set_remove(priv_set_t *s, priv_pattern_t pattern, const char *db, const char *coll,
                     priv_actions_t actions)
{
    for (size_t i = 0; i < s->n; i++) {
        if (priv_same_pattern(&s->v[i], pattern, db, coll)) {
            s->v[i].actions &= ~actions;
            if (!s->v[i].actions) {
                s->v[i] = s->v[s->n - 1];
                s->n--;
            }
            return;
        }
    }
}

static bool priv_is_system(const char *coll)
{
    return strncmp(coll, "system.", 7) == 0;
}

bool priv_allows(const priv_set_t *s, priv_target_kind_t kind, const char *db, const char *coll,
                 priv_action_t action)
{
    priv_actions_t bit = PRIV_BIT(action);
    bool normal_ns = kind == PRIV_TARGET_NS && !priv_is_system(coll);
    for (size_t i = 0; i < s->n; i++) {
        const priv_t *p = &s->v[i];
        if (!(p->actions & bit))
            continue;
        switch (p->pattern) {
        case PRIV_ANY:
            return true;
        case PRIV_CLUSTER:
            if (kind == PRIV_TARGET_CLUSTER)
                return true;
            break;
        case PRIV_ANY_NORMAL:
            if (kind == PRIV_TARGET_DB || normal_ns)
                return true;
            break;
        case PRIV_DB:
            if ((kind == PRIV_TARGET_DB || normal_ns) && strcmp(p->db, db) == 0)
                return true;
            break;
        case PRIV_COLL:
            if (normal_ns && strcmp(p->coll, coll) == 0)
                return true;
            break;
        case PRIV_NS:
            if (kind == PRIV_TARGET_NS && strcmp(p->db, db) == 0 && strcmp(p->coll, coll) == 0)
                return true;
            break;
        }
    }
    return false;
}

/* ---- built-in roles ---- */

#define B PRIV_BIT
static const priv_actions_t priv_read = B(ACT_FIND) | B(ACT_LIST_COLLECTIONS) |
                                        B(ACT_LIST_INDEXES) | B(ACT_COLL_STATS) |
                                        B(ACT_DB_STATS) | B(ACT_DB_HASH) | B(ACT_KILL_CURSORS) |
                                        B(ACT_CHANGE_STREAM) | B(ACT_PLAN_CACHE_READ);
static const priv_actions_t priv_write = B(ACT_INSERT) | B(ACT_UPDATE) | B(ACT_REMOVE) |
                                         B(ACT_CREATE_COLLECTION) | B(ACT_DROP_COLLECTION) |
                                         B(ACT_CREATE_INDEX) | B(ACT_DROP_INDEX) |
                                         B(ACT_RENAME_COLLECTION_SAME_DB) |
                                         B(ACT_CONVERT_TO_CAPPED);
static const priv_actions_t priv_lock = B(ACT_LOCK) | B(ACT_LOCK_INFO) | B(ACT_FENCE);
static const priv_actions_t priv_db_admin =
    B(ACT_COLL_MOD) | B(ACT_COLL_STATS) | B(ACT_CREATE_COLLECTION) | B(ACT_CREATE_INDEX) |
    B(ACT_DB_STATS) | B(ACT_DB_HASH) | B(ACT_DROP_COLLECTION) | B(ACT_DROP_DATABASE) |
    B(ACT_DROP_INDEX) | B(ACT_LIST_COLLECTIONS) | B(ACT_LIST_INDEXES) |
    B(ACT_PLAN_CACHE_READ) | B(ACT_RENAME_COLLECTION_SAME_DB) | B(ACT_VALIDATE) |
    B(ACT_BYPASS_DOCUMENT_VALIDATION) | B(ACT_ENABLE_PROFILER) | B(ACT_CONVERT_TO_CAPPED);
static const priv_actions_t priv_user_admin =
    B(ACT_CHANGE_CUSTOM_DATA) | B(ACT_CHANGE_PASSWORD) | B(ACT_CREATE_ROLE) |
    B(ACT_CREATE_USER) | B(ACT_DROP_ROLE) | B(ACT_DROP_USER) | B(ACT_GRANT_ROLE) |
    B(ACT_REVOKE_ROLE) | B(ACT_VIEW_ROLE) | B(ACT_VIEW_USER);
static const priv_actions_t priv_cluster_monitor =
    B(ACT_SERVER_STATUS) | B(ACT_GET_CMD_LINE_OPTS) | B(ACT_GET_LOG) | B(ACT_GET_PARAMETER) |
    B(ACT_HOST_INFO) | B(ACT_LIST_DATABASES) | B(ACT_LIST_SESSIONS) |
    B(ACT_REPL_SET_GET_CONFIG) | B(ACT_REPL_SET_GET_STATUS) | B(ACT_LOCK_INFO) | B(ACT_INPROG) |
    B(ACT_TOP);
static const priv_actions_t priv_host_manager = B(ACT_SHUTDOWN) | B(ACT_FSYNC) | B(ACT_UNLOCK) |
                                                B(ACT_SET_PARAMETER) | B(ACT_KILL_ANY_SESSION) |
                                                B(ACT_KILLOP);
static const priv_actions_t priv_cluster_manager = B(ACT_REPL_SET_CONFIGURE) | B(ACT_LIST_DATABASES);
#undef B

/* The admin database's collections that hold users and roles. */
static void priv_add_auth_collections(priv_set_t *out, priv_actions_t actions)
{
    priv_set_add(out, PRIV_NS, "admin", "system.users", actions);
    priv_set_add(out, PRIV_NS, "admin", "system.roles", actions);
    priv_set_add(out, PRIV_NS, "admin", "system.version", actions);
}

typedef void (*priv_role_fn)(const char *db, priv_set_t *out);

static void role_read(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_DB, db, "", priv_read);
}

static void role_read_write(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_DB, db, "", priv_read | priv_write | priv_lock);
}

static void role_db_admin(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_DB, db, "", priv_db_admin);
}

static void role_user_admin(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_DB, db, "", priv_user_admin);
}

static void role_db_owner(const char *db, priv_set_t *out)
{
    role_read_write(db, out);
    role_db_admin(db, out);
    role_user_admin(db, out);
}

static void role_lock_user(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_DB, db, "", priv_lock);
}

static void role_read_any(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_ANY_NORMAL, "", "", priv_read);
    priv_set_add(out, PRIV_CLUSTER, "", "", PRIV_BIT(ACT_LIST_DATABASES));
}

static void role_read_write_any(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_ANY_NORMAL, "", "", priv_read | priv_write | priv_lock);
    priv_set_add(out, PRIV_CLUSTER, "", "", PRIV_BIT(ACT_LIST_DATABASES));
}

static void role_user_admin_any(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_ANY_NORMAL, "", "", priv_user_admin);
    priv_set_add(out, PRIV_CLUSTER, "", "", PRIV_BIT(ACT_LIST_DATABASES));
    priv_add_auth_collections(out, PRIV_BIT(ACT_FIND));
}

static void role_db_admin_any(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_ANY_NORMAL, "", "", priv_db_admin);
    priv_set_add(out, PRIV_CLUSTER, "", "", PRIV_BIT(ACT_LIST_DATABASES));
}

static void role_cluster_monitor(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_CLUSTER, "", "", priv_cluster_monitor);
    priv_set_add(out, PRIV_ANY_NORMAL, "", "",
                 PRIV_BIT(ACT_COLL_STATS) | PRIV_BIT(ACT_DB_STATS) | PRIV_BIT(ACT_LIST_INDEXES) |
                     PRIV_BIT(ACT_LIST_COLLECTIONS));
}

static void role_host_manager(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_CLUSTER, "", "", priv_host_manager);
    priv_set_add(out, PRIV_ANY_NORMAL, "", "", PRIV_BIT(ACT_KILL_CURSORS));
}

static void role_cluster_manager(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_CLUSTER, "", "", priv_cluster_manager);
}

static void role_cluster_admin(const char *db, priv_set_t *out)
{
    role_cluster_manager(db, out);
    role_cluster_monitor(db, out);
    role_host_manager(db, out);
    priv_set_add(out, PRIV_ANY_NORMAL, "", "", PRIV_BIT(ACT_DROP_DATABASE));
}

static void role_backup(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_ANY_NORMAL, "", "",
                 PRIV_BIT(ACT_FIND) | PRIV_BIT(ACT_LIST_COLLECTIONS) | PRIV_BIT(ACT_LIST_INDEXES) |
                     PRIV_BIT(ACT_COLL_STATS) | PRIV_BIT(ACT_DB_STATS) | PRIV_BIT(ACT_DB_HASH) |
                     PRIV_BIT(ACT_KILL_CURSORS));
    priv_set_add(out, PRIV_CLUSTER, "", "",
                 PRIV_BIT(ACT_LIST_DATABASES) | PRIV_BIT(ACT_SERVER_STATUS) |
                     PRIV_BIT(ACT_FSYNC) | PRIV_BIT(ACT_UNLOCK));
    priv_add_auth_collections(out, PRIV_BIT(ACT_FIND));
}

static void role_restore(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_ANY_NORMAL, "", "",
                 PRIV_BIT(ACT_INSERT) | PRIV_BIT(ACT_UPDATE) | PRIV_BIT(ACT_REMOVE) |
                     PRIV_BIT(ACT_FIND) | PRIV_BIT(ACT_CREATE_COLLECTION) |
                     PRIV_BIT(ACT_DROP_COLLECTION) | PRIV_BIT(ACT_CREATE_INDEX) |
                     PRIV_BIT(ACT_COLL_MOD) | PRIV_BIT(ACT_LIST_COLLECTIONS) |
                     PRIV_BIT(ACT_LIST_INDEXES) | PRIV_BIT(ACT_BYPASS_DOCUMENT_VALIDATION) |
                     PRIV_BIT(ACT_CREATE_USER) | PRIV_BIT(ACT_CREATE_ROLE) |
                     PRIV_BIT(ACT_GRANT_ROLE) | PRIV_BIT(ACT_VIEW_USER) | PRIV_BIT(ACT_VIEW_ROLE));
    priv_set_add(out, PRIV_CLUSTER, "", "", PRIV_BIT(ACT_LIST_DATABASES));
    priv_add_auth_collections(out, PRIV_BIT(ACT_FIND) | PRIV_BIT(ACT_INSERT) |
                                       PRIV_BIT(ACT_UPDATE) | PRIV_BIT(ACT_REMOVE));
}

static void role_root(const char *db, priv_set_t *out)
{
    role_read_write_any(db, out);
    role_db_admin_any(db, out);
    role_user_admin_any(db, out);
    role_cluster_admin(db, out);
    role_restore(db, out);
    role_backup(db, out);
}

static void role_system(const char *db, priv_set_t *out)
{
    priv_set_add(out, PRIV_ANY, "", "", PRIV_ALL_ACTIONS);
}

static const struct {
    const char *name;
    bool admin_only; /* defined on admin only */
    priv_role_fn fn;
} priv_builtin[] = {
    {"read", false, role_read},
    {"readWrite", false, role_read_write},
    {"dbAdmin", false, role_db_admin},
    {"userAdmin", false, role_user_admin},
    {"dbOwner", false, role_db_owner},
    {"lockUser", false, role_lock_user},
    {"readAnyDatabase", true, role_read_any},
    {"readWriteAnyDatabase", true, role_read_write_any},
    {"userAdminAnyDatabase", true, role_user_admin_any},
    {"dbAdminAnyDatabase", true, role_db_admin_any},
    {"clusterMonitor", true, role_cluster_monitor},
    {"clusterManager", true, role_cluster_manager},
    {"hostManager", true, role_host_manager},
    {"clusterAdmin", true, role_cluster_admin},
    {"backup", true, role_backup},
    {"restore", true, role_restore},
    {"root", true, role_root},
    {"__system", true, role_system},
};

static int priv_builtin_index(const char *role, const char *db)
{
    for (size_t i = 0; i < sizeof priv_builtin / sizeof priv_builtin[0]; i++)
        if (strcmp(priv_builtin[i].name, role) == 0)
            return (!priv_builtin[i].admin_only || strcmp(db, "admin") == 0) ? (int)i : -1;
    return -1;
}

bool priv_is_builtin_role(const char *role, const char *db)
{
    return priv_builtin_index(role, db) >= 0;
}

bool priv_builtin_role(const char *role, const char *db, priv_set_t *out)
{
    int i = priv_builtin_index(role, db);
    if (i < 0)
        return false;
    priv_builtin[i].fn(db, out);
    return true;
}

/* ---- documents ---- */

bool priv_parse(const bson_t *doc, priv_set_t *out, dberr_t *err)
{
    bson_iter_t it, res, a;
    bson_t rdoc;
    if (!bson_iter_init_find(&it, doc, "resource") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "BSON field 'privilege.resource' is missing but a required field");
    if (!bsonview_iter(&it, &rdoc))
        return dberr_set(err, DBERR_FAILED_TO_PARSE, "malformed privilege resource");
    priv_pattern_t pattern;
    char db[64] = "", coll[256] = "";
    if (bson_iter_init_find(&res, &rdoc, "cluster")) {
        if (!BSON_ITER_HOLDS_BOOL(&res) || !bson_iter_bool(&res))
            return dberr_set(err, DBERR_BAD_VALUE, "resource: {cluster: true} is the only form");
        pattern = PRIV_CLUSTER;
    } else if (bson_iter_init_find(&res, &rdoc, "anyResource")) {
        if (!BSON_ITER_HOLDS_BOOL(&res) || !bson_iter_bool(&res))
            return dberr_set(err, DBERR_BAD_VALUE, "resource: {anyResource: true} is the only form");
        pattern = PRIV_ANY;
    } else {
        bson_iter_t d, c;
        if (!bson_iter_init_find(&d, &rdoc, "db") || !BSON_ITER_HOLDS_UTF8(&d) ||
            !bson_iter_init_find(&c, &rdoc, "collection") || !BSON_ITER_HOLDS_UTF8(&c))
            return dberr_set(err, DBERR_BAD_VALUE,
                             "resource must be {db: string, collection: string}, {cluster: "
                             "true} or {anyResource: true}");
        uint32_t dl, cl;
        const char *ds = bson_iter_utf8(&d, &dl), *cs = bson_iter_utf8(&c, &cl);
        if (dl >= sizeof db || cl >= sizeof coll || strlen(ds) != dl || strlen(cs) != cl)
            return dberr_set(err, DBERR_BAD_VALUE, "resource name too long or malformed");
        memcpy(db, ds, dl + 1);
        memcpy(coll, cs, cl + 1);
        pattern = *db ? (*coll ? PRIV_NS : PRIV_DB) : (*coll ? PRIV_COLL : PRIV_ANY_NORMAL);
    }
    if (!bson_iter_init_find(&it, doc, "actions") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &a))
        return dberr_set(err, DBERR_FAILED_TO_PARSE,
                         "BSON field 'privilege.actions' is missing but a required field");
    priv_actions_t actions = 0;
    while (bson_iter_next(&a)) {
        priv_action_t act;
        if (!BSON_ITER_HOLDS_UTF8(&a))
            return dberr_set(err, DBERR_BAD_VALUE, "actions must be strings");
        if (!priv_action_parse(bson_iter_utf8(&a, NULL), &act))
            return dberr_set(err, DBERR_FAILED_TO_PARSE, "Unrecognized action privilege string: %s",
                             bson_iter_utf8(&a, NULL));
        actions |= PRIV_BIT(act);
    }
    priv_set_add(out, pattern, db, coll, actions);
    return true;
}

void priv_set_append(const priv_set_t *s, bson_t *arr)
{
    char key[16];
    for (size_t i = 0; i < s->n; i++) {
        const priv_t *p = &s->v[i];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        bson_t one, res, acts;
        bson_append_document_begin(arr, k, -1, &one);
        bson_append_document_begin(&one, "resource", -1, &res);
        if (p->pattern == PRIV_CLUSTER) {
            BSON_APPEND_BOOL(&res, "cluster", true);
        } else if (p->pattern == PRIV_ANY) {
            BSON_APPEND_BOOL(&res, "anyResource", true);
        } else {
            BSON_APPEND_UTF8(&res, "db", p->db);
            BSON_APPEND_UTF8(&res, "collection", p->coll);
        }
        bson_append_document_end(&one, &res);
        bson_append_array_begin(&one, "actions", -1, &acts);
        uint32_t n = 0;
        for (int a = 0; a < ACT__COUNT; a++) {
            if (p->actions & PRIV_BIT(a)) {
                char akey[16];
                const char *ak;
                bson_uint32_to_string(n++, &ak, akey, sizeof akey);
                BSON_APPEND_UTF8(&acts, ak, priv_action_names[a]);
            }
        }
        bson_append_array_end(&one, &acts);
        bson_append_document_end(arr, &one);
    }
}
