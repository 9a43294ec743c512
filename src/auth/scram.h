/* scram: SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802, RFC 7677) as mongod
 * speaks them — stored credentials (salt, StoredKey, ServerKey, never the
 * password), the server side of one conversation, and a client side used by
 * the unit tests. SHA-1 hashes mongod's digest hex(md5(user:mongo:pwd));
 * SHA-256 hashes the SASLprep'd password (GNU libidn). Crypto from OpenSSL.
 * No state outside the structs; any thread. */
#ifndef ATOMDB_SCRAM_H
#define ATOMDB_SCRAM_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/dberr.h"

/* The mechanisms. */
typedef enum scram_mech {
    SCRAM_SHA_1,
    SCRAM_SHA_256,
} scram_mech_t;

#define SCRAM_KEY_MAX 32          /* the longest digest (SHA-256) */
#define SCRAM_NONCE_MAX 256       /* longest combined nonce accepted */
#define SCRAM_USER_MAX 1024       /* longest user name accepted, in bytes */

/* mongod's defaults and lower bounds for scramIterationCount and
 * scramSHA256IterationCount. */
#define SCRAM_SHA1_ITER_DEFAULT 10000
#define SCRAM_SHA1_ITER_MIN 5000
#define SCRAM_SHA256_ITER_DEFAULT 15000
#define SCRAM_SHA256_ITER_MIN 4096

/* One mechanism's stored credential, as in admin.system.users'
 * credentials.SCRAM-SHA-*: {iterationCount, salt, storedKey, serverKey}
 * (base64 strings). */
typedef struct scram_cred {
    scram_mech_t mech;
    int32_t iterations;
    uint8_t salt[SCRAM_KEY_MAX];
    size_t salt_len;
    uint8_t stored_key[SCRAM_KEY_MAX];
    uint8_t server_key[SCRAM_KEY_MAX];
} scram_cred_t;

/* "SCRAM-SHA-1" / "SCRAM-SHA-256". */
const char *scram_mech_name(scram_mech_t m);
/* Parses a mechanism name; false for any other. */
bool scram_mech_parse(const char *name, scram_mech_t *out);
/* The digest length of `m` (20 or 32). */
size_t scram_key_len(scram_mech_t m);

/* The string `m` hashes for `user` and `password`: hex(md5(user:mongo:pwd))
 * for SHA-1, SASLprep(pwd) for SHA-256. Returns a bson_malloc'd string to
 * be wiped and freed with scram_free_secret, or NULL with BadValue 2 when
 * SASLprep refuses the password. */
char *scram_prepare_password(scram_mech_t m, const char *user, const char *password, dberr_t *err);
/* Overwrites and frees a string from scram_prepare_password (NULL ok). */
void scram_free_secret(char *s);

/* Makes a credential for `password` (already prepared, see
 * scram_prepare_password) with a fresh random salt. */
bool scram_cred_make(scram_mech_t m, const char *prepared, int32_t iterations, scram_cred_t *out,
                     dberr_t *err);
/* The same with a given salt (the RFC test vectors). */
bool scram_cred_derive(scram_mech_t m, const char *prepared, const uint8_t *salt, size_t salt_len,
                       int32_t iterations, scram_cred_t *out, dberr_t *err);
/* A credential for a user that does not exist: a salt derived from `user`
 * and a per-process secret and keys that match no password, so an unknown
 * user fails at the proof like a wrong password, never earlier. */
void scram_cred_fake(scram_mech_t m, const char *user, scram_cred_t *out);
/* Appends {iterationCount, salt, storedKey, serverKey} under `key`. */
void scram_cred_append(bson_t *parent, const char *key, const scram_cred_t *c);
/* Reads a credential document; false when it is malformed. */
bool scram_cred_parse(scram_mech_t m, const bson_t *doc, scram_cred_t *out);

/* base64 (RFC 4648, padded). scram_b64_decode returns the byte count or
 * -1 for text that is not base64 or would not fit `cap`. */
size_t scram_b64_encode(const uint8_t *in, size_t n, char *out, size_t cap);
long scram_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap);

/* The server side of one conversation. */
typedef enum scram_step {
    SCRAM_STEP_START,    /* waiting for client-first */
    SCRAM_STEP_FINAL,    /* server-first sent, waiting for client-final */
    SCRAM_STEP_DONE,     /* server-final sent (the proof was right) */
    SCRAM_STEP_FAILED,   /* the conversation cannot go on */
} scram_step_t;

typedef struct scram_server {
    scram_mech_t mech;
    scram_step_t step;
    char user[SCRAM_USER_MAX + 1];   /* from client-first, unescaped */
    char *client_first;              /* client-first as sent (owned) */
    size_t gs2_len;                  /* its gs2 header ("n,," or "n,a=user,"): the
                                      * bare "n=...,r=..." follows */
    char *server_first;              /* "r=...,s=...,i=..." (owned) */
    char nonce[SCRAM_NONCE_MAX + 1]; /* client nonce + server nonce */
    size_t client_nonce_len;
    scram_cred_t cred;
    bool user_known;                 /* cred is real (not scram_cred_fake) */
    const char *fixed_nonce;         /* tests: the server nonce part to use */
} scram_server_t;

/* A conversation in the caller's storage: init, then destroy (accepts
 * NULL) to free what it owns and wipe the credential. */
void scram_server_init(scram_server_t *s, scram_mech_t m);
void scram_server_destroy(scram_server_t *s);
/* The same on the heap: scram_server_free (accepts NULL) destroys it and
 * frees it. */
scram_server_t *scram_server_new(scram_mech_t m);
void scram_server_free(scram_server_t *s);

/* Reads client-first ("n,,n=user,r=nonce"): fills s->user. BadValue 2 for
 * a malformed message, channel binding or an authzid other than the user. */
bool scram_server_read_first(scram_server_t *s, const uint8_t *msg, size_t n, dberr_t *err);
/* With the user's credential (or a fake one, `known` false), builds
 * server-first into `out` (bson_malloc'd, *out_len bytes). */
bool scram_server_write_first(scram_server_t *s, const scram_cred_t *cred, bool known,
                              char **out, size_t *out_len, dberr_t *err);
/* Reads client-final ("c=biws,r=nonce,p=proof") and checks the proof in
 * constant time. True with server-final ("v=...") in `out`; false with
 * AuthenticationFailed 18 for a wrong proof or an unknown user, BadValue 2
 * for a malformed message or a nonce that is not this conversation's. */
bool scram_server_read_final(scram_server_t *s, const uint8_t *msg, size_t n, char **out,
                             size_t *out_len, dberr_t *err);

/* A client side (unit tests and tools): client-first for `user` with
 * `client_nonce`; then, from server-first, client-final and the expected
 * server signature. */
typedef struct scram_client {
    scram_mech_t mech;
    char *prepared;         /* the prepared password (owned, wiped) */
    char *client_first_bare;
    char *expected_v;       /* "v=..." the server must send */
} scram_client_t;

bool scram_client_first(scram_client_t *c, scram_mech_t m, const char *user, const char *password,
                        const char *client_nonce, char **out, dberr_t *err);
bool scram_client_final(scram_client_t *c, const char *server_first, char **out, dberr_t *err);
void scram_client_destroy(scram_client_t *c);

#endif
