/* scram: SCRAM-SHA-1 / SCRAM-SHA-256 credentials and conversations, as
 * mongod's SaslSCRAMServerMechanism speaks them (RFC 5802, RFC 7677).
 * OpenSSL for PBKDF2, HMAC, the digests, random bytes and the constant-time
 * compare; GNU libidn for SASLprep. */
#include "auth/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stringprep.h>

#define SCRAM_SERVER_NONCE_BYTES 24 /* as mongod: 24 random bytes, base64 */

const char *scram_mech_name(scram_mech_t m)
{
    return m == SCRAM_SHA_1 ? "SCRAM-SHA-1" : "SCRAM-SHA-256";
}

bool scram_mech_parse(const char *name, scram_mech_t *out)
{
    if (strcmp(name, "SCRAM-SHA-1") == 0)
        return (*out = SCRAM_SHA_1, true);
    if (strcmp(name, "SCRAM-SHA-256") == 0)
        return (*out = SCRAM_SHA_256, true);
    return false;
}

size_t scram_key_len(scram_mech_t m)
{
    return m == SCRAM_SHA_1 ? 20 : 32;
}

static const EVP_MD *scram_md(scram_mech_t m)
{
    return m == SCRAM_SHA_1 ? EVP_sha1() : EVP_sha256();
}

/* ---- base64 ---- */

size_t scram_b64_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
    if (cap < 4 * ((n + 2) / 3) + 1)
        return 0;
    return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

long scram_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n % 4 != 0)
        return -1;
    if (n == 0)
        return 0;
    size_t pad = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == '=') {
            if (i < n - 2)
                return -1;
            pad++;
        } else if (pad || !in[i] || !strchr(alphabet, in[i])) {
            return -1;
        }
    }
    size_t bytes = n / 4 * 3 - pad;
    if (bytes > cap)
        return -1;
    uint8_t *tmp = bson_malloc(n / 4 * 3);
    int got = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)n);
    long r = -1;
    if (got >= 0 && (size_t)got == n / 4 * 3) {
        memcpy(out, tmp, bytes);
        r = (long)bytes;
    }
    OPENSSL_cleanse(tmp, n / 4 * 3);
    bson_free(tmp);
    return r;
}

/* ---- credentials ---- */

char *scram_prepare_password(scram_mech_t m, const char *user, const char *password, dberr_t *err)
{
    if (m == SCRAM_SHA_1) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        EVP_DigestInit_ex(ctx, EVP_md5(), NULL);
        EVP_DigestUpdate(ctx, user, strlen(user));
        EVP_DigestUpdate(ctx, ":mongo:", 7);
        EVP_DigestUpdate(ctx, password, strlen(password));
        EVP_DigestFinal_ex(ctx, md, &mdlen);
        EVP_MD_CTX_free(ctx);
        char *hex = bson_malloc(2 * mdlen + 1);
        for (unsigned i = 0; i < mdlen; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
        OPENSSL_cleanse(md, sizeof md);
        return hex;
    }
    char *out = NULL;
    int rc = stringprep_profile(password, &out, "SASLprep", 0);
    if (rc != STRINGPREP_OK) {
        free(out);
        dberr_set(err, DBERR_BAD_VALUE, "Error preparing password with SASLprep: %s",
                  stringprep_strerror(rc));
        return NULL;
    }
    char *copy = bson_strdup(out);
    OPENSSL_cleanse(out, strlen(out));
    free(out);
    return copy;
}

void scram_free_secret(char *s)
{
    if (!s)
        return;
    OPENSSL_cleanse(s, strlen(s));
    bson_free(s);
}

/* HMAC(key, data) into out (scram_key_len bytes). */
static void scram_hmac(scram_mech_t m, const uint8_t *key, size_t key_len, const void *data,
                       size_t n, uint8_t *out)
{
    unsigned int len = 0;
    HMAC(scram_md(m), key, (int)key_len, data, n, out, &len);
}

static void scram_hash(scram_mech_t m, const uint8_t *data, size_t n, uint8_t *out)
{
    unsigned int len = 0;
    EVP_Digest(data, n, out, &len, scram_md(m), NULL);
}

/* StoredKey and ServerKey from the salted password. */
static void scram_keys(scram_mech_t m, const uint8_t *salted, scram_cred_t *c)
{
    size_t kl = scram_key_len(m);
    uint8_t client_key[SCRAM_KEY_MAX];
    scram_hmac(m, salted, kl, "Client Key", 10, client_key);
    scram_hash(m, client_key, kl, c->stored_key);
    scram_hmac(m, salted, kl, "Server Key", 10, c->server_key);
    OPENSSL_cleanse(client_key, sizeof client_key);
}

static bool scram_salted(scram_mech_t m, const char *prepared, const uint8_t *salt,
                         size_t salt_len, int32_t iterations, uint8_t *out)
{
    return PKCS5_PBKDF2_HMAC(prepared, (int)strlen(prepared), salt, (int)salt_len, iterations,
                             scram_md(m), (int)scram_key_len(m), out) == 1;
}

bool scram_cred_derive(scram_mech_t m, const char *prepared, const uint8_t *salt, size_t salt_len,
                       int32_t iterations, scram_cred_t *out, dberr_t *err)
{
    memset(out, 0, sizeof *out);
    out->mech = m;
    out->iterations = iterations;
    if (salt_len < 1 || salt_len > sizeof out->salt || iterations < 1)
        return dberr_set(err, DBERR_BAD_VALUE, "bad SCRAM salt or iteration count");
    memcpy(out->salt, salt, salt_len);
    out->salt_len = salt_len;
    uint8_t salted[SCRAM_KEY_MAX];
    if (!scram_salted(m, prepared, out->salt, out->salt_len, iterations, salted))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "could not derive the SCRAM credential");
    scram_keys(m, salted, out);
    OPENSSL_cleanse(salted, sizeof salted);
    return true;
}

bool scram_cred_make(scram_mech_t m, const char *prepared, int32_t iterations, scram_cred_t *out,
                     dberr_t *err)
{
    uint8_t salt[SCRAM_KEY_MAX];
    size_t salt_len = scram_key_len(m) - 4; /* mongod: 16 bytes (SHA-1), 28 (SHA-256) */
    if (RAND_bytes(salt, (int)salt_len) != 1)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "no random bytes for the SCRAM salt");
    return scram_cred_derive(m, prepared, salt, salt_len, iterations, out, err);
}

void scram_cred_fake(scram_mech_t m, const char *user, scram_cred_t *out)
{
    static uint8_t secret[32];
    static bool have_secret;
    if (!have_secret) {
        if (RAND_bytes(secret, sizeof secret) != 1)
            memset(secret, 0x5a, sizeof secret);
        have_secret = true;
    }
    uint8_t h[SCRAM_KEY_MAX];
    memset(out, 0, sizeof *out);
    out->mech = m;
    out->iterations = m == SCRAM_SHA_1 ? SCRAM_SHA1_ITER_DEFAULT : SCRAM_SHA256_ITER_DEFAULT;
    out->salt_len = scram_key_len(m) - 4;
    /* the same salt for the same name every time, as a real user's */
    HMAC(EVP_sha256(), secret, sizeof secret, (const uint8_t *)user, strlen(user), h, NULL);
    memcpy(out->salt, h, out->salt_len);
    RAND_bytes(out->stored_key, (int)scram_key_len(m));
    RAND_bytes(out->server_key, (int)scram_key_len(m));
}

void scram_cred_append(bson_t *parent, const char *key, const scram_cred_t *c)
{
    char b64[64];
    bson_t doc;
    size_t kl = scram_key_len(c->mech);
    bson_append_document_begin(parent, key, -1, &doc);
    BSON_APPEND_INT32(&doc, "iterationCount", c->iterations);
    scram_b64_encode(c->salt, c->salt_len, b64, sizeof b64);
    BSON_APPEND_UTF8(&doc, "salt", b64);
    scram_b64_encode(c->stored_key, kl, b64, sizeof b64);
    BSON_APPEND_UTF8(&doc, "storedKey", b64);
    scram_b64_encode(c->server_key, kl, b64, sizeof b64);
    BSON_APPEND_UTF8(&doc, "serverKey", b64);
    bson_append_document_end(parent, &doc);
}

/* Decodes the base64 string field `key` of `doc` into `out`; the byte
 * count, or -1. */
static long scram_b64_field(const bson_t *doc, const char *key, uint8_t *out, size_t cap)
{
    bson_iter_t it;
    uint32_t len;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return -1;
    const char *s = bson_iter_utf8(&it, &len);
    return scram_b64_decode(s, len, out, cap);
}

bool scram_cred_parse(scram_mech_t m, const bson_t *doc, scram_cred_t *out)
{
    bson_iter_t it;
    memset(out, 0, sizeof *out);
    out->mech = m;
    if (!bson_iter_init_find(&it, doc, "iterationCount") || !BSON_ITER_HOLDS_NUMBER(&it))
        return false;
    int64_t i = bson_iter_as_int64(&it);
    if (i < 1 || i > INT32_MAX)
        return false;
    out->iterations = (int32_t)i;
    long n = scram_b64_field(doc, "salt", out->salt, sizeof out->salt);
    if (n < 1)
        return false;
    out->salt_len = (size_t)n;
    size_t kl = scram_key_len(m);
    return scram_b64_field(doc, "storedKey", out->stored_key, sizeof out->stored_key) ==
               (long)kl &&
           scram_b64_field(doc, "serverKey", out->server_key, sizeof out->server_key) == (long)kl;
}

/* ---- message parsing ---- */

/* The attribute `name` ("r", "p", ...) at *p: its value up to the next
 * ',' (or the end), advancing *p past it. False when the message does not
 * continue with "name=". */
static bool scram_attr(const char **p, const char *end, char name, const char **val,
                       size_t *len)
{
    const char *s = *p;
    if (end - s < 2 || s[0] != name || s[1] != '=')
        return false;
    s += 2;
    const char *e = memchr(s, ',', (size_t)(end - s));
    if (!e)
        e = end;
    *val = s;
    *len = (size_t)(e - s);
    *p = e < end ? e + 1 : end;
    return true;
}

/* Unescapes a SCRAM user name ("=2C" is ',', "=3D" is '='). */
static bool scram_unescape_user(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\0')
            return false;
        if (ch == '=') {
            if (i + 2 >= n)
                return false;
            if (s[i + 1] == '2' && s[i + 2] == 'C')
                ch = ',';
            else if (s[i + 1] == '3' && s[i + 2] == 'D')
                ch = '=';
            else
                return false;
            i += 2;
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = ch;
    }
    out[o] = '\0';
    return o > 0;
}

static bool scram_printable_nonce(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e || s[i] == ',')
            return false;
    return n > 0;
}

/* ---- server ---- */

void scram_server_init(scram_server_t *s, scram_mech_t m)
{
    memset(s, 0, sizeof *s);
    s->mech = m;
    s->step = SCRAM_STEP_START;
}

void scram_server_destroy(scram_server_t *s)
{
    if (!s)
        return;
    bson_free(s->client_first);
    bson_free(s->server_first);
    s->client_first = s->server_first = NULL;
    OPENSSL_cleanse(&s->cred, sizeof s->cred);
}

scram_server_t *scram_server_new(scram_mech_t m)
{
    scram_server_t *s = bson_malloc(sizeof *s);
    scram_server_init(s, m);
    return s;
}

void scram_server_free(scram_server_t *s)
{
    scram_server_destroy(s);
    bson_free(s);
}

static bool scram_fail(scram_server_t *s, dberr_t *err, int code, const char *msg)
{
    s->step = SCRAM_STEP_FAILED;
    return dberr_set(err, code, "%s", msg);
}

bool scram_server_read_first(scram_server_t *s, const uint8_t *msg, size_t n, dberr_t *err)
{
    if (s->step != SCRAM_STEP_START)
        return scram_fail(s, err, DBERR_BAD_VALUE, "Invalid SCRAM authentication step");
    const char *p = (const char *)msg, *end = p + n;
    if (memchr(p, '\0', n))
        return scram_fail(s, err, DBERR_BAD_VALUE, "SCRAM message contains a NUL byte");
    /* gs2 header: cbind flag, authzid */
    if (n < 3 || (p[0] != 'n' && p[0] != 'y'))
        return scram_fail(s, err, DBERR_BAD_VALUE,
                          p[0] == 'p' ? "Server does not support channel binding"
                                      : "Incorrect SCRAM client|server message: missing gs2 "
                                        "header");
    if (p[1] != ',')
        return scram_fail(s, err, DBERR_BAD_VALUE, "Incorrect SCRAM gs2 header");
    p += 2;
    const char *authzid = NULL;
    size_t authzid_len = 0;
    if (p < end && *p == 'a') {
        if (!scram_attr(&p, end, 'a', &authzid, &authzid_len))
            return scram_fail(s, err, DBERR_BAD_VALUE, "Incorrect SCRAM authzid");
    } else if (p < end && *p == ',') {
        p++;
    } else {
        return scram_fail(s, err, DBERR_BAD_VALUE, "Incorrect SCRAM gs2 header");
    }
    const char *bare = p;
    const char *user, *nonce;
    size_t user_len, nonce_len;
    if (p < end && *p == 'm')
        return scram_fail(s, err, DBERR_BAD_VALUE, "SCRAM mandatory extensions are not supported");
    if (!scram_attr(&p, end, 'n', &user, &user_len) || user_len > 3 * SCRAM_USER_MAX ||
        !scram_unescape_user(user, user_len, s->user, sizeof s->user))
        return scram_fail(s, err, DBERR_BAD_VALUE,
                          "Invalid SCRAM client-first message: bad or missing user name");
    if (!scram_attr(&p, end, 'r', &nonce, &nonce_len) || !scram_printable_nonce(nonce, nonce_len) ||
        nonce_len + 4 * ((SCRAM_SERVER_NONCE_BYTES + 2) / 3) > SCRAM_NONCE_MAX)
        return scram_fail(s, err, DBERR_BAD_VALUE,
                          "Invalid SCRAM client-first message: bad or missing nonce");
    if (authzid) {
        char az[SCRAM_USER_MAX + 1];
        if (authzid_len > 3 * SCRAM_USER_MAX ||
            !scram_unescape_user(authzid, authzid_len, az, sizeof az) || strcmp(az, s->user))
            return scram_fail(s, err, DBERR_BAD_VALUE,
                              "SCRAM user name and authorization identity differ");
    }
    memcpy(s->nonce, nonce, nonce_len);
    s->nonce[nonce_len] = '\0';
    s->client_nonce_len = nonce_len;
    s->client_first = bson_strndup((const char *)msg, n);
    s->gs2_len = (size_t)(bare - (const char *)msg);
    return true;
}

bool scram_server_write_first(scram_server_t *s, const scram_cred_t *cred, bool known,
                              char **out, size_t *out_len, dberr_t *err)
{
    if (s->step != SCRAM_STEP_START || !s->client_first)
        return scram_fail(s, err, DBERR_BAD_VALUE, "Invalid SCRAM authentication step");
    s->cred = *cred;
    s->user_known = known;
    char *tail = s->nonce + s->client_nonce_len;
    if (s->fixed_nonce) {
        snprintf(tail, sizeof s->nonce - s->client_nonce_len, "%s", s->fixed_nonce);
    } else {
        uint8_t rnd[SCRAM_SERVER_NONCE_BYTES];
        if (RAND_bytes(rnd, sizeof rnd) != 1)
            return scram_fail(s, err, DBERR_INTERNAL_ERROR, "no random bytes for the nonce");
        scram_b64_encode(rnd, sizeof rnd, tail, sizeof s->nonce - s->client_nonce_len);
    }
    char salt[64];
    scram_b64_encode(cred->salt, cred->salt_len, salt, sizeof salt);
    s->server_first = bson_strdup_printf("r=%s,s=%s,i=%d", s->nonce, salt, (int)cred->iterations);
    *out = bson_strdup(s->server_first);
    *out_len = strlen(*out);
    s->step = SCRAM_STEP_FINAL;
    return true;
}

bool scram_server_read_final(scram_server_t *s, const uint8_t *msg, size_t n, char **out,
                             size_t *out_len, dberr_t *err)
{
    if (s->step != SCRAM_STEP_FINAL)
        return scram_fail(s, err, DBERR_BAD_VALUE, "Invalid SCRAM authentication step");
    const char *p = (const char *)msg, *end = p + n;
    if (memchr(p, '\0', n))
        return scram_fail(s, err, DBERR_BAD_VALUE, "SCRAM message contains a NUL byte");
    const char *cb, *nonce, *proof;
    size_t cb_len, nonce_len, proof_len;
    if (!scram_attr(&p, end, 'c', &cb, &cb_len))
        return scram_fail(s, err, DBERR_BAD_VALUE,
                          "Invalid SCRAM client-final message: missing channel binding");
    /* c= is the gs2 header of client-first, in base64 */
    uint8_t *gs2 = bson_malloc(cb_len / 4 * 3 + 1);
    long gs2_len = scram_b64_decode(cb, cb_len, gs2, cb_len / 4 * 3 + 1);
    bool same = gs2_len == (long)s->gs2_len && memcmp(gs2, s->client_first, s->gs2_len) == 0;
    bson_free(gs2);
    if (!same)
        return scram_fail(s, err, DBERR_BAD_VALUE,
                          "Invalid SCRAM client-final message: channel binding does not match");
    if (!scram_attr(&p, end, 'r', &nonce, &nonce_len))
        return scram_fail(s, err, DBERR_BAD_VALUE, "Invalid SCRAM client-final message: no nonce");
    if (nonce_len != strlen(s->nonce) || memcmp(nonce, s->nonce, nonce_len) != 0)
        return scram_fail(s, err, DBERR_BAD_VALUE, "Unshared nonce in SCRAM client-final message");
    /* skip extensions up to the proof, which comes last */
    const char *without_proof_end = p;
    while (p < end && !(p[0] == 'p' && p + 1 < end && p[1] == '=')) {
        const char *e = memchr(p, ',', (size_t)(end - p));
        p = e ? e + 1 : end;
        without_proof_end = p;
    }
    if (!scram_attr(&p, end, 'p', &proof, &proof_len) || p != end)
        return scram_fail(s, err, DBERR_BAD_VALUE, "Invalid SCRAM client-final message: no proof");
    /* client-final-without-proof ends before the ',' that precedes p= */
    size_t wp_len = (size_t)(without_proof_end - (const char *)msg);
    if (wp_len > 0 && ((const char *)msg)[wp_len - 1] == ',')
        wp_len--;
    size_t kl = scram_key_len(s->mech);
    uint8_t proof_bytes[SCRAM_KEY_MAX + 3];
    if (scram_b64_decode(proof, proof_len, proof_bytes, sizeof proof_bytes) != (long)kl)
        return scram_fail(s, err, DBERR_BAD_VALUE, "Invalid SCRAM client-final message: bad proof");

    const char *first_bare = s->client_first + s->gs2_len;
    size_t am_len = strlen(first_bare) + 1 + strlen(s->server_first) + 1 + wp_len;
    char *am = bson_malloc(am_len + 1);
    snprintf(am, am_len + 1, "%s,%s,%.*s", first_bare, s->server_first, (int)wp_len,
             (const char *)msg);
    uint8_t client_sig[SCRAM_KEY_MAX], client_key[SCRAM_KEY_MAX], stored[SCRAM_KEY_MAX];
    uint8_t server_sig[SCRAM_KEY_MAX];
    scram_hmac(s->mech, s->cred.stored_key, kl, am, am_len, client_sig);
    for (size_t i = 0; i < kl; i++)
        client_key[i] = proof_bytes[i] ^ client_sig[i];
    scram_hash(s->mech, client_key, kl, stored);
    bool good = CRYPTO_memcmp(stored, s->cred.stored_key, kl) == 0 && s->user_known;
    scram_hmac(s->mech, s->cred.server_key, kl, am, am_len, server_sig);
    bson_free(am);
    OPENSSL_cleanse(client_key, sizeof client_key);
    if (!good)
        return scram_fail(s, err, 18, "Authentication failed.");
    char v[64];
    scram_b64_encode(server_sig, kl, v, sizeof v);
    *out = bson_strdup_printf("v=%s", v);
    *out_len = strlen(*out);
    s->step = SCRAM_STEP_DONE;
    return true;
}

/* ---- client ---- */

bool scram_client_first(scram_client_t *c, scram_mech_t m, const char *user, const char *password,
                        const char *client_nonce, char **out, dberr_t *err)
{
    memset(c, 0, sizeof *c);
    c->mech = m;
    c->prepared = scram_prepare_password(m, user, password, err);
    if (!c->prepared)
        return false;
    bson_string_t *esc = bson_string_new("");
    for (const char *p = user; *p; p++) {
        if (*p == ',')
            bson_string_append(esc, "=2C");
        else if (*p == '=')
            bson_string_append(esc, "=3D");
        else
            bson_string_append_c(esc, *p);
    }
    c->client_first_bare = bson_strdup_printf("n=%s,r=%s", esc->str, client_nonce);
    bson_string_free(esc, true);
    *out = bson_strdup_printf("n,,%s", c->client_first_bare);
    return true;
}

bool scram_client_final(scram_client_t *c, const char *server_first, char **out, dberr_t *err)
{
    const char *p = server_first, *end = p + strlen(p);
    const char *nonce, *salt, *iter;
    size_t nonce_len, salt_len, iter_len;
    if (!scram_attr(&p, end, 'r', &nonce, &nonce_len) ||
        !scram_attr(&p, end, 's', &salt, &salt_len) || !scram_attr(&p, end, 'i', &iter, &iter_len))
        return dberr_set(err, DBERR_BAD_VALUE, "malformed server-first message");
    uint8_t salt_bytes[SCRAM_KEY_MAX * 2];
    long sl = scram_b64_decode(salt, salt_len, salt_bytes, sizeof salt_bytes);
    char iter_s[16];
    snprintf(iter_s, sizeof iter_s, "%.*s", (int)(iter_len < 15 ? iter_len : 15), iter);
    int iterations = atoi(iter_s);
    if (sl < 1 || iterations < 1)
        return dberr_set(err, DBERR_BAD_VALUE, "malformed server-first message");
    size_t kl = scram_key_len(c->mech);
    uint8_t salted[SCRAM_KEY_MAX], client_key[SCRAM_KEY_MAX], stored[SCRAM_KEY_MAX];
    uint8_t client_sig[SCRAM_KEY_MAX], server_key[SCRAM_KEY_MAX], server_sig[SCRAM_KEY_MAX];
    if (!scram_salted(c->mech, c->prepared, salt_bytes, (size_t)sl, iterations, salted))
        return dberr_set(err, DBERR_INTERNAL_ERROR, "PBKDF2 failed");
    scram_hmac(c->mech, salted, kl, "Client Key", 10, client_key);
    scram_hash(c->mech, client_key, kl, stored);
    scram_hmac(c->mech, salted, kl, "Server Key", 10, server_key);
    char *wp = bson_strdup_printf("c=biws,r=%.*s", (int)nonce_len, nonce);
    char *am = bson_strdup_printf("%s,%s,%s", c->client_first_bare, server_first, wp);
    scram_hmac(c->mech, stored, kl, am, strlen(am), client_sig);
    scram_hmac(c->mech, server_key, kl, am, strlen(am), server_sig);
    uint8_t proof[SCRAM_KEY_MAX];
    for (size_t i = 0; i < kl; i++)
        proof[i] = client_key[i] ^ client_sig[i];
    char b64[64];
    scram_b64_encode(proof, kl, b64, sizeof b64);
    *out = bson_strdup_printf("%s,p=%s", wp, b64);
    scram_b64_encode(server_sig, kl, b64, sizeof b64);
    bson_free(c->expected_v);
    c->expected_v = bson_strdup_printf("v=%s", b64);
    bson_free(wp);
    bson_free(am);
    OPENSSL_cleanse(salted, sizeof salted);
    OPENSSL_cleanse(client_key, sizeof client_key);
    return true;
}

void scram_client_destroy(scram_client_t *c)
{
    scram_free_secret(c->prepared);
    bson_free(c->client_first_bare);
    bson_free(c->expected_v);
    memset(c, 0, sizeof *c);
}
