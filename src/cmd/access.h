/* access: who a connection is and what it may do — the per-connection
 * authentication state, the table of what every command needs (one row per
 * command name, checked in the one dispatch place), users and roles read
 * from admin.system.users / admin.system.roles, and mongod's localhost
 * exception. Loop thread only. See docs/security.md. */
#ifndef ATOMDB_ACCESS_H
#define ATOMDB_ACCESS_H

#include <bson/bson.h>
#include <stdbool.h>

#include "auth/privilege.h"
#include "auth/scram.h"
#include "cmd/cmd-private.h"
#include "store/collection.h"

/* Where users and roles live, as in mongod. */
#define ACCESS_ADMIN_DB "admin"
#define ACCESS_USERS "system.users"
#define ACCESS_ROLES "system.roles"

/* A connection's authentication state (client->auth). */
typedef struct cmd_auth {
    bool authenticated;
    char user[SCRAM_USER_MAX + 1]; /* when authenticated */
    char db[64];
    priv_set_t privs;            /* the user's privileges, resolved from its roles */
    bson_t roles;                /* the user's roles at resolution: [{role, db}] */
    uint64_t generation;         /* access_generation() when privs were resolved */
    uint64_t owner;              /* opaque id of user@db, for cursor/session ownership */
    /* -- a SASL conversation in progress (cmd/sasl.c) -- */
    scram_server_t *conv;        /* NULL when none */
    char conv_db[64];            /* the database it authenticates against */
    bool conv_skip_empty;        /* options.skipEmptyExchange */
    bool conv_awaiting_empty;    /* the proof was right; waiting for the empty last step */
    bool conv_speculative;       /* started inside hello */
    uv_timer_t *backoff_timer;   /* a saslStart parked after repeated failures */
    bool backoff_served;         /* ... has waited: run it now */
    char *lock_pending;          /* the lock name of a parked acquireLock (cmd/locks.c) */
} cmd_auth_t;

/* How a command's access is decided. */
typedef enum access_kind {
    ACCESS_OPEN,     /* no authentication needed (handshake, authentication itself) */
    ACCESS_AUTHED,   /* any authenticated user; the handler checks the rest */
    ACCESS_NS,       /* `action` on the collection named by the command's first value */
    ACCESS_DB,       /* `action` on the database the command runs against */
    ACCESS_CLUSTER,  /* `action` on the cluster */
    ACCESS_CUSTOM,   /* `check` decides (aggregate, explain, renameCollection, ...) */
} access_kind_t;

/* One row of the access table. */
typedef struct access_rule {
    const char *name;     /* the command name as dispatched */
    access_kind_t kind;
    priv_action_t action; /* ACCESS_NS / _DB / _CLUSTER */
    bool (*check)(cmd_ctx_t *ctx, dberr_t *err); /* ACCESS_CUSTOM */
} access_rule_t;

/* The rule for command `name`, or NULL when the table has none (a defect:
 * test_access fails for every dispatched command without a row). */
const access_rule_t *access_rule_find(const char *name);

/* With access control on: may this request run? False with Unauthorized
 * 13 and mongod's message ("command find requires authentication", "not
 * authorized on app to execute command { ... }"). Also checks the generic
 * arguments that need actions of their own (fence, bypassDocumentValidation). */
bool access_check(cmd_ctx_t *ctx, const access_rule_t *rule, dberr_t *err);

/* True when access control lets the connection do `action` on the target
 * (always true with access control off). For handlers that check per item. */
bool access_allowed(cmd_ctx_t *ctx, priv_target_kind_t kind, const char *db, const char *coll,
                    priv_action_t action);
/* Fails with the "not authorized" message for the current command. */
bool access_refuse(cmd_ctx_t *ctx, dberr_t *err);

/* listDatabases without the listDatabases action: true for the databases
 * the user holds some privilege on (mongod's authorizedDatabases). */
bool access_db_visible(cmd_ctx_t *ctx, const char *db);

/* The connection's state, created on first use. */
cmd_auth_t *access_auth(cmd_client_t *client);
/* Frees the connection's state (the connection closed). */
void access_client_closed(cmd_client_t *client);
/* Logs the connection in as user@db (after a successful conversation). */
bool access_login(cmd_client_t *client, const char *db, const char *user, dberr_t *err);
/* Who owns what the connection creates (cursors, sessions): an opaque id
 * of the logged-in user, 0 when nobody is. */
uint64_t access_owner(const cmd_client_t *client);
/* logout: forgets who the connection is. */
void access_logout(cmd_client_t *client);

/* Users and roles changed: connections re-resolve their privileges before
 * their next command (a dropped user's connections lose them). */
void access_changed(void);
/* A number that changes whenever access_changed runs (caches of
 * verified users compare it). */
uint64_t access_generation(void);

/* The stored user db.user, or NULL. Borrowed until the next write. */
record_t *access_find_user(const char *db, const char *user);
/* The stored role db.role, or NULL. */
record_t *access_find_role(const char *db, const char *role);
/* admin.system.users / admin.system.roles, created when `create`. */
collection_t *access_users(bool create, dberr_t *err);
collection_t *access_roles(bool create, dberr_t *err);

/* Writes the user or role document `doc` into `c` (admin.system.users or
 * admin.system.roles as access_users/access_roles(true) gave it; NULL:
 * false, their error already set), replacing `old` when not NULL, and
 * tells the cache (access_changed). */
bool access_store(collection_t *c, record_t *old, const bson_t *doc, dberr_t *err);

/* NotImplemented when the user/role command gives authenticationRestrictions. */
bool access_refuse_restrictions(const cmd_ctx_t *ctx, dberr_t *err);

/* Pushes onto `out` (referenced) the records of `c` (admin.system.users or
 * admin.system.roles; NULL: none) whose db is `db`: the users or roles
 * that dropAll*FromDatabase removes. */
void access_records_of_db(collection_t *c, const char *db, recvec_t *out);

/* Adds to `out` the privileges of the roles in `roles` ([{role, db}]),
 * built-in or user-defined, and their inherited roles; when
 * `inherited` is not NULL also appends every role reached to it (as
 * [{role, db}] entries keyed from *n). */
void access_resolve_roles(const bson_t *roles, priv_set_t *out, bson_t *inherited, uint32_t *n);

/* Reads a roles argument (strings name roles on ctx->db, or {role, db})
 * into the array `out` of {role, db}: RoleNotFound 31 for a role that does
 * not exist, Unauthorized 13 when the caller may not grant it. */
bool access_role_list(cmd_ctx_t *ctx, const bson_iter_t *it, bson_t *out, dberr_t *err);

/* Appends to the array `out` the roles of the array `old` that are not in
 * `given` (both [{role, db}]), then, when `grant`, those of `given`: the
 * new role list of grantRolesTo* (grant) and revokeRolesFrom*. */
void access_role_list_change(const bson_t *old, const bson_t *given, bool grant, bson_t *out);

/* True while mongod's localhost exception is open for this connection:
 * access control on, the client on loopback and not logged in, and no
 * user or role exists yet. */
bool access_localhost_exception(const cmd_client_t *client);

/* The iteration counts new credentials get (setParameter
 * scramIterationCount / scramSHA256IterationCount). */
int32_t access_iterations(scram_mech_t m);
bool access_set_iterations(scram_mech_t m, int64_t n, dberr_t *err);

/* Names of the dispatched commands with no access rule, appended to the
 * array `out`; returns how many (cmd/dispatch.c). */
int cmd_access_unruled(bson_t *out);

#endif
