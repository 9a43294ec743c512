/* test_scram: SCRAM-SHA-1 and SCRAM-SHA-256 (src/auth/scram.c) against the
 * RFC 5802 and RFC 7677 example conversations, mongod's SHA-1 password
 * digest, SASLprep, and malformed client messages that must fail cleanly. */
#include <string.h>

#include "auth/scram.h"
#include "unit.h"

/* Runs the server side of an RFC example: credential from `password` and
 * the example's salt, the example's server nonce, and checks each message. */
static void rfc_conversation(scram_mech_t m, const char *password, const char *salt_b64,
                             const char *client_first, const char *server_nonce,
                             const char *server_first, const char *client_final,
                             const char *server_final)
{
    uint8_t salt[64];
    long sl = scram_b64_decode(salt_b64, strlen(salt_b64), salt, sizeof salt);
    CHECK(sl > 0, "the example salt decodes");
    scram_cred_t cred;
    dberr_t err = {0};
    CHECK(scram_cred_derive(m, password, salt, (size_t)sl, 4096, &cred, &err), "derive: %s",
          err.msg);
    scram_server_t s;
    scram_server_init(&s, m);
    s.fixed_nonce = server_nonce;
    CHECK(scram_server_read_first(&s, (const uint8_t *)client_first, strlen(client_first), &err),
          "client-first is accepted: %s", err.msg);
    CHECK(strcmp(s.user, "user") == 0, "the user is read from client-first");
    char *out = NULL;
    size_t n = 0;
    CHECK(scram_server_write_first(&s, &cred, true, &out, &n, &err), "server-first is built");
    CHECK(out && strcmp(out, server_first) == 0, "server-first is the RFC's: %s", out);
    bson_free(out);
    out = NULL;
    CHECK(scram_server_read_final(&s, (const uint8_t *)client_final, strlen(client_final), &out,
                                  &n, &err),
          "the RFC's proof is accepted: %s", err.msg);
    CHECK(out && strcmp(out, server_final) == 0, "server-final is the RFC's: %s", out);
    bson_free(out);
    scram_server_destroy(&s);
}

static void test_rfc5802_sha1_example_conversation(void)
{
    rfc_conversation(SCRAM_SHA_1, "pencil", "QSXCR+Q6sek8bf92", "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
                     "3rfcNHYJY1ZVvWVs7j",
                     "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
                     "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
                     "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=");
}

static void test_rfc7677_sha256_example_conversation(void)
{
    rfc_conversation(SCRAM_SHA_256, "pencil", "W22ZaJ0SNY7soEsUEjb6gQ==",
                     "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
                     "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                     "i=4096",
                     "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+"
                     "Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                     "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
}

static void test_sha1_password_is_mongods_md5_digest(void)
{
    dberr_t err = {0};
    char *p = scram_prepare_password(SCRAM_SHA_1, "user", "pencil", &err);
    /* md5("user:mongo:pencil") */
    CHECK(p && strcmp(p, "1c33006ec1ffd90f9cadcbcc0e118200") == 0, "digest is %s", p);
    scram_free_secret(p);
}

static void test_sha256_password_is_saslprepped(void)
{
    dberr_t err = {0};
    /* RFC 4013: U+00AD (soft hyphen) maps to nothing, U+2168 (ROMAN
     * NUMERAL NINE) to "IX" under NFKC */
    char *p = scram_prepare_password(SCRAM_SHA_256, "u", "I\xc2\xadX", &err);
    CHECK(p && strcmp(p, "IX") == 0, "soft hyphen removed: %s", p ? p : err.msg);
    scram_free_secret(p);
    p = scram_prepare_password(SCRAM_SHA_256, "u", "\xe2\x85\xa8", &err);
    CHECK(p && strcmp(p, "IX") == 0, "roman nine is IX: %s", p ? p : err.msg);
    scram_free_secret(p);
    p = scram_prepare_password(SCRAM_SHA_256, "u", "a\x07", &err);
    CHECK(!p && err.code == DBERR_BAD_VALUE, "a control character is prohibited");
    scram_free_secret(p);
}

/* A full conversation through the client side, for both mechanisms. */
static void client_server(scram_mech_t m, const char *user, const char *password,
                          const char *login_password, bool expect_ok)
{
    dberr_t err = {0};
    char *prep = scram_prepare_password(m, user, password, &err);
    scram_cred_t cred;
    CHECK(prep && scram_cred_make(m, prep, 4096, &cred, &err), "credential made");
    scram_free_secret(prep);
    scram_client_t c;
    char *msg = NULL, *sf = NULL, *cf = NULL, *fin = NULL;
    size_t n;
    CHECK(scram_client_first(&c, m, user, login_password, "abcdefghijkl", &msg, &err), "first");
    scram_server_t s;
    scram_server_init(&s, m);
    CHECK(scram_server_read_first(&s, (const uint8_t *)msg, strlen(msg), &err), "read first: %s",
          err.msg);
    CHECK(strcmp(s.user, user) == 0, "escaped user name %s read back as %s", user, s.user);
    CHECK(scram_server_write_first(&s, &cred, true, &sf, &n, &err), "server-first");
    CHECK(scram_client_final(&c, sf, &cf, &err), "client-final");
    bool ok = scram_server_read_final(&s, (const uint8_t *)cf, strlen(cf), &fin, &n, &err);
    CHECK(ok == expect_ok, "%s login %s", scram_mech_name(m), expect_ok ? "succeeds" : "fails");
    if (ok)
        CHECK(strcmp(fin, c.expected_v) == 0, "the server signature is what the client expects");
    else
        CHECK(err.code == 18 && strcmp(err.msg, "Authentication failed.") == 0,
              "a wrong password is AuthenticationFailed: %d %s", err.code, err.msg);
    bson_free(msg);
    bson_free(sf);
    bson_free(cf);
    bson_free(fin);
    scram_client_destroy(&c);
    scram_server_destroy(&s);
}

static void test_both_mechanisms_log_in_and_refuse_a_wrong_password(void)
{
    client_server(SCRAM_SHA_1, "alice", "secret", "secret", true);
    client_server(SCRAM_SHA_256, "alice", "secret", "secret", true);
    client_server(SCRAM_SHA_1, "alice", "secret", "Secret", false);
    client_server(SCRAM_SHA_256, "alice", "secret", "Secret", false);
    client_server(SCRAM_SHA_256, "a,b=c", "pw", "pw", true);
}

static void test_unknown_user_fails_at_the_proof_like_a_wrong_password(void)
{
    dberr_t err = {0};
    scram_cred_t fake, fake2;
    scram_cred_fake(SCRAM_SHA_256, "nobody", &fake);
    scram_cred_fake(SCRAM_SHA_256, "nobody", &fake2);
    CHECK(memcmp(fake.salt, fake2.salt, fake.salt_len) == 0, "the fake salt is stable per name");
    scram_client_t c;
    char *msg = NULL, *sf = NULL, *cf = NULL, *fin = NULL;
    size_t n;
    scram_client_first(&c, SCRAM_SHA_256, "nobody", "x", "nonce123", &msg, &err);
    scram_server_t s;
    scram_server_init(&s, SCRAM_SHA_256);
    CHECK(scram_server_read_first(&s, (const uint8_t *)msg, strlen(msg), &err), "first read");
    CHECK(scram_server_write_first(&s, &fake, false, &sf, &n, &err), "server-first for a fake");
    CHECK(scram_client_final(&c, sf, &cf, &err), "client-final");
    CHECK(!scram_server_read_final(&s, (const uint8_t *)cf, strlen(cf), &fin, &n, &err) &&
              err.code == 18 && strcmp(err.msg, "Authentication failed.") == 0,
          "unknown user: AuthenticationFailed with the same message");
    bson_free(msg);
    bson_free(sf);
    bson_free(cf);
    scram_client_destroy(&c);
    scram_server_destroy(&s);
}

static bool first_fails(const char *msg)
{
    dberr_t err = {0};
    scram_server_t s;
    scram_server_init(&s, SCRAM_SHA_256);
    bool ok = scram_server_read_first(&s, (const uint8_t *)msg, strlen(msg), &err);
    bool clean = !ok && err.code == DBERR_BAD_VALUE && s.step == SCRAM_STEP_FAILED;
    scram_server_destroy(&s);
    return clean;
}

static void test_malformed_client_first_messages_are_bad_value(void)
{
    const char *bad[] = {"", "n", "n,", "n,,", "x,,n=u,r=abc", "p=tls-unique,,n=u,r=abc",
                         "n,,r=abc", "n,,n=,r=abc", "n,,n=u", "n,,n=u,r=", "n,,n=u=,r=abc",
                         "n,,n=u=2,r=abc", "n,,n=u=4X,r=abc", "n,a=other,n=u,r=abc",
                         "n,,m=ext,n=u,r=abc", "n,,n=u,r=a b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(first_fails(bad[i]), "client-first '%s' is refused", bad[i]);
}

static void test_malformed_or_replayed_client_final_is_refused(void)
{
    dberr_t err = {0};
    char *prep = scram_prepare_password(SCRAM_SHA_256, "u", "pw", &err);
    scram_cred_t cred;
    scram_cred_make(SCRAM_SHA_256, prep, 4096, &cred, &err);
    scram_free_secret(prep);
    const char *finals[] = {"", "c=biws", "c=biws,r=wrong,p=AAAA", "c=!!!!,r=%s,p=AAAA",
                            "c=biws,r=%s", "c=biws,r=%s,p=notbase64", "c=eSws,r=%s,p=AAAA",
                            "c=biws,r=%s,p=AAAA"};
    for (size_t i = 0; i < sizeof finals / sizeof finals[0]; i++) {
        scram_server_t s;
        scram_server_init(&s, SCRAM_SHA_256);
        const char *first = "n,,n=u,r=clientnonce";
        char *sf = NULL, *fin = NULL;
        size_t n;
        scram_server_read_first(&s, (const uint8_t *)first, strlen(first), &err);
        scram_server_write_first(&s, &cred, true, &sf, &n, &err);
        char msg[512];
        snprintf(msg, sizeof msg, finals[i], s.nonce);
        bool ok = scram_server_read_final(&s, (const uint8_t *)msg, strlen(msg), &fin, &n, &err);
        CHECK(!ok && (err.code == DBERR_BAD_VALUE || err.code == 18),
              "client-final '%s' is refused (%d %s)", finals[i], err.code, err.msg);
        CHECK(!scram_server_read_final(&s, (const uint8_t *)msg, strlen(msg), &fin, &n, &err),
              "the conversation cannot go on after a failure");
        bson_free(sf);
        bson_free(fin);
        scram_server_destroy(&s);
    }
}

static void test_credentials_round_trip_through_bson(void)
{
    dberr_t err = {0};
    scram_cred_t c, back;
    CHECK(scram_cred_make(SCRAM_SHA_256, "pw", 15000, &c, &err), "made");
    bson_t doc = BSON_INITIALIZER, inner;
    scram_cred_append(&doc, "SCRAM-SHA-256", &c);
    bson_iter_t it;
    uint32_t len;
    const uint8_t *data;
    CHECK(bson_iter_init_find(&it, &doc, "SCRAM-SHA-256"), "appended");
    bson_iter_document(&it, &len, &data);
    bson_init_static(&inner, data, len);
    CHECK(scram_cred_parse(SCRAM_SHA_256, &inner, &back), "parsed back");
    CHECK(back.iterations == 15000 && back.salt_len == 28 &&
              memcmp(back.stored_key, c.stored_key, 32) == 0 &&
              memcmp(back.server_key, c.server_key, 32) == 0,
          "same credential after the round trip");
    bson_destroy(&doc);
}

static void test_base64_refuses_what_is_not_base64(void)
{
    uint8_t out[16];
    CHECK(scram_b64_decode("YWJj", 4, out, sizeof out) == 3 && memcmp(out, "abc", 3) == 0,
          "abc decodes");
    CHECK(scram_b64_decode("YWI=", 4, out, sizeof out) == 2, "padding is subtracted");
    CHECK(scram_b64_decode("YW=j", 4, out, sizeof out) == -1, "padding in the middle");
    CHECK(scram_b64_decode("YWJ", 3, out, sizeof out) == -1, "a length not a multiple of 4");
    CHECK(scram_b64_decode("Y*Jj", 4, out, sizeof out) == -1, "a character outside base64");
    CHECK(scram_b64_decode("YWJjYWJjYWJjYWJjYWJj", 20, out, 4) == -1, "too long for the buffer");
}

int main(void)
{
    UNIT_RUN(test_rfc5802_sha1_example_conversation);
    UNIT_RUN(test_rfc7677_sha256_example_conversation);
    UNIT_RUN(test_sha1_password_is_mongods_md5_digest);
    UNIT_RUN(test_sha256_password_is_saslprepped);
    UNIT_RUN(test_both_mechanisms_log_in_and_refuse_a_wrong_password);
    UNIT_RUN(test_unknown_user_fails_at_the_proof_like_a_wrong_password);
    UNIT_RUN(test_malformed_client_first_messages_are_bad_value);
    UNIT_RUN(test_malformed_or_replayed_client_final_is_refused);
    UNIT_RUN(test_credentials_round_trip_through_bson);
    UNIT_RUN(test_base64_refuses_what_is_not_base64);
    return unit_finish();
}
