/* test_access: every command the dispatcher knows has a row in the access
 * table (src/cmd/access.c), so none runs unchecked under --auth, and the
 * built-in roles allow and refuse what mongod's do for a sample of actions. */
#include <string.h>

#include "auth/privilege.h"
#include "cmd/access.h"
#include "unit.h"

static void test_every_dispatched_command_has_an_access_rule(void)
{
    bson_t missing = BSON_INITIALIZER;
    int n = cmd_access_unruled(&missing);
    char *s = bson_as_relaxed_extended_json(&missing, NULL);
    CHECK(n == 0, "commands without an access rule: %s", s);
    bson_free(s);
    bson_destroy(&missing);
}

static void test_hello_and_saslstart_need_no_login_and_find_needs_find(void)
{
    const access_rule_t *r = access_rule_find("hello");
    CHECK(r && r->kind == ACCESS_OPEN, "hello is open");
    r = access_rule_find("saslStart");
    CHECK(r && r->kind == ACCESS_OPEN, "saslStart is open");
    r = access_rule_find("find");
    CHECK(r && r->kind == ACCESS_NS && r->action == ACT_FIND, "find needs find on its collection");
    r = access_rule_find("acquireLock");
    CHECK(r && r->kind == ACCESS_DB && r->action == ACT_LOCK, "acquireLock needs atomdbLock");
    CHECK(!access_rule_find("noSuchCommand"), "no rule for an unknown name");
}

static bool role_allows(const char *role, const char *role_db, priv_target_kind_t kind,
                        const char *db, const char *coll, priv_action_t a)
{
    priv_set_t s;
    priv_set_init(&s);
    bool known = priv_builtin_role(role, role_db, &s);
    bool ok = known && priv_allows(&s, kind, db, coll, a);
    priv_set_destroy(&s);
    return ok;
}

static void test_builtin_roles_allow_what_mongods_do(void)
{
    CHECK(role_allows("read", "app", PRIV_TARGET_NS, "app", "c", ACT_FIND), "read finds");
    CHECK(!role_allows("read", "app", PRIV_TARGET_NS, "app", "c", ACT_INSERT), "read cannot insert");
    CHECK(!role_allows("read", "app", PRIV_TARGET_NS, "other", "c", ACT_FIND),
          "read on app does not read other");
    CHECK(role_allows("readWrite", "app", PRIV_TARGET_NS, "app", "c", ACT_INSERT), "readWrite inserts");
    CHECK(role_allows("readWrite", "app", PRIV_TARGET_DB, "app", NULL, ACT_LOCK),
          "readWrite takes lease locks");
    CHECK(role_allows("lockUser", "app", PRIV_TARGET_DB, "app", NULL, ACT_LOCK), "lockUser locks");
    CHECK(!role_allows("lockUser", "app", PRIV_TARGET_NS, "app", "c", ACT_FIND),
          "lockUser reads nothing");
    CHECK(!role_allows("dbAdmin", "app", PRIV_TARGET_NS, "app", "c", ACT_FIND), "dbAdmin cannot find");
    CHECK(role_allows("dbAdmin", "app", PRIV_TARGET_DB, "app", NULL, ACT_DROP_DATABASE),
          "dbAdmin drops its database");
    CHECK(role_allows("userAdmin", "app", PRIV_TARGET_DB, "app", NULL, ACT_CREATE_USER),
          "userAdmin creates users");
    CHECK(role_allows("dbOwner", "app", PRIV_TARGET_NS, "app", "c", ACT_UPDATE), "dbOwner writes");
    CHECK(!role_allows("readAnyDatabase", "app", PRIV_TARGET_NS, "x", "c", ACT_FIND),
          "readAnyDatabase exists on admin only");
    CHECK(role_allows("readAnyDatabase", "admin", PRIV_TARGET_NS, "x", "c", ACT_FIND),
          "readAnyDatabase reads any database");
    CHECK(!role_allows("readWriteAnyDatabase", "admin", PRIV_TARGET_NS, "admin", "system.users",
                       ACT_INSERT),
          "readWriteAnyDatabase cannot write the users collection");
    CHECK(role_allows("clusterMonitor", "admin", PRIV_TARGET_CLUSTER, NULL, NULL,
                      ACT_SERVER_STATUS),
          "clusterMonitor runs serverStatus");
    CHECK(!role_allows("clusterMonitor", "admin", PRIV_TARGET_CLUSTER, NULL, NULL, ACT_SHUTDOWN),
          "clusterMonitor cannot shut down");
    CHECK(role_allows("root", "admin", PRIV_TARGET_CLUSTER, NULL, NULL, ACT_SHUTDOWN), "root shuts down");
    CHECK(role_allows("root", "admin", PRIV_TARGET_NS, "a", "b", ACT_REMOVE), "root removes");
    CHECK(!priv_is_builtin_role("root", "app"), "root exists on admin only");
}

int main(void)
{
    UNIT_RUN(test_every_dispatched_command_has_an_access_rule);
    UNIT_RUN(test_hello_and_saslstart_need_no_login_and_find_needs_find);
    UNIT_RUN(test_builtin_roles_allow_what_mongods_do);
    return unit_finish();
}
