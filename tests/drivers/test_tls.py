"""TLS through pymongo (docs/security.md): a test CA, server and client
certificates made here with the openssl tool, then --tlsMode requireTLS /
allowTLS with and without --tlsCAFile: TLS logins work, plaintext is
refused under requireTLS, and certificates the CA did not sign are refused.
"""

import shutil
import ssl
import subprocess

import pytest
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from atomdb_testlib import AtomdbServer, require_installed, stop_all


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_cert(d, name, ca, cn, server=False):
    """A key and certificate for `cn` signed by CA `ca`; returns the PEM
    holding both."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "%s.key" % name, "-out", "%s.csr" % name, "-subj", "/CN=%s" % cn, cwd=d)
    ext = d / ("%s.ext" % name)
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n" if server else
                   "extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", "%s.csr" % name, "-CA", "%s.pem" % ca, "-CAkey", "%s.key" % ca,
            "-CAcreateserial", "-days", "2", "-out", "%s.crt" % name, "-extfile", str(ext), cwd=d)
    pem = d / ("%s.pem" % name)
    pem.write_text((d / ("%s.crt" % name)).read_text() + (d / ("%s.key" % name)).read_text())
    return pem


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "%s.key" % name, "-out", "%s.pem" % name, "-days", "2", "-subj",
            "/CN=%s" % name, cwd=d)
    return d / ("%s.pem" % name)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    require_installed(shutil.which("openssl"), "the openssl tool (Debian openssl)")
    d = tmp_path_factory.mktemp("tls")
    ca = make_ca(d, "ca")
    other_ca = make_ca(d, "otherca")
    return {
        "ca": ca,
        "server": make_cert(d, "server", "ca", "localhost", server=True),
        "client": make_cert(d, "client", "ca", "client"),
        "stranger": make_cert(d, "stranger", "otherca", "stranger"),
        "other_ca": other_ca,
        "other_server": make_cert(d, "otherserver", "otherca", "localhost", server=True),
    }


def start(*args):
    return AtomdbServer(extra_args=list(args)).start()


def tls_client(s, **kw):
    kw.setdefault("serverSelectionTimeoutMS", 3000)
    return MongoClient(s.host, s.port, directConnection=True, **kw)


def works(c):
    try:
        return c.admin.command("ping")["ok"] == 1
    except PyMongoError:
        return False
    finally:
        c.close()


def test_require_tls_serves_tls_clients_and_refuses_plaintext(certs):
    s = start("--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(certs["server"]))
    try:
        c = tls_client(s, tls=True, tlsCAFile=str(certs["ca"]))
        c.app.c.insert_one({"over": "tls"})
        assert c.app.c.find_one({}, {"_id": 0}) == {"over": "tls"}
        c.close()
        assert not works(tls_client(s)), "plaintext is refused under requireTLS"
        assert not works(tls_client(s, tls=True, tlsCAFile=str(certs["other_ca"]))), \
            "a client that does not trust the server's CA fails the handshake"
        assert '"ssl":"on"' in s.log(), "the listening line says TLS is on"
    finally:
        stop_all([s])


def test_allow_tls_serves_both(certs):
    s = start("--tlsMode", "allowTLS", "--tlsCertificateKeyFile", str(certs["server"]))
    try:
        assert works(tls_client(s, tls=True, tlsCAFile=str(certs["ca"]))), "TLS works"
        assert works(tls_client(s)), "and plaintext too"
    finally:
        stop_all([s])


def test_ca_file_requires_a_client_certificate_it_signed(certs):
    s = start("--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(certs["server"]),
              "--tlsCAFile", str(certs["ca"]))
    try:
        ok = dict(tls=True, tlsCAFile=str(certs["ca"]))
        assert works(tls_client(s, tlsCertificateKeyFile=str(certs["client"]), **ok)), \
            "a certificate the CA signed is accepted"
        assert not works(tls_client(s, **ok)), "no certificate: refused (as mongod)"
        assert not works(tls_client(s, tlsCertificateKeyFile=str(certs["stranger"]), **ok)), \
            "a certificate from another CA is refused"
        assert "client certificate" in s.log(), "the refusal is logged with its reason"
    finally:
        stop_all([s])


def test_allow_connections_without_certificates_still_checks_those_presented(certs):
    s = start("--tlsMode", "preferTLS", "--tlsCertificateKeyFile", str(certs["server"]),
              "--tlsCAFile", str(certs["ca"]), "--tlsAllowConnectionsWithoutCertificates")
    try:
        ok = dict(tls=True, tlsCAFile=str(certs["ca"]))
        assert works(tls_client(s, **ok)), "no certificate is allowed"
        assert not works(tls_client(s, tlsCertificateKeyFile=str(certs["stranger"]), **ok)), \
            "a bad certificate is still refused"
    finally:
        stop_all([s])


def test_tls_below_1_2_is_refused(certs):
    s = start("--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(certs["server"]))
    try:
        import socket
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(str(certs["ca"]))
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            # this client must be able to offer TLS 1.1 (Debian's default
            # security level forbids it), so the refusal is the server's
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
            ctx.minimum_version = ssl.TLSVersion.TLSv1_1
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        with socket.create_connection((s.host, s.port), timeout=5) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                with ctx.wrap_socket(raw, server_hostname="localhost") as t:
                    t.recv(1)
        assert "unsupported protocol" in s.log().lower() or "version" in s.log().lower(), \
            "the server refused it for its version:\n" + s.log_tail(20)
    finally:
        stop_all([s])


def test_sighup_reloads_the_certificate_and_a_bad_file_keeps_the_old(certs, tmp_path):
    import signal
    pem = tmp_path / "live.pem"
    pem.write_text(certs["server"].read_text())
    s = start("--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(pem))
    try:
        by_ca = dict(tls=True, tlsCAFile=str(certs["ca"]))
        by_other = dict(tls=True, tlsCAFile=str(certs["other_ca"]))
        assert works(tls_client(s, **by_ca)) and not works(tls_client(s, **by_other))
        pem.write_text(certs["other_server"].read_text())
        s.proc.send_signal(signal.SIGHUP)
        for _ in range(100):  # the loop handles the signal on its next turn
            if "Rotated TLS certificates" in s.log():
                break
            import time
            time.sleep(0.05)
        assert "Rotated TLS certificates" in s.log(), s.log_tail(20)
        assert works(tls_client(s, **by_other)), "new connections get the new certificate"
        assert not works(tls_client(s, **by_ca))
        pem.write_text("not a certificate\n")
        s.proc.send_signal(signal.SIGHUP)
        for _ in range(100):
            if "Certificate rotation failed" in s.log():
                break
            import time
            time.sleep(0.05)
        assert "Certificate rotation failed" in s.log(), s.log_tail(20)
        assert works(tls_client(s, **by_other)), "a bad file keeps the old certificate"
    finally:
        stop_all([s])


@pytest.mark.parametrize("args,named", [
    (["--tlsMode", "requireTLS"], "--tlsCertificateKeyFile"),
    (["--tlsMode", "sometimes"], "--tlsMode"),
    (["--tlsCAFile", "/tmp/x.pem"], "--tlsMode"),
    (["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", "/nonexistent.pem"],
     "/nonexistent.pem"),
])
def test_bad_tls_settings_stop_the_start(tmp_path, args, named):
    from atomdb_testlib import atomdb_bin, free_port
    p = subprocess.run([str(atomdb_bin()), "--port", str(free_port()), "--dbpath",
                        str(tmp_path / "d"), *args], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0, p
    assert named in p.stderr + p.stdout, (p.stderr, p.stdout)
