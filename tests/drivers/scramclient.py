"""A minimal SCRAM-SHA-1/256 client (RFC 5802) for raw-socket tests, with
mongod's SHA-1 password digest, written from the RFC (not pymongo's)."""

import base64
import hashlib
import hmac

from bson.son import SON

import wireproto as w


class ScramClient:
    """The client side of SCRAM-SHA-1/256 (RFC 5802), with mongod's SHA-1
    password digest."""

    def __init__(self, user, password, mech, nonce="rawclientnonce0123456789"):
        self.user, self.mech, self.nonce = user, mech, nonce
        if mech == "SCRAM-SHA-1":
            password = hashlib.md5(("%s:mongo:%s" % (user, password)).encode()).hexdigest()
            self.h = hashlib.sha1
        else:
            self.h = hashlib.sha256
        self.password = password.encode()
        self.bare = "n=%s,r=%s" % (user.replace("=", "=3D").replace(",", "=2C"), nonce)

    def first(self):
        return ("n,," + self.bare).encode()

    def final(self, server_first):
        sf = bytes(server_first).decode()
        attrs = dict(kv.split("=", 1) for kv in sf.split(","))
        salted = hashlib.pbkdf2_hmac(self.h().name, self.password, base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", self.h).digest()
        stored = self.h(client_key).digest()
        without_proof = "c=biws,r=" + attrs["r"]
        auth = ",".join([self.bare, sf, without_proof]).encode()
        sig = hmac.new(stored, auth, self.h).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, sig))
        server_key = hmac.new(salted, b"Server Key", self.h).digest()
        self.expected_v = b"v=" + base64.b64encode(hmac.new(server_key, auth, self.h).digest())
        return (without_proof + ",p=" + base64.b64encode(proof).decode()).encode()


def scram_login(sock, user, password, db="admin", mech="SCRAM-SHA-256"):
    sc = ScramClient(user, password, mech)
    r = w.command(sock, SON([("saslStart", 1), ("mechanism", mech), ("payload", sc.first()),
                             ("options", {"skipEmptyExchange": True}), ("$db", db)]))
    assert r["ok"] == 1, r
    r = w.command(sock, SON([("saslContinue", 1), ("conversationId", 1),
                             ("payload", sc.final(r["payload"])), ("$db", db)]))
    assert r["ok"] == 1 and r["done"], r
    return r
