/* drv_redis.c: the bench's primitives for Redis through hiredis — one string
 * key per slot plus "<key>:ver" for optimistic CAS, Lua scripts for the
 * conditional updates, SET NX PX + a Lua compare-and-delete for the lease. */
#include "bench.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Lua scripts, loaded once per connection and called by SHA. */
enum { LUA_FLASH, LUA_HELPDESK, LUA_SEAT, LUA_CAS, LUA_UNLOCK, LUA_COUNT };
static const char *const redis_lua[LUA_COUNT] = {
    /* flash sale: sell one unit if stock >= 1 */
    "local s = tonumber(redis.call('GET', KEYS[1]) or '0') "
    "if s >= 1 then redis.call('DECR', KEYS[1]) return 1 end return 0",
    /* helpdesk: assign if clientCount < max */
    "local n = tonumber(redis.call('GET', KEYS[1]) or '0') "
    "if n < tonumber(ARGV[1]) then redis.call('INCR', KEYS[1]) return 1 end return 0",
    /* seat: book if still free */
    "if redis.call('GET', KEYS[1]) == 'N' then redis.call('SET', KEYS[1], ARGV[1]) "
    "return 1 end return 0",
    /* CAS: write the value if the version is the one read */
    "local v = redis.call('GET', KEYS[2]) or '0' if v == ARGV[1] then "
    "redis.call('SET', KEYS[1], ARGV[2]) redis.call('INCR', KEYS[2]) return 1 end return 0",
    /* lease release: delete only our own token */
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
    "return 0",
};

/* One client's connection. */
typedef struct {
    redisContext *ctx;         /* one TCP connection */
    char sha[LUA_COUNT][41];   /* loaded scripts */
    char lock_token[48];       /* value of the lease held */
    uint64_t lock_seq;         /* makes each lease value unique */
} rconn_t;

/* Key of a slot into buf (size >= 32). */
static void redis_key(scen_t s, int slot, char *buf)
{
    switch (s) {
    case SCEN_COUNTER:
        snprintf(buf, 32, "counter");
        break;
    case SCEN_FLASH_SALE_1:
    case SCEN_FLASH_SALE_1000:
        snprintf(buf, 32, "stock");
        break;
    case SCEN_SEATS: {
        char k[8];
        scen_seat_key(slot, k);
        snprintf(buf, 32, "seat:%s", k);
        break;
    }
    case SCEN_HELPDESK:
        snprintf(buf, 32, "agent:%d", slot);
        break;
    default:
        snprintf(buf, 32, "play:%d", slot);
        break;
    }
}

/* Value text of a slot value (seat owner strings, numbers otherwise). */
static void redis_value_text(scen_t s, int64_t v, char *buf)
{
    if (s == SCEN_SEATS && v == 0)
        snprintf(buf, 32, "N");
    else if (s == SCEN_SEATS)
        snprintf(buf, 32, "Y:%lld", (long long)v);
    else
        snprintf(buf, 32, "%lld", (long long)v);
}

/* Parses a reply element as a slot value. */
static int64_t redis_parse(const redisReply *r)
{
    if (!r || r->type == REDIS_REPLY_NIL)
        return 0;
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (r->type != REDIS_REPLY_STRING)
        return 0;
    if (r->str[0] == 'N')
        return 0;
    if (r->str[0] == 'Y' && r->str[1] == ':')
        return strtoll(r->str + 2, NULL, 10);
    return strtoll(r->str, NULL, 10);
}

/* Runs a command (argv form); returns the reply or NULL with err filled.
 * Error replies are turned into NULL too. */
static redisReply *redis_cmd(rconn_t *r, char *err, int argc, const char **argv)
{
    redisReply *rep = redisCommandArgv(r->ctx, argc, argv, NULL);
    if (!rep) {
        snprintf(err, ERRLEN, "redis: %s", r->ctx->errstr);
        return NULL;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        snprintf(err, ERRLEN, "redis: %s", rep->str);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

static void *redis_connect(const engine_t *eng, const char *durability, char *err)
{
    struct timeval tv = {10, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", eng->port, tv);
    if (!ctx || ctx->err) {
        snprintf(err, ERRLEN, "connect: %s", ctx ? ctx->errstr : "out of memory");
        redisFree(ctx);
        return NULL;
    }
    struct timeval op = {30, 0};
    redisSetTimeout(ctx, op);
    rconn_t *r = calloc(1, sizeof *r);
    r->ctx = ctx;
    for (int i = 0; i < LUA_COUNT; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", redis_lua[i]};
        redisReply *rep = redis_cmd(r, err, 3, argv);
        if (!rep || rep->type != REDIS_REPLY_STRING) {
            freeReplyObject(rep);
            redisFree(ctx);
            free(r);
            return NULL;
        }
        snprintf(r->sha[i], sizeof r->sha[i], "%s", rep->str);
        freeReplyObject(rep);
    }
    return r;
}

static void redis_disconnect(void *c)
{
    rconn_t *r = c;
    if (!r)
        return;
    redisFree(r->ctx);
    free(r);
}

static bool redis_setup(void *c, scen_t s, char *err)
{
    rconn_t *r = c;
    const char *flush[] = {"FLUSHDB"};
    redisReply *rep = redis_cmd(r, err, 1, flush);
    if (!rep)
        return false;
    freeReplyObject(rep);
    if (s == SCEN_PLAY_COUNTER)
        return true;
    int n = scen_slots(s);
    const char **argv = calloc((size_t)(1 + 2 * n), sizeof *argv);
    char (*keys)[32] = calloc((size_t)n, 32);
    char (*vals)[32] = calloc((size_t)n, 32);
    argv[0] = "MSET";
    for (int k = 0; k < n; k++) {
        redis_key(s, k, keys[k]);
        redis_value_text(s, scen_initial(s), vals[k]);
        argv[1 + 2 * k] = keys[k];
        argv[2 + 2 * k] = vals[k];
    }
    rep = redis_cmd(r, err, 1 + 2 * n, argv);
    bool ok = rep != NULL;
    freeReplyObject(rep);
    free(argv);
    free(keys);
    free(vals);
    return ok;
}

static bool redis_read(void *c, scen_t s, int slot, bool lock, slot_read_t *out, char *err)
{
    rconn_t *r = c;
    char key[32], ver[40];
    redis_key(s, slot, key);
    snprintf(ver, sizeof ver, "%s:ver", key);
    const char *argv[] = {"MGET", key, ver};
    redisReply *rep = redis_cmd(r, err, 3, argv);
    if (!rep)
        return false;
    bool ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2;
    if (ok) {
        out->exists = rep->element[0]->type != REDIS_REPLY_NIL;
        out->value = redis_parse(rep->element[0]);
        out->version = redis_parse(rep->element[1]);
    } else {
        snprintf(err, ERRLEN, "redis: unexpected MGET reply");
    }
    freeReplyObject(rep);
    return ok;
}

static bool redis_write(void *c, scen_t s, int slot, int64_t value, char *err)
{
    rconn_t *r = c;
    char key[32], val[32];
    redis_key(s, slot, key);
    redis_value_text(s, value, val);
    const char *argv[] = {"SET", key, val};
    redisReply *rep = redis_cmd(r, err, 3, argv);
    bool ok = rep != NULL;
    freeReplyObject(rep);
    return ok;
}

static bool redis_atomic(void *c, scen_t s, int slot, int64_t *out, char *err)
{
    rconn_t *r = c;
    char key[32];
    redis_key(s, slot, key);
    const char *argv[] = {"INCR", key};
    redisReply *rep = redis_cmd(r, err, 2, argv);
    if (!rep)
        return false;
    *out = rep->integer;
    freeReplyObject(rep);
    return true;
}

/* EVALSHA of a loaded script with one or two keys; *res gets its integer. */
static bool redis_eval(rconn_t *r, int script, int nkeys, const char **keys, int nargs,
                       const char **args, int64_t *res, char *err)
{
    const char *argv[8];
    char nk[4];
    int argc = 0;
    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[argc++] = "EVALSHA";
    argv[argc++] = r->sha[script];
    argv[argc++] = nk;
    for (int i = 0; i < nkeys; i++)
        argv[argc++] = keys[i];
    for (int i = 0; i < nargs; i++)
        argv[argc++] = args[i];
    redisReply *rep = redis_cmd(r, err, argc, argv);
    if (!rep)
        return false;
    *res = rep->integer;
    freeReplyObject(rep);
    return true;
}

static bool redis_conditional(void *c, scen_t s, int slot, int64_t token, bool *won, char *err)
{
    rconn_t *r = c;
    char key[32], arg[32];
    const char *keys[] = {key};
    const char *args[] = {arg};
    int64_t res = 0;
    int script;
    redis_key(s, slot, key);
    if (s == SCEN_SEATS) {
        script = LUA_SEAT;
        redis_value_text(s, token, arg);
    } else if (s == SCEN_HELPDESK) {
        script = LUA_HELPDESK;
        snprintf(arg, sizeof arg, "%d", AGENT_CAPACITY);
    } else {
        script = LUA_FLASH;
    }
    bool ok = redis_eval(r, script, 1, keys, script == LUA_FLASH ? 0 : 1, args, &res, err);
    *won = res == 1;
    return ok;
}

static bool redis_cas(void *c, scen_t s, int slot, const slot_read_t *seen, int64_t value,
                      bool *won, char *err)
{
    rconn_t *r = c;
    char key[32], ver[40], sv[32], val[32];
    redis_key(s, slot, key);
    snprintf(ver, sizeof ver, "%s:ver", key);
    snprintf(sv, sizeof sv, "%lld", (long long)seen->version);
    redis_value_text(s, value, val);
    const char *keys[] = {key, ver};
    const char *args[] = {sv, val};
    int64_t res = 0;
    bool ok = redis_eval(r, LUA_CAS, 2, keys, 2, args, &res, err);
    *won = res == 1;
    return ok;
}

static bool redis_txn_begin(void *c, bool snapshot, char *err)
{
    snprintf(err, ERRLEN, "redis has no lock-holding transactions");
    return false;
}

static bool redis_txn_commit(void *c, bool *retry, char *err)
{
    *retry = false;
    snprintf(err, ERRLEN, "redis has no lock-holding transactions");
    return false;
}

static void redis_txn_abort(void *c)
{
}

static bool redis_lock(void *c, const char *name, int client, bool *got, char *err)
{
    rconn_t *r = c;
    char key[64];
    snprintf(key, sizeof key, "lock:%s", name);
    snprintf(r->lock_token, sizeof r->lock_token, "%d:%llu", client,
             (unsigned long long)++r->lock_seq);
    const char *argv[] = {"SET", key, r->lock_token, "NX", "PX", "5000"};
    redisReply *rep = redis_cmd(r, err, 6, argv);
    if (!rep)
        return false;
    *got = rep->type == REDIS_REPLY_STATUS;
    freeReplyObject(rep);
    return true;
}

static bool redis_unlock(void *c, const char *name, char *err)
{
    rconn_t *r = c;
    char key[64];
    snprintf(key, sizeof key, "lock:%s", name);
    const char *keys[] = {key};
    const char *args[] = {r->lock_token};
    int64_t res = 0;
    if (!redis_eval(r, LUA_UNLOCK, 1, keys, 1, args, &res, err))
        return false;
    if (res != 1)
        return (snprintf(err, ERRLEN, "lease %s expired before release", name), false);
    return true;
}

static bool redis_final_state(void *c, scen_t s, int64_t *vals, int nslots, char *err)
{
    rconn_t *r = c;
    const int chunk = 1000;
    for (int base = 0; base < nslots; base += chunk) {
        int n = nslots - base < chunk ? nslots - base : chunk;
        const char **argv = calloc((size_t)n + 1, sizeof *argv);
        char (*keys)[32] = calloc((size_t)n, 32);
        argv[0] = "MGET";
        for (int i = 0; i < n; i++) {
            redis_key(s, base + i, keys[i]);
            argv[1 + i] = keys[i];
        }
        redisReply *rep = redis_cmd(r, err, n + 1, argv);
        free(argv);
        free(keys);
        if (!rep)
            return false;
        for (int i = 0; i < n && (size_t)i < rep->elements; i++)
            vals[base + i] = redis_parse(rep->element[i]);
        freeReplyObject(rep);
    }
    return true;
}

static void redis_probe(void *c, engine_t *eng)
{
    snprintf(eng->na[STRAT_PESSIMISTIC], sizeof eng->na[0],
             "Redis has no lock-holding transactions (MULTI/EXEC only queues commands)");
    snprintf(eng->na[STRAT_SNAPSHOT_TXN], sizeof eng->na[0],
             "Redis has no snapshot-isolated transactions (MULTI/EXEC cannot read in between)");
}

static bool redis_last_transient(void *c)
{
    return false;
}

const driver_t drv_redis = {
    .name = "redis",
    .client = "hiredis",
    .connect = redis_connect,
    .disconnect = redis_disconnect,
    .setup = redis_setup,
    .read = redis_read,
    .write = redis_write,
    .atomic = redis_atomic,
    .conditional = redis_conditional,
    .cas = redis_cas,
    .txn_begin = redis_txn_begin,
    .txn_commit = redis_txn_commit,
    .txn_abort = redis_txn_abort,
    .lock = redis_lock,
    .unlock = redis_unlock,
    .final_state = redis_final_state,
    .probe = redis_probe,
    .last_transient = redis_last_transient,
};
