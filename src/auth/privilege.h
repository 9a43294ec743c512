/* privilege: mongod's authorization model — actions, resource patterns,
 * privileges (a pattern and a set of actions), the built-in roles as
 * privilege lists, and the check "does this set allow action A on resource
 * R". atomdb's own actions for lease locks and fencing are here too
 * (docs/security.md). Pure data and functions; no I/O. */
#ifndef ATOMDB_PRIVILEGE_H
#define ATOMDB_PRIVILEGE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/dberr.h"

/* The actions (mongod's action_type.idl names; atomdb's own are marked). */
typedef enum priv_action {
    ACT_FIND,
    ACT_INSERT,
    ACT_UPDATE,
    ACT_REMOVE,
    ACT_BYPASS_DOCUMENT_VALIDATION,
    ACT_CREATE_COLLECTION,
    ACT_DROP_COLLECTION,
    ACT_CREATE_INDEX,
    ACT_DROP_INDEX,
    ACT_COLL_MOD,
    ACT_LIST_COLLECTIONS,
    ACT_LIST_INDEXES,
    ACT_COLL_STATS,
    ACT_DB_STATS,
    ACT_DB_HASH,
    ACT_VALIDATE,
    ACT_RENAME_COLLECTION_SAME_DB,
    ACT_DROP_DATABASE,
    ACT_KILL_CURSORS,
    ACT_CHANGE_STREAM,
    ACT_PLAN_CACHE_READ,
    ACT_LIST_DATABASES,
    ACT_SERVER_STATUS,
    ACT_GET_PARAMETER,
    ACT_SET_PARAMETER,
    ACT_GET_CMD_LINE_OPTS,
    ACT_GET_LOG,
    ACT_HOST_INFO,
    ACT_REPL_SET_GET_CONFIG,
    ACT_REPL_SET_GET_STATUS,
    ACT_REPL_SET_CONFIGURE,
    ACT_SHUTDOWN,
    ACT_FSYNC,
    ACT_UNLOCK,
    ACT_KILL_ANY_SESSION,
    ACT_LIST_SESSIONS,
    ACT_CREATE_USER,
    ACT_DROP_USER,
    ACT_CHANGE_PASSWORD,
    ACT_CHANGE_CUSTOM_DATA,
    ACT_GRANT_ROLE,
    ACT_REVOKE_ROLE,
    ACT_VIEW_USER,
    ACT_CREATE_ROLE,
    ACT_DROP_ROLE,
    ACT_VIEW_ROLE,
    ACT_LOCK,          /* atomdb: acquireLock, renewLock, releaseLock */
    ACT_LOCK_INFO,     /* atomdb: lockInfo, listLocks */
    ACT_FENCE,         /* atomdb: a write carrying fence: {lock, token} */
    ACT_INTERNAL,      /* atomdb test builds: atomdbFault */
    ACT_INPROG,        /* currentOp, $currentOp */
    ACT_KILLOP,        /* killOp */
    ACT_TOP,           /* top */
    ACT_ENABLE_PROFILER, /* profile */
    ACT_CONVERT_TO_CAPPED, /* convertToCapped */
    ACT__COUNT
} priv_action_t;

typedef uint64_t priv_actions_t; /* a set of actions, bit (1 << action) */

#define PRIV_BIT(a) ((priv_actions_t)1 << (a))
#define PRIV_ALL_ACTIONS ((PRIV_BIT(ACT__COUNT)) - 1)

/* mongod's action name; NULL for an out-of-range value. */
const char *priv_action_name(priv_action_t a);
/* Parses an action name; false for one atomdb does not know. */
bool priv_action_parse(const char *name, priv_action_t *out);

/* Resource patterns (mongod's ResourcePattern). */
typedef enum priv_pattern {
    PRIV_NS,       /* {db: "d", collection: "c"}: exactly d.c */
    PRIV_DB,       /* {db: "d", collection: ""}: database d and its non-system collections */
    PRIV_COLL,     /* {db: "", collection: "c"}: collection c in any database */
    PRIV_ANY_NORMAL, /* {db: "", collection: ""}: every database and non-system collection */
    PRIV_CLUSTER,  /* {cluster: true} */
    PRIV_ANY,      /* {anyResource: true} */
} priv_pattern_t;

/* One privilege: the actions it allows on resources matching the pattern. */
typedef struct priv {
    priv_pattern_t pattern;
    char db[64];
    char coll[256];
    priv_actions_t actions;
} priv_t;

/* A list of privileges (an owned array). */
typedef struct priv_set {
    priv_t *v;
    size_t n, cap;
} priv_set_t;

void priv_set_init(priv_set_t *s);
void priv_set_destroy(priv_set_t *s);
void priv_set_clear(priv_set_t *s);
/* Adds `actions` on the pattern, merging into an existing same pattern. */
void priv_set_add(priv_set_t *s, priv_pattern_t pattern, const char *db, const char *coll,
                  priv_actions_t actions);
/* Adds every privilege of `other`. */
void priv_set_merge(priv_set_t *s, const priv_set_t *other);
/* Removes `actions` from privileges of exactly this pattern. */
void priv_set_remove(priv_set_t *s, priv_pattern_t pattern, const char *db, const char *coll,
                     priv_actions_t actions);

/* What a command needs an action on. */
typedef enum priv_target_kind {
    PRIV_TARGET_NS,      /* a collection db.coll */
    PRIV_TARGET_DB,      /* the database db itself */
    PRIV_TARGET_CLUSTER, /* the server */
} priv_target_kind_t;

/* True when `s` allows `action` on the target (`coll` for NS only). */
bool priv_allows(const priv_set_t *s, priv_target_kind_t kind, const char *db, const char *coll,
                 priv_action_t action);

/* Adds the privileges of built-in role `role` defined on `db`; false when
 * there is no such built-in role on that database (the AnyDatabase and
 * cluster roles exist on admin only). */
bool priv_builtin_role(const char *role, const char *db, priv_set_t *out);
/* True when `role`@`db` names a built-in role. */
bool priv_is_builtin_role(const char *role, const char *db);

/* Parses one privilege document {resource: {...}, actions: [...]} (as
 * createRole takes) into `out`. BadValue 2 / FailedToParse 9 when wrong. */
bool priv_parse(const bson_t *doc, priv_set_t *out, dberr_t *err);
/* Appends `s` as mongod shows privileges: [{resource, actions}]. */
void priv_set_append(const priv_set_t *s, bson_t *arr);

#endif
