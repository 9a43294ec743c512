/* usermgmt: what the user commands (users.c) and the role commands
 * (roles.c) share — their required arguments, the name arguments of
 * usersInfo and rolesInfo, and dropping every user or role of a database. */
#ifndef ATOMDB_USERMGMT_H
#define ATOMDB_USERMGMT_H

#include "cmd/access.h"

/* The two kinds of principal the commands manage. */
typedef enum usermgmt_kind {
    USERMGMT_USER,
    USERMGMT_ROLE,
} usermgmt_kind_t;

/* The stored user or role ctx->db.`name` the command names, or NULL with
 * mongod's UserNotFound 11 / RoleNotFound 31. Borrowed until the next
 * write. */
record_t *usermgmt_existing(const cmd_ctx_t *ctx, usermgmt_kind_t kind, const char *name,
                            dberr_t *err);

/* Finds the command's required argument `key` into `it`; when it is
 * absent, fails with mongod's IDL error 40414 "BSON field '<cmd>.<key>' is
 * missing but a required field". */
bool usermgmt_required(const cmd_ctx_t *ctx, const char *key, bson_iter_t *it, dberr_t *err);

/* Calls `fn` with each element of the array at `arg`, or with `arg` itself
 * when it is not an array (usersInfo and rolesInfo take one name or a list
 * of them); stops at the first that fails. */
bool usermgmt_each_name(const bson_iter_t *arg,
                        bool (*fn)(const bson_iter_t *name, void *fn_arg, dberr_t *err),
                        void *fn_arg, dberr_t *err);

/* dropAllUsersFromDatabase / dropAllRolesFromDatabase: removes from `c`
 * (admin.system.users or admin.system.roles; NULL: none exist) every
 * document of ctx->db and replies {n}; `removed` (may be NULL) is then
 * called with the db and the `role` field of each removed document. */
void usermgmt_drop_all(cmd_ctx_t *ctx, collection_t *c,
                       void (*removed)(const char *db, const char *role));

#endif
