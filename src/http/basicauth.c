/* basicauth: who may read the metrics port under --auth — HTTP Basic
 * credentials of a stored user (admin.system.users; "name" is name@admin,
 * "name@db" another database's user), checked against its SCRAM-SHA-256
 * credential (SCRAM-SHA-1 when it has only that) by deriving the keys from
 * the offered password with its salt and iteration count and comparing in
 * constant time. The password is never stored or logged: a success is
 * remembered for BASICAUTH_CACHE_MS as a keyed SHA-256 of user and password
 * (forgotten when users or roles change), so the status page's 2 s refresh
 * does not run PBKDF2 on the loop each time. The user then needs the
 * serverStatus action on the cluster (clusterMonitor, clusterAdmin, root).
 * Failed attempts from one address back off as logins do (auth/backoff.h):
 * after BACKOFF_FREE failures, requests from it get 429 with Retry-After
 * for a delay doubling from 100 ms to 5 s. Loop thread only. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "auth/backoff.h"
#include "cmd/access.h"
#include "cmd/server.h"
#include "http/http-private.h"
#include "util/log.h"

#define BASICAUTH_CACHE_MS 60000
#define BASICAUTH_CACHE_SLOTS 16
#define BASICAUTH_SLOTS 64

typedef struct basicauth_entry {
    uint8_t key[SHA256_DIGEST_LENGTH]; /* SHA-256(secret, user, 0, password) */
    int64_t until_ms;
    uint64_t generation; /* access_generation() when verified */
} basicauth_entry_t;

static struct {
    bool keyed;
    uint8_t secret[32];
    basicauth_entry_t cache[BASICAUTH_CACHE_SLOTS];
    backoff_slot_t failed_slots[BASICAUTH_SLOTS];
    backoff_t failed; /* per-address backoff (auth/backoff.h) */
} basicauth = {.failed = {basicauth.failed_slots, BASICAUTH_SLOTS}};

/* ---- remembered successes ---- */

static void basicauth_key(const char *user, const char *password, uint8_t *out)
{
    if (!basicauth.keyed) {
        if (RAND_bytes(basicauth.secret, sizeof basicauth.secret) != 1)
            memset(basicauth.secret, 0x5a, sizeof basicauth.secret); /* still keyed by nothing */
        basicauth.keyed = true;
    }
    size_t ul = strlen(user) + 1, pl = strlen(password), n = sizeof basicauth.secret + ul + pl;
    uint8_t *buf = bson_malloc(n);
    memcpy(buf, basicauth.secret, sizeof basicauth.secret);
    memcpy(buf + sizeof basicauth.secret, user, ul);
    memcpy(buf + sizeof basicauth.secret + ul, password, pl);
    SHA256(buf, n, out);
    OPENSSL_cleanse(buf, n);
    bson_free(buf);
}

static bool basicauth_cached(const uint8_t *key)
{
    int64_t now = server_now_ms();
    uint64_t gen = access_generation();
    for (int i = 0; i < BASICAUTH_CACHE_SLOTS; i++) {
        basicauth_entry_t *e = &basicauth.cache[i];
        if (e->until_ms > now && e->generation == gen &&
            CRYPTO_memcmp(e->key, key, sizeof e->key) == 0)
            return true;
    }
    return false;
}

static void basicauth_remember(const uint8_t *key)
{
    basicauth_entry_t *slot = &basicauth.cache[0];
    for (int i = 1; i < BASICAUTH_CACHE_SLOTS; i++)
        if (basicauth.cache[i].until_ms < slot->until_ms)
            slot = &basicauth.cache[i];
    memcpy(slot->key, key, sizeof slot->key);
    slot->until_ms = server_now_ms() + BASICAUTH_CACHE_MS;
    slot->generation = access_generation();
}

/* ---- the credential ---- */

/* The stored user for the Basic user name: name@admin, else (a name with
 * '@') the part before the last '@' on the database after it. */
static record_t *basicauth_user(const char *name, char *user, size_t ucap, char *db, size_t dcap)
{
    snprintf(user, ucap, "%s", name); /* for the log when too long */
    snprintf(db, dcap, "%s", ACCESS_ADMIN_DB);
    if (strlen(name) >= ucap)
        return NULL; /* too long for any user: never a truncated one */
    record_t *r = access_find_user(db, user);
    const char *at = strrchr(name, '@');
    if (r || !at || at == name || strlen(at + 1) == 0 || strlen(at + 1) >= dcap)
        return r;
    snprintf(user, ucap, "%.*s", (int)(at - name), name);
    snprintf(db, dcap, "%s", at + 1);
    return access_find_user(db, user);
}

/* Reads the user's credential for `m`; false when it has none. */
static bool basicauth_cred(const bson_t *doc, scram_mech_t m, scram_cred_t *out)
{
    bson_iter_t it, c;
    bson_t creds;
    return bson_iter_init_find(&it, doc, "credentials") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
           bson_iter_recurse(&it, &c) && bson_iter_find(&c, scram_mech_name(m)) &&
           cmd_iter_doc(&c, &creds) && scram_cred_parse(m, &creds, out);
}

/* True when `password` derives the keys of `cred`. */
static bool basicauth_verify(const scram_cred_t *cred, const char *user, const char *password)
{
    dberr_t err;
    char *prepared = scram_prepare_password(cred->mech, user, password, &err);
    if (!prepared)
        return false;
    scram_cred_t got;
    bool ok = scram_cred_derive(cred->mech, prepared, cred->salt, cred->salt_len,
                                cred->iterations, &got, &err);
    scram_free_secret(prepared);
    size_t n = scram_key_len(cred->mech);
    ok = ok && (CRYPTO_memcmp(got.stored_key, cred->stored_key, n) |
                CRYPTO_memcmp(got.server_key, cred->server_key, n)) == 0;
    OPENSSL_cleanse(&got, sizeof got);
    return ok;
}

/* True when the stored user holds serverStatus on the cluster. */
static bool basicauth_privileged(const bson_t *doc)
{
    bson_iter_t it;
    bson_t roles;
    priv_set_t privs;
    priv_set_init(&privs);
    if (bson_iter_init_find(&it, doc, "roles") && BSON_ITER_HOLDS_ARRAY(&it) &&
        cmd_iter_doc(&it, &roles))
        access_resolve_roles(&roles, &privs, NULL, NULL);
    bool ok = priv_allows(&privs, PRIV_TARGET_CLUSTER, NULL, NULL, ACT_SERVER_STATUS);
    priv_set_destroy(&privs);
    return ok;
}

static void basicauth_client_ip(struct MHD_Connection *conn, char *ip, size_t cap)
{
    snprintf(ip, cap, "?");
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, (socklen_t)cap);
}

static void basicauth_log_failure(const char *ip, const char *user, const char *db,
                                  const char *why)
{
    log_event(LOG_INFO, "ACCESS", 5286307, "Failed to authenticate", LOG_STR("client", ip),
              LOG_STR("mechanism", "HTTP Basic (metrics port)"), LOG_STR("user", user),
              LOG_STR("db", db), LOG_STR("error", why), LOG_INT("result", 18));
}

basicauth_result_t basicauth_check(struct MHD_Connection *conn, int64_t *retry_ms)
{
    *retry_ms = 0;
    if (!server.auth)
        return BASICAUTH_OK;
    char *given = NULL;
    char *name = MHD_basic_auth_get_username_password(conn, &given);
    if (!name) {
        if (given) {
            OPENSSL_cleanse(given, strlen(given));
            MHD_free(given);
        }
        return BASICAUTH_UNAUTHENTICATED;
    }
    const char *password = given ? given : ""; /* "user" with no colon */
    basicauth_result_t res = BASICAUTH_UNAUTHENTICATED;
    char ip[INET6_ADDRSTRLEN], user[SCRAM_USER_MAX + 1], db[64];
    basicauth_client_ip(conn, ip, sizeof ip);
    uint8_t key[SHA256_DIGEST_LENGTH];
    basicauth_key(name, password, key);
    record_t *r = basicauth_user(name, user, sizeof user, db, sizeof db);
    bool verified = r && basicauth_cached(key);
    if (!verified) {
        int64_t now = server_now_ms();
        int64_t wait = backoff_left_ms(&basicauth.failed, ip, now);
        if (wait > 0) {
            /* hammering during the wait prolongs it */
            backoff_note(&basicauth.failed, ip, false, now);
            *retry_ms = wait;
            res = BASICAUTH_BACKOFF;
            goto cleanup;
        }
        scram_cred_t cred;
        bson_t doc;
        if (r)
            record_view(r, &doc);
        if (r && (basicauth_cred(&doc, SCRAM_SHA_256, &cred) ||
                  basicauth_cred(&doc, SCRAM_SHA_1, &cred))) {
            verified = basicauth_verify(&cred, user, password);
        } else {
            /* an unknown user costs the same PBKDF2 as a wrong password */
            scram_cred_fake(SCRAM_SHA_256, user, &cred);
            cred.iterations = access_iterations(SCRAM_SHA_256);
            basicauth_verify(&cred, user, password);
        }
        OPENSSL_cleanse(&cred, sizeof cred);
        backoff_note(&basicauth.failed, ip, verified, server_now_ms());
        if (!verified) {
            basicauth_log_failure(ip, user, db, "Authentication failed.");
            goto cleanup;
        }
        basicauth_remember(key);
    }
    bson_t doc;
    record_view(r, &doc);
    res = basicauth_privileged(&doc) ? BASICAUTH_OK : BASICAUTH_FORBIDDEN;
cleanup:
    OPENSSL_cleanse(key, sizeof key);
    if (given) {
        OPENSSL_cleanse(given, strlen(given));
        MHD_free(given);
    }
    MHD_free(name);
    return res;
}
