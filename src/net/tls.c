/* tls: OpenSSL server sessions driven through memory BIOs — bytes read by
 * libuv go into the read BIO, SSL_read yields plaintext frames, and what
 * OpenSSL writes (handshake, records) is drained from the write BIO and
 * sent by the connection's own write queue. */
#include "net/tls.h"

#include <bson/bson.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <string.h>

struct tls_session {
    SSL *ssl;
    BIO *rbio; /* what the client sent, owned by ssl */
    BIO *wbio; /* what OpenSSL wants sent, owned by ssl */
};

static SSL_CTX *tls_ctx;
static tls_mode_t tls_current = TLS_DISABLED;

/* The --tlsMode names, indexed by mode. */
static const char *const tls_mode_names[] = {
    [TLS_DISABLED] = "disabled",
    [TLS_ALLOW] = "allowTLS",
    [TLS_PREFER] = "preferTLS",
    [TLS_REQUIRE] = "requireTLS",
};
#define TLS_MODE_COUNT (sizeof tls_mode_names / sizeof tls_mode_names[0])

bool tls_mode_parse(const char *s, tls_mode_t *out)
{
    for (size_t i = 0; i < TLS_MODE_COUNT; i++)
        if (strcmp(s, tls_mode_names[i]) == 0)
            return (*out = (tls_mode_t)i, true);
    return false;
}

const char *tls_mode_name(tls_mode_t m)
{
    return (size_t)m < TLS_MODE_COUNT ? tls_mode_names[m] : "disabled";
}

/* OpenSSL's most recent error as text. */
static const char *tls_error_text(char *buf, size_t size)
{
    unsigned long e = ERR_get_error();
    if (!e)
        snprintf(buf, size, "unknown error");
    else
        ERR_error_string_n(e, buf, size);
    ERR_clear_error();
    return buf;
}

bool tls_configure(const tls_config_t *cfg, dberr_t *err)
{
    char why[256];
    if (cfg->mode == TLS_DISABLED) {
        tls_current = TLS_DISABLED;
        return true;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return dberr_set(err, DBERR_INTERNAL_ERROR, "cannot create a TLS context: %s",
                         tls_error_text(why, sizeof why));
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_key_file) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, cfg->cert_key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        dberr_set(err, DBERR_BAD_VALUE, "--tlsCertificateKeyFile %s: %s", cfg->cert_key_file,
                  tls_error_text(why, sizeof why));
        SSL_CTX_free(ctx);
        return false;
    }
    if (cfg->ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) != 1) {
            dberr_set(err, DBERR_BAD_VALUE, "--tlsCAFile %s: %s", cfg->ca_file,
                      tls_error_text(why, sizeof why));
            SSL_CTX_free(ctx);
            return false;
        }
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->ca_file);
        if (names)
            SSL_CTX_set_client_CA_list(ctx, names);
        /* as mongod: with a CA file, clients present a certificate unless
         * tlsAllowConnectionsWithoutCertificates; one that is presented is
         * always verified */
        SSL_CTX_set_verify(ctx,
                           SSL_VERIFY_PEER |
                               (cfg->allow_no_cert ? 0 : SSL_VERIFY_FAIL_IF_NO_PEER_CERT),
                           NULL);
    }
    if (tls_ctx)
        SSL_CTX_free(tls_ctx); /* sessions hold their own reference */
    tls_ctx = ctx;
    tls_current = cfg->mode;
    return true;
}

tls_mode_t tls_mode(void)
{
    return tls_current;
}

void tls_session_free(tls_session_t *s)
{
    if (!s)
        return;
    SSL_free(s->ssl); /* and the BIOs it was given */
    bson_free(s);
}

tls_session_t *tls_session_new(void)
{
    if (!tls_ctx)
        return NULL;
    tls_session_t *s = bson_malloc0(sizeof *s);
    s->ssl = SSL_new(tls_ctx);
    s->rbio = BIO_new(BIO_s_mem());
    s->wbio = BIO_new(BIO_s_mem());
    if (!s->ssl || !s->rbio || !s->wbio) {
        BIO_free(s->rbio); /* not the session's yet */
        BIO_free(s->wbio);
        tls_session_free(s);
        return NULL;
    }
    SSL_set_bio(s->ssl, s->rbio, s->wbio);
    SSL_set_accept_state(s->ssl);
    return s;
}

/* Moves everything OpenSSL wrote into `out`. */
static void tls_drain(tls_session_t *s, buf_t *out)
{
    char chunk[16384];
    int n;
    while ((n = BIO_read(s->wbio, chunk, sizeof chunk)) > 0)
        buf_append(out, chunk, (size_t)n);
}

/* True when an SSL_* result `rc` means "go on later"; false with `why`
 * for a failure. */
static bool tls_retry(tls_session_t *s, int rc, char *why, size_t why_size)
{
    int e = SSL_get_error(s->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return true;
    if (e == SSL_ERROR_ZERO_RETURN) {
        snprintf(why, why_size, "TLS connection closed by the client");
        return false;
    }
    long v = SSL_get_verify_result(s->ssl);
    char buf[256];
    if (v != X509_V_OK)
        snprintf(why, why_size, "TLS handshake failed: client certificate: %s",
                 X509_verify_cert_error_string(v));
    else
        snprintf(why, why_size, "TLS error: %s", tls_error_text(buf, sizeof buf));
    ERR_clear_error();
    return false;
}

bool tls_session_read(tls_session_t *s, const uint8_t *in, size_t n, buf_t *plain, buf_t *out,
                      char *why, size_t why_size)
{
    if (n && BIO_write(s->rbio, in, (int)n) != (int)n) {
        snprintf(why, why_size, "TLS: cannot buffer input");
        return false;
    }
    bool ok = true;
    if (!SSL_is_init_finished(s->ssl)) {
        int rc = SSL_do_handshake(s->ssl);
        if (rc != 1)
            ok = tls_retry(s, rc, why, why_size);
    }
    while (ok && SSL_is_init_finished(s->ssl)) {
        buf_reserve(plain, 16384);
        int rc = SSL_read(s->ssl, plain->data + plain->len, (int)(plain->cap - plain->len));
        if (rc <= 0) {
            ok = tls_retry(s, rc, why, why_size);
            break;
        }
        plain->len += (size_t)rc;
    }
    tls_drain(s, out); /* handshake replies, and an alert when it failed */
    return ok;
}

bool tls_session_write(tls_session_t *s, const uint8_t *in, size_t n, buf_t *out, char *why,
                       size_t why_size)
{
    while (n > 0) {
        int rc = SSL_write(s->ssl, in, (int)(n > (1u << 30) ? (1u << 30) : n));
        if (rc <= 0) {
            if (!tls_retry(s, rc, why, why_size))
                return false;
            snprintf(why, why_size, "TLS: write before the handshake finished");
            return false;
        }
        in += rc;
        n -= (size_t)rc;
        tls_drain(s, out);
    }
    tls_drain(s, out);
    return true;
}

bool tls_session_ready(const tls_session_t *s)
{
    return SSL_is_init_finished(s->ssl);
}

const char *tls_session_version(const tls_session_t *s)
{
    return SSL_get_version(s->ssl);
}
