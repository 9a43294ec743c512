/* repl: the replica-set commands of a one-member set — replSetInitiate,
 * replSetGetStatus, replSetGetConfig, replSetReconfig. atomdb is the primary
 * of its set from its first millisecond (docs/testing-with-atomdb.md says
 * why); a config with more than one member is refused. */
#include "cmd/cmd-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/oplog.h"
#include "util/log.h"

#define REPL_TERM 1
#define REPL_CODE_ALREADY_INITIALIZED 23
#define REPL_CODE_NODE_NOT_FOUND 74
#define REPL_CODE_INVALID_CONFIG 93
#define REPL_CODE_INCOMPATIBLE_CONFIG 103
#define REPL_CODE_UNKNOWN_FIELD 40415

/* The set's configuration: atomdb starts with the default one (its name,
 * itself as member 0, version 1); replSetInitiate may replace it once, and
 * replSetReconfig any time. Kept in memory: a restart starts from the
 * default again. Loop thread only. */
static struct {
    bool ready;
    bool initiated;       /* replSetInitiate or replSetReconfig ran */
    int64_t version;
    bson_t config;        /* the whole config document, as replSetGetConfig shows it */
    bson_oid_t set_id;    /* settings.replicaSetId */
    int64_t elected_ms;   /* when this node became primary (start) */
} repl;

/* The settings mongod fills in, with their defaults (ints unless noted). */
static const struct {
    const char *name;
    int64_t dflt;
    bool is_bool;
} repl_settings[] = {
    {"chainingAllowed", 1, true},        {"heartbeatIntervalMillis", 2000, false},
    {"heartbeatTimeoutSecs", 10, false}, {"electionTimeoutMillis", 10000, false},
    {"catchUpTimeoutMillis", -1, false}, {"catchUpTakeoverDelayMillis", 30000, false},
};
#define REPL_NSETTINGS (sizeof repl_settings / sizeof repl_settings[0])

/* Builds the normalized config from `user` (already validated) or, when
 * NULL, the default one. */
static void repl_build(bson_t *out, const bson_t *user, int64_t version, const char *host)
{
    bson_iter_t it;
    bson_t members, m, settings, doc;
    BSON_APPEND_UTF8(out, "_id", server.config.replset);
    BSON_APPEND_INT32(out, "version", (int32_t)version);
    BSON_APPEND_INT32(out, "term", REPL_TERM);
    bson_append_array_begin(out, "members", -1, &members);
    bson_append_document_begin(&members, "0", -1, &m);
    int64_t id = 0, priority_i = 1;
    double priority = 1;
    bool priority_double = false;
    bson_t tags = BSON_INITIALIZER, member = BSON_INITIALIZER, usettings = BSON_INITIALIZER;
    if (user && bson_iter_init_find(&it, user, "members")) {
        bson_iter_t el;
        if (bson_iter_recurse(&it, &el) && bson_iter_next(&el)) {
            bson_t tmp;
            if (cmd_iter_doc(&el, &tmp))
                bson_copy_to_excluding_noinit(&tmp, &member, "", NULL);
        }
    }
    if (bson_iter_init_find(&it, &member, "_id"))
        id = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, &member, "priority")) {
        priority_double = BSON_ITER_HOLDS_DOUBLE(&it);
        priority = bson_iter_as_double(&it);
        priority_i = bson_iter_as_int64(&it);
    }
    if (bson_iter_init_find(&it, &member, "tags")) {
        bson_t t;
        if (cmd_iter_doc(&it, &t))
            bson_copy_to_excluding_noinit(&t, &tags, "", NULL);
    }
    BSON_APPEND_INT32(&m, "_id", (int32_t)id);
    BSON_APPEND_UTF8(&m, "host", host);
    BSON_APPEND_BOOL(&m, "arbiterOnly", false);
    BSON_APPEND_BOOL(&m, "buildIndexes", true);
    BSON_APPEND_BOOL(&m, "hidden", false);
    if (priority_double)
        BSON_APPEND_DOUBLE(&m, "priority", priority);
    else
        BSON_APPEND_INT32(&m, "priority", (int32_t)priority_i);
    BSON_APPEND_DOCUMENT(&m, "tags", &tags);
    BSON_APPEND_INT64(&m, "secondaryDelaySecs", 0);
    BSON_APPEND_INT32(&m, "votes", 1);
    bson_append_document_end(&members, &m);
    bson_append_array_end(out, &members);
    BSON_APPEND_INT32(out, "protocolVersion", 1);
    bool wcmjd = true;
    if (user && bson_iter_init_find(&it, user, "writeConcernMajorityJournalDefault"))
        wcmjd = bson_iter_as_bool(&it);
    BSON_APPEND_BOOL(out, "writeConcernMajorityJournalDefault", wcmjd);
    if (user && bson_iter_init_find(&it, user, "settings")) {
        bson_t t;
        if (cmd_iter_doc(&it, &t))
            bson_copy_to_excluding_noinit(&t, &usettings, "", NULL);
    }
    bson_append_document_begin(out, "settings", -1, &settings);
    for (size_t i = 0; i < REPL_NSETTINGS; i++) {
        bool given = bson_iter_init_find(&it, &usettings, repl_settings[i].name);
        if (repl_settings[i].is_bool)
            BSON_APPEND_BOOL(&settings, repl_settings[i].name,
                             given ? bson_iter_as_bool(&it) : repl_settings[i].dflt != 0);
        else
            BSON_APPEND_INT32(&settings, repl_settings[i].name,
                              (int32_t)(given ? bson_iter_as_int64(&it) : repl_settings[i].dflt));
    }
    if (bson_iter_init_find(&it, &usettings, "getLastErrorModes") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_append_iter(&settings, "getLastErrorModes", -1, &it);
    } else {
        bson_append_document_begin(&settings, "getLastErrorModes", -1, &doc);
        bson_append_document_end(&settings, &doc);
    }
    if (bson_iter_init_find(&it, &usettings, "getLastErrorDefaults") &&
        BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_append_iter(&settings, "getLastErrorDefaults", -1, &it);
    } else {
        bson_append_document_begin(&settings, "getLastErrorDefaults", -1, &doc);
        BSON_APPEND_INT32(&doc, "w", 1);
        BSON_APPEND_INT32(&doc, "wtimeout", 0);
        bson_append_document_end(&settings, &doc);
    }
    BSON_APPEND_OID(&settings, "replicaSetId", &repl.set_id);
    bson_append_document_end(out, &settings);
    bson_destroy(&tags);
    bson_destroy(&member);
    bson_destroy(&usettings);
}

static void repl_ensure(void)
{
    if (repl.ready)
        return;
    repl.ready = true;
    repl.version = 1;
    bson_oid_init(&repl.set_id, NULL);
    repl.elected_ms = server.start_ms;
    bson_init(&repl.config);
    repl_build(&repl.config, NULL, 1, server.config.advertise);
}

int32_t repl_config_version(void)
{
    return repl.ready ? (int32_t)repl.version : 1;
}

/* Whether `host` ("h:port") names this node: our port, and a loopback
 * name, this machine's name, the advertised host or a bound address. */
static bool repl_host_is_me(const char *host)
{
    const char *colon = strrchr(host, ':');
    if (!colon || colon == host)
        return false;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port != server.config.port)
        return false;
    char name[300];
    snprintf(name, sizeof name, "%.*s", (int)(colon - host), host);
    if (name[0] == '[' && name[strlen(name) - 1] == ']') {
        memmove(name, name + 1, strlen(name));
        name[strlen(name) - 1] = '\0';
    }
    static const char *const loopback[] = {"localhost", "127.0.0.1", "::1"};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, loopback[i]) == 0)
            return true;
    char me[256] = "";
    if (gethostname(me, sizeof me - 1) == 0 && strcmp(name, me) == 0)
        return true;
    const char *adv = server.config.advertise;
    const char *acolon = strrchr(adv, ':');
    if (acolon && strncmp(adv, host, (size_t)(acolon - adv)) == 0 &&
        (size_t)(acolon - adv) == (size_t)(colon - host))
        return true;
    /* one of the bound addresses (comma-separated) */
    const char *b = server.config.bind;
    size_t n = strlen(name);
    while (b && *b) {
        const char *comma = strchr(b, ',');
        size_t len = comma ? (size_t)(comma - b) : strlen(b);
        if (len == n && strncmp(b, name, n) == 0)
            return true;
        b = comma ? comma + 1 : NULL;
    }
    return false;
}

static bool repl_unknown(const char *where, const char *key, dberr_t *err)
{
    return dberr_set(err, REPL_CODE_UNKNOWN_FIELD, "BSON field '%s.%s' is an unknown field.",
                     where, key);
}

/* Checks the one member document. */
static bool repl_check_member(const bson_t *m, const char **host, dberr_t *err)
{
    bson_iter_t it;
    bool has_id = false;
    *host = NULL;
    if (!bson_iter_init(&it, m))
        return dberr_set(err, DBERR_INVALID_BSON, "invalid member document");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "_id") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 0 ||
                bson_iter_as_int64(&it) > 255)
                return dberr_set(err, DBERR_BAD_VALUE, "a member's _id must be a number 0..255");
            has_id = true;
        } else if (strcmp(k, "host") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "a member's host must be a string");
            *host = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "priority") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_double(&it) <= 0)
                return dberr_set(err, REPL_CODE_INVALID_CONFIG,
                                 "atomdb's one member is its primary: its priority must be "
                                 "above 0");
        } else if (strcmp(k, "votes") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) != 1)
                return dberr_set(err, REPL_CODE_INVALID_CONFIG,
                                 "atomdb's one member is its primary: votes must be 1");
        } else if (strcmp(k, "arbiterOnly") == 0 || strcmp(k, "hidden") == 0) {
            if (bson_iter_as_bool(&it))
                return dberr_set(err, REPL_CODE_INVALID_CONFIG,
                                 "atomdb's one member is its primary: %s must be false", k);
        } else if (strcmp(k, "buildIndexes") == 0) {
            if (!bson_iter_as_bool(&it))
                return dberr_set(err, REPL_CODE_INVALID_CONFIG,
                                 "atomdb's one member is its primary: buildIndexes must be true");
        } else if (strcmp(k, "secondaryDelaySecs") == 0 || strcmp(k, "slaveDelay") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) != 0)
                return dberr_set(err, REPL_CODE_INVALID_CONFIG,
                                 "atomdb's one member is its primary: %s must be 0", k);
        } else if (strcmp(k, "tags") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "a member's tags must be an object");
        } else {
            return repl_unknown("MemberConfig", k, err);
        }
    }
    if (!has_id)
        return dberr_set(err, DBERR_NO_SUCH_KEY, "BSON field 'MemberConfig._id' is missing but "
                                                 "a required field");
    if (!*host)
        return dberr_set(err, DBERR_NO_SUCH_KEY, "BSON field 'MemberConfig.host' is missing but "
                                                 "a required field");
    return true;
}

/* Checks a config given to replSetInitiate / replSetReconfig; `*host` is
 * its member's host and `*version` its version (0 when absent). */
static bool repl_check_config(const bson_t *cfg, const char **host, int64_t *version,
                              dberr_t *err)
{
    bson_iter_t it;
    bool has_id = false, has_members = false;
    *version = 0;
    bson_iter_init(&it, cfg);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "_id") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "the config's _id must be a string");
            const char *name = bson_iter_utf8(&it, NULL);
            if (strcmp(name, server.config.replset) != 0)
                return dberr_set(err, REPL_CODE_INVALID_CONFIG,
                                 "Attempting to initiate a replica set with name %s, but command "
                                 "line reports %s; rejecting",
                                 name, server.config.replset);
            has_id = true;
        } else if (strcmp(k, "version") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 1)
                return dberr_set(err, DBERR_BAD_VALUE, "the config's version must be a number "
                                                       "above 0");
            *version = bson_iter_as_int64(&it);
        } else if (strcmp(k, "term") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "the config's term must be a number");
        } else if (strcmp(k, "protocolVersion") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) != 1)
                return dberr_set(err, REPL_CODE_INVALID_CONFIG, "protocolVersion must be 1");
        } else if (strcmp(k, "writeConcernMajorityJournalDefault") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return dberr_set(err, DBERR_TYPE_MISMATCH,
                                 "writeConcernMajorityJournalDefault must be a boolean");
        } else if (strcmp(k, "configsvr") == 0) {
            if (bson_iter_as_bool(&it))
                return dberr_set(err, REPL_CODE_INVALID_CONFIG,
                                 "atomdb is not a config server of a sharded cluster");
        } else if (strcmp(k, "settings") == 0) {
            bson_t s;
            bson_iter_t si;
            if (!cmd_iter_doc(&it, &s) || !BSON_ITER_HOLDS_DOCUMENT(&it))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "the config's settings must be an "
                                                           "object");
            bson_iter_init(&si, &s);
            while (bson_iter_next(&si)) {
                const char *sk = bson_iter_key(&si);
                bool known = strcmp(sk, "getLastErrorModes") == 0 ||
                             strcmp(sk, "getLastErrorDefaults") == 0 ||
                             strcmp(sk, "replicaSetId") == 0;
                for (size_t i = 0; i < REPL_NSETTINGS && !known; i++)
                    known = strcmp(sk, repl_settings[i].name) == 0;
                if (!known)
                    return repl_unknown("ReplSetConfigSettings", sk, err);
            }
        } else if (strcmp(k, "members") == 0) {
            bson_t arr;
            bson_iter_t el;
            if (!BSON_ITER_HOLDS_ARRAY(&it) || !cmd_iter_doc(&it, &arr))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "the config's members must be an array");
            uint32_t n = bson_count_keys(&arr);
            if (n != 1)
                return dberr_set(err, REPL_CODE_INVALID_CONFIG,
                                 "atomdb is a single node: a replica set config must have exactly "
                                 "one member, got %u; use MongoDB for a replica set of several "
                                 "nodes",
                                 n);
            bson_iter_init(&el, &arr);
            bson_iter_next(&el);
            bson_t m;
            if (!BSON_ITER_HOLDS_DOCUMENT(&el) || !cmd_iter_doc(&el, &m))
                return dberr_set(err, DBERR_TYPE_MISMATCH, "a member must be an object");
            if (!repl_check_member(&m, host, err))
                return false;
            has_members = true;
        } else {
            return repl_unknown("ReplSetConfig", k, err);
        }
    }
    if (!has_id)
        return dberr_set(err, DBERR_NO_SUCH_KEY, "BSON field 'ReplSetConfig._id' is missing but "
                                                 "a required field");
    if (!has_members)
        return dberr_set(err, DBERR_NO_SUCH_KEY, "BSON field 'ReplSetConfig.members' is missing "
                                                 "but a required field");
    if (!repl_host_is_me(*host))
        return dberr_set(err, REPL_CODE_NODE_NOT_FOUND,
                         "No host described in new configuration for replica set %s maps to "
                         "this node (member host '%s'; this node is %s)",
                         server.config.replset, *host, server.config.advertise);
    return true;
}

/* Replaces the config with `cfg` at `version`; hello then presents its
 * member's host. */
static void repl_install(const bson_t *cfg, const char *host, int64_t version)
{
    bson_t next = BSON_INITIALIZER;
    repl_build(&next, cfg, version, host);
    bson_destroy(&repl.config);
    bson_steal(&repl.config, &next); /* a bson_t must not be copied by value */
    repl.version = version;
    repl.initiated = true;
    snprintf(server.config.advertise, sizeof server.config.advertise, "%s", host);
    log_event(LOG_INFO, "REPL", 21392, "New replica set config in use",
              LOG_DOC("config", &repl.config));
}

bool cmd_repl_set_initiate(cmd_ctx_t *ctx, dberr_t *err)
{
    repl_ensure();
    if (repl.initiated)
        return dberr_set(err, REPL_CODE_ALREADY_INITIALIZED, "already initialized");
    bson_t cfg;
    bool given = cmd_iter_doc(&ctx->arg, &cfg) && BSON_ITER_HOLDS_DOCUMENT(&ctx->arg) &&
                 !bson_empty(&cfg);
    if (!given && !BSON_ITER_HOLDS_DOCUMENT(&ctx->arg) && !BSON_ITER_HOLDS_NULL(&ctx->arg) &&
        !BSON_ITER_HOLDS_NUMBER(&ctx->arg))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "replSetInitiate takes a config object");
    if (!given) {
        /* no config: mongod's default, this node alone */
        repl_install(NULL, server.config.advertise, 1);
        return true;
    }
    const char *host;
    int64_t version;
    if (!repl_check_config(&cfg, &host, &version, err))
        return false;
    repl_install(&cfg, host, version ? version : 1);
    return true;
}

bool cmd_repl_set_reconfig(cmd_ctx_t *ctx, dberr_t *err)
{
    repl_ensure();
    bson_t cfg;
    if (!BSON_ITER_HOLDS_DOCUMENT(&ctx->arg) || !cmd_iter_doc(&ctx->arg, &cfg))
        return dberr_set(err, DBERR_TYPE_MISMATCH, "replSetReconfig takes a config object");
    bool force = false;
    if (!cmd_opt_bool(ctx, "force", &force, err))
        return false;
    int64_t max_time = 0;
    if (!cmd_opt_int64(ctx, "maxTimeMS", &max_time, err))
        return false;
    const char *host;
    int64_t version;
    if (!repl_check_config(&cfg, &host, &version, err))
        return false;
    if (force) {
        /* mongod: a forced reconfig takes a version well above the old one */
        version = repl.version + 10000 + rand() % 90000;
    } else if (version <= repl.version) {
        return dberr_set(err, REPL_CODE_INCOMPATIBLE_CONFIG,
                         "New replica set config version %lld must be greater than the current "
                         "config version %lld",
                         (long long)version, (long long)repl.version);
    }
    repl_install(&cfg, host, version);
    return true;
}

bool cmd_repl_set_get_config(cmd_ctx_t *ctx, dberr_t *err)
{
    repl_ensure();
    bool commitment = false, newly = false;
    if (!cmd_opt_bool(ctx, "commitmentStatus", &commitment, err) ||
        !cmd_opt_bool(ctx, "includeNewlyAddedFields", &newly, err))
        return false;
    BSON_APPEND_DOCUMENT(ctx->reply, "config", &repl.config);
    if (commitment)
        BSON_APPEND_BOOL(ctx->reply, "commitmentStatus", true); /* one node: always committed */
    return true;
}

static void repl_append_optime(bson_t *out, const char *key, clock_ts_t ts)
{
    bson_t op;
    bson_append_document_begin(out, key, -1, &op);
    BSON_APPEND_TIMESTAMP(&op, "ts", ts.t, ts.i);
    BSON_APPEND_INT64(&op, "t", REPL_TERM);
    bson_append_document_end(out, &op);
}

bool cmd_repl_set_get_status(cmd_ctx_t *ctx, dberr_t *err)
{
    repl_ensure();
    int64_t now = server_now_ms();
    /* the optimes are the oplog view's newest entry (and newest durable
     * one); with no history yet, the cluster time */
    clock_ts_t applied = clock_now(), durable;
    int64_t wall = now, durable_wall;
    oplog_newest(false, &applied, &wall);
    durable = applied;
    durable_wall = wall;
    oplog_newest(true, &durable, &durable_wall);
    bson_t *r = ctx->reply, doc, arr, m;
    BSON_APPEND_UTF8(r, "set", server.config.replset);
    BSON_APPEND_DATE_TIME(r, "date", now);
    BSON_APPEND_INT32(r, "myState", 1);
    BSON_APPEND_INT64(r, "term", REPL_TERM);
    BSON_APPEND_UTF8(r, "syncSourceHost", "");
    BSON_APPEND_INT32(r, "syncSourceId", -1);
    BSON_APPEND_INT64(r, "heartbeatIntervalMillis", 2000);
    BSON_APPEND_INT32(r, "majorityVoteCount", 1);
    BSON_APPEND_INT32(r, "writeMajorityCount", 1);
    BSON_APPEND_INT32(r, "votingMembersCount", 1);
    BSON_APPEND_INT32(r, "writableVotingMembersCount", 1);
    bson_append_document_begin(r, "optimes", -1, &doc);
    repl_append_optime(&doc, "lastCommittedOpTime", durable);
    BSON_APPEND_DATE_TIME(&doc, "lastCommittedWallTime", durable_wall);
    repl_append_optime(&doc, "readConcernMajorityOpTime", durable);
    repl_append_optime(&doc, "appliedOpTime", applied);
    repl_append_optime(&doc, "durableOpTime", durable);
    BSON_APPEND_DATE_TIME(&doc, "lastAppliedWallTime", wall);
    BSON_APPEND_DATE_TIME(&doc, "lastDurableWallTime", durable_wall);
    bson_append_document_end(r, &doc);
    bson_append_array_begin(r, "members", -1, &arr);
    bson_append_document_begin(&arr, "0", -1, &m);
    bson_iter_t it, mem;
    int32_t id = 0;
    if (bson_iter_init_find(&it, &repl.config, "members") && bson_iter_recurse(&it, &mem) &&
        bson_iter_next(&mem) && bson_iter_recurse(&mem, &it) && bson_iter_find(&it, "_id"))
        id = bson_iter_int32(&it);
    BSON_APPEND_INT32(&m, "_id", id);
    BSON_APPEND_UTF8(&m, "name", server.config.advertise);
    BSON_APPEND_DOUBLE(&m, "health", 1.0);
    BSON_APPEND_INT32(&m, "state", 1);
    BSON_APPEND_UTF8(&m, "stateStr", "PRIMARY");
    BSON_APPEND_INT64(&m, "uptime", (now - server.start_ms) / 1000);
    repl_append_optime(&m, "optime", applied);
    BSON_APPEND_DATE_TIME(&m, "optimeDate", (int64_t)applied.t * 1000);
    BSON_APPEND_DATE_TIME(&m, "lastAppliedWallTime", wall);
    BSON_APPEND_DATE_TIME(&m, "lastDurableWallTime", durable_wall);
    BSON_APPEND_UTF8(&m, "syncSourceHost", "");
    BSON_APPEND_INT32(&m, "syncSourceId", -1);
    BSON_APPEND_UTF8(&m, "infoMessage", "");
    BSON_APPEND_TIMESTAMP(&m, "electionTime", (uint32_t)(repl.elected_ms / 1000), 1);
    BSON_APPEND_DATE_TIME(&m, "electionDate", repl.elected_ms - repl.elected_ms % 1000);
    BSON_APPEND_INT32(&m, "configVersion", (int32_t)repl.version);
    BSON_APPEND_INT32(&m, "configTerm", REPL_TERM);
    BSON_APPEND_BOOL(&m, "self", true);
    BSON_APPEND_UTF8(&m, "lastHeartbeatMessage", "");
    bson_append_document_end(&arr, &m);
    bson_append_array_end(r, &arr);
    return true;
}
