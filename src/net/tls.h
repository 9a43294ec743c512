/* tls: TLS for client connections with OpenSSL over memory BIOs, so libuv
 * keeps doing the socket I/O — mongod's --tlsMode (disabled, allowTLS,
 * preferTLS, requireTLS), --tlsCertificateKeyFile, --tlsCAFile (client
 * certificates verified, and required unless
 * --tlsAllowConnectionsWithoutCertificates), TLS 1.2 and newer only.
 * Loop thread only. See docs/security.md. */
#ifndef ATOMDB_TLS_H
#define ATOMDB_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/dberr.h"

/* --tlsMode. */
typedef enum tls_mode {
    TLS_DISABLED,
    TLS_ALLOW,   /* allowTLS: plaintext and TLS clients */
    TLS_PREFER,  /* preferTLS: the same, for clients (no cluster traffic here) */
    TLS_REQUIRE, /* requireTLS: TLS clients only */
} tls_mode_t;

/* The server's TLS settings. Strings are borrowed for the call. */
typedef struct tls_config {
    tls_mode_t mode;
    const char *cert_key_file; /* PEM: certificate (chain) and private key */
    const char *ca_file;       /* PEM: CAs that sign client certificates, or NULL */
    bool allow_no_cert;        /* tlsAllowConnectionsWithoutCertificates */
} tls_config_t;

/* Parses a --tlsMode value; false for another word. */
bool tls_mode_parse(const char *s, tls_mode_t *out);
const char *tls_mode_name(tls_mode_t m);

/* Loads the certificate, key and CAs; call before listening (and again
 * to reload them: connections already open keep their old context).
 * False with err naming the file and OpenSSL's reason. */
bool tls_configure(const tls_config_t *cfg, dberr_t *err);
/* The mode in force (TLS_DISABLED before tls_configure). */
tls_mode_t tls_mode(void);

/* One connection's TLS state. */
typedef struct tls_session tls_session_t;

/* A server-side session for a new connection. */
tls_session_t *tls_session_new(void);
void tls_session_free(tls_session_t *s);

/* Feeds `n` bytes read from the socket: decrypted application data is
 * appended to `plain`, bytes to send (handshake, alerts) to `out`. False
 * when the connection must close (a failed handshake, a bad record),
 * with the reason in `why`. */
bool tls_session_read(tls_session_t *s, const uint8_t *in, size_t n, buf_t *plain, buf_t *out,
                      char *why, size_t why_size);
/* Encrypts `n` bytes of application data into `out`. */
bool tls_session_write(tls_session_t *s, const uint8_t *in, size_t n, buf_t *out, char *why,
                       size_t why_size);
/* The handshake finished. */
bool tls_session_ready(const tls_session_t *s);
/* The negotiated protocol ("TLSv1.3"), for the log. */
const char *tls_session_version(const tls_session_t *s);

#endif
