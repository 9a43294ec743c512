"""Malformed and unusual wire input on raw sockets.

Every case runs against one server while two watchers stay connected the
whole time: a pymongo client (whose connection must not be replaced) and a
raw socket. After each case both must still get answers on their original
connections, and the server must still be running. A bad frame may only
close its own connection or get an error reply.
"""

import socket
import struct
import time

import bson
import pytest
from bson.son import SON
from pymongo import MongoClient

import wireproto as w
from atomdb_testlib import require_installed

PING = SON([("ping", 1), ("$db", "admin")])


# (name, wire id, Python module wireproto compresses with, its Debian package)
COMPRESSORS = [
    pytest.param("zlib", w.COMPRESSOR_ZLIB, "zlib", "python3", id="zlib"),
    pytest.param("zstd", w.COMPRESSOR_ZSTD, "zstandard", "python3-zstandard", id="zstd"),
    pytest.param("snappy", w.COMPRESSOR_SNAPPY, "snappy", "python3-snappy", id="snappy"),
]


def require_module(module, package):
    try:
        __import__(module)
    except ImportError:
        require_installed(False, "Python module %r (Debian %s)" % (module, package))


class Watchers:
    """Two clients connected for the whole module."""

    def __init__(self, server):
        self.server = server
        self.client = MongoClient(server.uri("directConnection=true"), maxPoolSize=1,
                                  serverSelectionTimeoutMS=10000, socketTimeoutMS=10000)
        self.client_uri = self.client.admin.command("whatsmyuri")["you"]
        self.raw = w.connect(server.host, server.port)
        self.raw_uri = w.command(self.raw, SON([("whatsmyuri", 1), ("$db", "admin")]))["you"]

    def check(self, case):
        assert self.server.alive(), "server still running after %s" % case
        doc = w.command(self.raw, PING)
        assert doc.get("ok") == 1, "raw watcher's ping answered ok:1 after %s (got %r)" % (case, doc)
        uri = w.command(self.raw, SON([("whatsmyuri", 1), ("$db", "admin")]))["you"]
        assert uri == self.raw_uri, "raw watcher still on its original connection after %s" % case
        res = self.client.admin.command("ping")
        assert res.get("ok") == 1, "pymongo watcher's ping answered ok:1 after %s" % case
        you = self.client.admin.command("whatsmyuri")["you"]
        assert you == self.client_uri, \
            "pymongo watcher kept its original connection after %s (was %s, now %s)" % (
                case, self.client_uri, you)

    def close(self):
        self.client.close()
        self.raw.close()


@pytest.fixture(scope="module")
def watchers(atomdb_module):
    ws = Watchers(atomdb_module)
    yield ws
    ws.close()


@pytest.fixture
def conn(atomdb_module, watchers, request):
    """A fresh raw connection for one case; the watchers are checked after it."""
    s = w.connect(atomdb_module.host, atomdb_module.port)
    yield s
    s.close()
    watchers.check(request.node.name)


def expect_closed(sock, what):
    kind, reply = w.outcome(sock)
    assert kind == "closed", "%s closes the connection (got a reply: %r)" % (
        what, reply and reply.doc)


def expect_closed_or_error(sock, what, code=None):
    """The server closed the connection, or answered ok:0 (with `code` if given)."""
    kind, reply = w.outcome(sock)
    if kind == "closed":
        return None
    doc = reply.doc or {}
    assert doc.get("ok") == 0 or "$err" in doc, \
        "%s is answered with an error, not success (got %r)" % (what, doc)
    if code is not None:
        assert doc.get("code") == code, "%s is answered with code %d (got %r)" % (what, code, doc)
    return doc


# --- frames the server cannot parse: close that connection -----------------

def test_garbage_bytes_close_only_that_connection(conn):
    w.send(conn, b"\xde\xad\xbe\xef" * 16)
    expect_closed(conn, "64 bytes of garbage (negative length field)")


def test_http_request_closes_only_that_connection(conn):
    w.send(conn, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    expect_closed(conn, "an HTTP request (length field reads as ~540 MB)")


def test_length_2_pow_31_minus_1_closes_without_waiting_for_the_body(conn):
    w.send(conn, w.header(2**31 - 1, 1, 0, w.OP_MSG) + b"\x00" * 32)
    expect_closed(conn, "a frame claiming 2^31-1 bytes")


def test_negative_length_closes(conn):
    w.send(conn, w.header(-16, 1, 0, w.OP_MSG) + b"\x00" * 32)
    expect_closed(conn, "a frame with a negative length")


@pytest.mark.parametrize("length", [0, 4, 15, 16, 20])
def test_length_below_the_smallest_message_closes(conn, length):
    # 16 is a bare header and 20 an OP_MSG with flags but no section: neither is a message.
    msg = w.header(length, 1, 0, w.OP_MSG) + b"\x00" * max(0, length - 16)
    w.send(conn, msg)
    expect_closed_or_error(conn, "a frame of %d bytes" % length)


def test_50_mb_frame_header_closes_without_reading_the_body(conn):
    size = 50 * 1024 * 1024
    w.send(conn, w.header(size, 1, 0, w.OP_MSG) + struct.pack("<I", 0) + b"\x00" + b"\x00" * 1000)
    expect_closed(conn, "a frame header announcing 50 MB (above maxMessageSizeBytes)")


def test_frame_one_byte_above_max_message_size_closes(conn):
    w.send(conn, w.header(48_000_001, 1, 0, w.OP_MSG) + b"\x00" * 64)
    expect_closed(conn, "a frame of maxMessageSizeBytes + 1")


def test_truncated_frame_then_client_close_is_cleaned_up(conn, atomdb_module):
    msg = w.op_msg(PING)
    w.send(conn, msg[:len(msg) // 2])
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()
    # The watchers' checks (fixture teardown) prove the server carried on.
    time.sleep(0.2)
    assert atomdb_module.alive(), "server still running after a peer closed mid-frame"


def test_truncated_header_then_client_close_is_cleaned_up(conn, atomdb_module):
    conn.sendall(b"\x30\x00\x00")
    conn.close()
    time.sleep(0.2)
    assert atomdb_module.alive(), "server still running after a peer closed mid-header"


# --- BSON that lies about its length or is invalid -------------------------

def test_bson_inner_length_beyond_frame_is_invalid_bson_or_close(conn):
    doc = bson.encode(PING)
    bad = struct.pack("<i", len(doc) + 100) + doc[4:]
    w.send(conn, w.frame(w.OP_MSG, struct.pack("<I", 0) + b"\x00" + bad))
    expect_closed_or_error(conn, "a kind-0 document longer than its frame", code=22)


def test_bson_inner_length_short_of_its_bytes_is_invalid_bson_or_close(conn):
    doc = bson.encode(PING)
    bad = struct.pack("<i", len(doc) - 3) + doc[4:]
    w.send(conn, w.frame(w.OP_MSG, struct.pack("<I", 0) + b"\x00" + bad))
    expect_closed_or_error(conn, "a kind-0 document shorter than its bytes", code=22)


def test_bson_inner_length_below_minimum_is_invalid_bson_or_close(conn):
    w.send(conn, w.frame(w.OP_MSG, struct.pack("<I", 0) + b"\x00" + struct.pack("<i", 2) + b"\x00"))
    expect_closed_or_error(conn, "a kind-0 document of length 2", code=22)


def test_bson_with_unknown_element_type_gets_invalid_bson_reply(conn):
    doc = bytearray(bson.encode(SON([("ping", 1), ("$db", "admin"), ("x", 1)])))
    # The last element is int32 'x' (type byte, 'x', NUL, 4 bytes), then the terminator.
    assert doc[-8] == 0x10, "test setup: found the int32 type byte of 'x'"
    doc[-8] = 0x7A
    w.send(conn, w.frame(w.OP_MSG, struct.pack("<I", 0) + b"\x00" + bytes(doc)))
    kind, reply = w.outcome(conn)
    assert kind == "reply", "a frame whose body fails bson_validate gets a reply, not a close"
    assert reply.doc.get("ok") == 0, "invalid BSON body answered ok:0 (got %r)" % reply.doc
    assert reply.doc.get("code") == 22, "invalid BSON body answered code 22 (got %r)" % reply.doc
    assert reply.doc.get("codeName") == "InvalidBSON", "codeName InvalidBSON (got %r)" % reply.doc
    doc = w.command(conn, PING)
    assert doc.get("ok") == 1, "the same connection still answers after an InvalidBSON reply"


def test_bson_with_missing_terminator_is_invalid_bson_or_close(conn):
    doc = bytearray(bson.encode(PING))
    doc[-1] = 0x01
    w.send(conn, w.frame(w.OP_MSG, struct.pack("<I", 0) + b"\x00" + bytes(doc)))
    expect_closed_or_error(conn, "a document whose last byte is not 0", code=22)


# --- opcodes -----------------------------------------------------------------

def test_unknown_opcode_closes_or_errors(conn):
    w.send(conn, w.frame(9999, b"\x00" * 32))
    expect_closed_or_error(conn, "an unknown opcode 9999")


@pytest.mark.parametrize("opcode", [w.OP_INSERT, w.OP_UPDATE, w.OP_DELETE, w.OP_GET_MORE,
                                    w.OP_KILL_CURSORS])
def test_removed_legacy_opcode_closes_or_errors(conn, opcode):
    body = struct.pack("<i", 0) + b"test.c\x00" + bson.encode({"a": 1})
    w.send(conn, w.frame(opcode, body))
    expect_closed_or_error(conn, "removed opcode %d" % opcode)


def test_op_reply_sent_by_a_client_closes_or_errors(conn):
    body = struct.pack("<iqii", 0, 0, 0, 1) + bson.encode({"ok": 1})
    w.send(conn, w.frame(w.OP_REPLY, body))
    expect_closed_or_error(conn, "an OP_REPLY sent to the server")


# --- OP_MSG details ------------------------------------------------------------

def test_op_msg_with_correct_crc32c_is_answered(conn):
    msg = w.op_msg(PING, flags=w.MSG_CHECKSUM_PRESENT)
    w.send(conn, msg)
    reply = w.read_reply(conn)
    assert reply.doc.get("ok") == 1, "ping with a correct CRC-32C answered ok:1 (got %r)" % reply.doc


def test_op_msg_with_bad_crc32c_is_rejected(conn):
    good = w.op_msg(PING, flags=w.MSG_CHECKSUM_PRESENT)
    bad_crc = struct.unpack("<I", good[-4:])[0] ^ 0xFFFF
    msg = good[:-4] + struct.pack("<I", bad_crc)
    w.send(conn, msg)
    expect_closed_or_error(conn, "an OP_MSG with a wrong CRC-32C")


def test_op_msg_with_unknown_required_flag_is_rejected(conn):
    w.send(conn, w.op_msg(PING, flags=1 << 5))
    expect_closed_or_error(conn, "an OP_MSG with unknown required flag bit 5")


def test_op_msg_with_unknown_optional_flag_is_answered(conn):
    doc = w.command(conn, PING, flags=1 << 20)
    assert doc.get("ok") == 1, "optional flag bits (16+) are ignored (got %r)" % doc


def test_op_msg_with_unknown_section_kind_is_rejected(conn):
    body = struct.pack("<I", 0) + w.section_kind0(PING) + b"\x07" + b"\x00" * 8
    w.send(conn, w.frame(w.OP_MSG, body))
    expect_closed_or_error(conn, "an OP_MSG with section kind 7")


def test_op_msg_with_two_body_sections_is_rejected(conn):
    body = struct.pack("<I", 0) + w.section_kind0(PING) + w.section_kind0(PING)
    w.send(conn, w.frame(w.OP_MSG, body))
    expect_closed_or_error(conn, "an OP_MSG with two kind-0 sections")


def test_op_msg_without_body_section_is_rejected(conn):
    body = struct.pack("<I", 0) + w.section_kind1("documents", [{"a": 1}])
    w.send(conn, w.frame(w.OP_MSG, body))
    expect_closed_or_error(conn, "an OP_MSG with only a kind-1 section")


def test_op_msg_kind1_sequence_is_parsed_and_command_answered(conn):
    seq = w.section_kind1("documents", [{"_id": 1}, {"_id": 2}])
    doc = w.command(conn, PING, extra_sections=[seq])
    assert doc.get("ok") == 1, "ping with an extra kind-1 section answered ok:1 (got %r)" % doc


def test_op_msg_kind1_documents_reach_insert(conn):
    seq = w.section_kind1("documents", [{"_id": 1, "v": "a"}, {"_id": 2, "v": "b"}])
    doc = w.command(conn, SON([("insert", "kind1"), ("$db", "rawtest")]), extra_sections=[seq])
    assert doc.get("ok") == 1 and doc.get("n") == 2, \
        "insert with documents in a kind-1 section inserts both (got %r)" % doc
    found = w.command(conn, SON([("find", "kind1"), ("$db", "rawtest")]))
    assert sorted(d["_id"] for d in found["cursor"]["firstBatch"]) == [1, 2], \
        "both kind-1 documents are found afterwards"


def test_op_msg_kind1_size_beyond_frame_is_rejected(conn):
    payload = b"documents\x00" + bson.encode({"a": 1})
    seq = b"\x01" + struct.pack("<i", 4 + len(payload) + 50) + payload
    body = struct.pack("<I", 0) + w.section_kind0(PING) + seq
    w.send(conn, w.frame(w.OP_MSG, body))
    expect_closed_or_error(conn, "a kind-1 section whose size overruns the frame")


def test_op_msg_without_db_gets_an_error_reply(conn):
    doc = w.command(conn, {"ping": 1})
    assert doc.get("ok") == 0, "a command without $db is answered ok:0 (got %r)" % doc
    assert isinstance(doc.get("code"), int), "the error has a numeric code (got %r)" % doc
    doc = w.command(conn, PING)
    assert doc.get("ok") == 1, "the connection still answers after the $db error"


@pytest.mark.parametrize("mode", ["primary", "primaryPreferred"])
def test_generic_arguments_are_accepted(conn, mode):
    doc = w.command(conn, SON([("ping", 1), ("$db", "admin"), ("$readPreference", {"mode": mode}),
                               ("comment", "from the raw-socket test"), ("maxTimeMS", 1000)]))
    assert doc.get("ok") == 1, \
        "ping with $readPreference %s, comment and maxTimeMS answers ok:1 (got %r)" % (mode, doc)


def test_more_to_come_request_gets_no_reply(conn):
    silent = w.op_msg(PING, flags=w.MSG_MORE_TO_COME)
    loud = w.op_msg(PING)
    w.send(conn, silent + loud)
    reply = w.read_reply(conn)
    assert reply.response_to == struct.unpack("<i", loud[4:8])[0], \
        "the first reply answers the request without moreToCome"
    conn.settimeout(0.5)
    try:
        extra = w.read_reply(conn)
    except socket.timeout:
        extra = None
    assert extra is None, "no reply arrives for the moreToCome request (got %r)" % extra.doc


def test_pipelined_requests_are_answered_in_order(conn):
    msgs = [w.op_msg(PING) for _ in range(5)]
    w.send(conn, b"".join(msgs))
    for msg in msgs:
        reply = w.read_reply(conn)
        assert reply.response_to == struct.unpack("<i", msg[4:8])[0], \
            "pipelined replies come back in request order"
        assert reply.doc.get("ok") == 1, "each pipelined ping answered ok:1"


def test_frame_sent_one_byte_at_a_time_is_answered(conn):
    msg = w.op_msg(PING)
    for i in range(len(msg)):
        conn.sendall(msg[i:i + 1])
        time.sleep(0.002)
    reply = w.read_reply(conn)
    assert reply.doc.get("ok") == 1, "a frame trickled byte by byte is answered ok:1"


def test_slow_reader_does_not_stall_other_clients(conn, watchers):
    # Up to 20,000 pipelined pings whose replies this client never reads; the
    # server may stop reading from it (back-pressure), so send without blocking.
    batch = memoryview(b"".join(w.op_msg(PING) for _ in range(20000)))
    conn.setblocking(False)
    sent = 0
    deadline = time.monotonic() + 5
    while sent < len(batch) and time.monotonic() < deadline:
        try:
            sent += conn.send(batch[sent:])
        except BlockingIOError:
            time.sleep(0.05)
    assert sent > 0, "test setup: some pipelined pings were sent"
    watchers.check("a client that sent %d bytes of pings and reads no reply" % sent)


# --- legacy OP_QUERY handshake ---------------------------------------------------

@pytest.mark.parametrize("cmd_name", ["isMaster", "ismaster", "hello"])
def test_op_query_handshake_on_admin_cmd_answered_with_op_reply(conn, cmd_name):
    query = SON([(cmd_name, 1), ("helloOk", True),
                 ("client", {"driver": {"name": "raw-test", "version": "0"},
                             "os": {"type": "Linux"}}),
                 ("compression", ["zlib"])])
    msg = w.op_query("admin.$cmd", query, number_to_return=-1)
    w.send(conn, msg)
    reply = w.read_reply(conn)
    assert reply.opcode == w.OP_REPLY, "an OP_QUERY handshake is answered with OP_REPLY (got %d)" % reply.opcode
    assert reply.response_to == struct.unpack("<i", msg[4:8])[0], "OP_REPLY responseTo names the query"
    assert reply.number_returned == 1, "OP_REPLY carries exactly one document"
    assert reply.cursor_id == 0, "OP_REPLY cursorID is 0 for a command"
    doc = reply.doc
    assert doc.get("ok") == 1, "handshake answered ok:1 (got %r)" % doc
    primary_key = "isWritablePrimary" if cmd_name == "hello" else "ismaster"
    assert doc.get(primary_key) is True, "%s says %s: true" % (cmd_name, primary_key)
    assert doc.get("maxWireVersion") == 21, "handshake advertises maxWireVersion 21"
    assert doc.get("setName") == "rs0", "handshake names replica set rs0"
    assert doc.get("helloOk") is True, "helloOk: true echoed when asked"
    assert doc.get("compression") == ["zlib"], "zlib negotiated in the OP_QUERY handshake"
    # The connection then speaks OP_MSG, as drivers do after the handshake.
    assert w.command(conn, PING).get("ok") == 1, "OP_MSG works after an OP_QUERY handshake"


def test_op_query_on_other_db_cmd_is_answered(conn):
    msg = w.op_query("test.$cmd", SON([("isMaster", 1)]), number_to_return=-1)
    w.send(conn, msg)
    reply = w.read_reply(conn)
    assert reply.opcode == w.OP_REPLY and reply.doc.get("ismaster") is True, \
        "isMaster through OP_QUERY on test.$cmd answered with OP_REPLY ismaster:true"


def test_op_query_on_a_collection_is_rejected(conn):
    w.send(conn, w.op_query("test.coll", {"a": 1}, number_to_return=1))
    expect_closed_or_error(conn, "a legacy OP_QUERY find on test.coll")


# --- OP_COMPRESSED ---------------------------------------------------------------

def _negotiate(conn, names):
    hello = SON([("hello", 1), ("compression", names), ("$db", "admin")])
    return w.command(conn, hello)


def test_hello_negotiates_only_supported_compressors_in_client_order(conn):
    doc = _negotiate(conn, ["bogus", "snappy", "zlib", "zstd"])
    assert doc.get("compression") == ["snappy", "zlib", "zstd"], \
        "hello answers the supported compressors in the client's order (got %r)" % doc.get("compression")


@pytest.mark.parametrize("name,cid,module,package", COMPRESSORS)
def test_op_compressed_request_is_answered_compressed(conn, name, cid, module, package):
    require_module(module, package)
    doc = _negotiate(conn, [name])
    assert doc.get("compression") == [name], "%s negotiated in hello (got %r)" % (name, doc)
    inner = w.op_msg(PING)
    msg = w.op_compressed(inner, cid)
    w.send(conn, msg)
    reply = w.read_reply(conn)
    assert reply.opcode == w.OP_COMPRESSED, "%s request answered with OP_COMPRESSED (got %d)" % (name, reply.opcode)
    assert reply.compressor_id == cid, "reply compressed with %s (id %d, got %r)" % (name, cid, reply.compressor_id)
    assert reply.inner_opcode == w.OP_MSG, "compressed reply wraps an OP_MSG"
    assert reply.response_to == struct.unpack("<i", msg[4:8])[0], "compressed reply's responseTo names the request"
    assert reply.doc.get("ok") == 1, "compressed ping answered ok:1 (got %r)" % reply.doc


def test_op_compressed_noop_is_answered(conn):
    _negotiate(conn, ["zlib"])
    reply_doc = None
    msg = w.op_compressed(w.op_msg(PING), w.COMPRESSOR_NOOP)
    w.send(conn, msg)
    reply = w.read_reply(conn)
    reply_doc = reply.doc
    assert reply_doc.get("ok") == 1, "a noop-compressed ping is answered ok:1 (got %r)" % reply_doc


def test_op_compressed_with_wrong_uncompressed_size_is_rejected(conn):
    _negotiate(conn, ["zlib"])
    inner = w.op_msg(PING)
    w.send(conn, w.op_compressed(inner, w.COMPRESSOR_ZLIB, uncompressed_size=len(inner) - 16 + 7))
    expect_closed_or_error(conn, "OP_COMPRESSED whose uncompressedSize is wrong")


def test_op_compressed_with_huge_uncompressed_size_is_rejected(conn):
    _negotiate(conn, ["zlib"])
    inner = w.op_msg(PING)
    w.send(conn, w.op_compressed(inner, w.COMPRESSOR_ZLIB, uncompressed_size=2**31 - 1))
    expect_closed_or_error(conn, "OP_COMPRESSED claiming 2^31-1 uncompressed bytes")


def test_op_compressed_with_corrupt_zlib_payload_is_rejected(conn):
    _negotiate(conn, ["zlib"])
    inner = w.op_msg(PING)
    w.send(conn, w.op_compressed(inner, w.COMPRESSOR_ZLIB, payload=b"\x78\x9c" + b"\xff" * 40))
    expect_closed_or_error(conn, "OP_COMPRESSED with a corrupt zlib stream")


def test_op_compressed_with_unknown_compressor_is_rejected(conn):
    inner = w.op_msg(PING)
    w.send(conn, w.op_compressed(inner, 9, payload=inner[16:]))
    expect_closed_or_error(conn, "OP_COMPRESSED with compressor id 9")


def test_op_compressed_zlib_bomb_is_rejected(conn):
    # 60 MB of zeros compresses to ~60 KB: above maxMessageSizeBytes once inflated.
    import zlib
    _negotiate(conn, ["zlib"])
    inner_body = struct.pack("<I", 0) + b"\x00" + bson.encode(PING)
    payload = zlib.compress(inner_body + b"\x00" * (60 * 1000 * 1000), 9)
    body = struct.pack("<iiB", w.OP_MSG, len(inner_body) + 60 * 1000 * 1000, w.COMPRESSOR_ZLIB) + payload
    w.send(conn, w.frame(w.OP_COMPRESSED, body))
    expect_closed_or_error(conn, "OP_COMPRESSED inflating to 60 MB")


def test_op_compressed_wrapping_op_compressed_is_rejected(conn):
    _negotiate(conn, ["zlib"])
    inner = w.op_compressed(w.op_msg(PING), w.COMPRESSOR_ZLIB)
    w.send(conn, w.op_compressed(inner, w.COMPRESSOR_ZLIB))
    expect_closed_or_error(conn, "OP_COMPRESSED nested in OP_COMPRESSED")


def test_server_is_alive_after_every_case(atomdb_module, watchers):
    watchers.check("the whole raw-socket suite")
    assert atomdb_module.alive(), "server process still running at the end of the suite"


# --- malformed SASL (SCRAM) conversations: an error reply, never a crash ---

SASL_USER, SASL_PWD = "saslraw", "raw-pw"


@pytest.fixture(scope="module")
def sasl_user(atomdb_module):
    c = MongoClient(atomdb_module.uri("directConnection=true"), serverSelectionTimeoutMS=10000)
    c.admin.command("createUser", SASL_USER, pwd=SASL_PWD, roles=["read"])
    c.close()
    return SASL_USER


def sasl_start(sock, payload, mech="SCRAM-SHA-256", **extra):
    doc = SON([("saslStart", 1), ("mechanism", mech), ("payload", payload)])
    doc.update(extra)
    doc["$db"] = "admin"
    return w.command(sock, doc)


def sasl_continue(sock, payload, conversation_id=1):
    return w.command(sock, SON([("saslContinue", 1), ("conversationId", conversation_id),
                                ("payload", payload), ("$db", "admin")]))


@pytest.mark.parametrize("payload", [
    b"", b"\x00", b"n", b"n,,", b"n,,n=", b"n,,n=saslraw", b"n,,n=saslraw,r=",
    b"p=tls-unique,,n=saslraw,r=abc", b"n,,n=saslraw,r=a\x00b", b"\xff\xfe\xfd" * 100,
    b"n,,n=" + b"=" * 5000 + b",r=x", b"n,,n=u,r=" + b"x" * 20000, "!!!not base64!!!",
    "bixuPXUscj1hYmM=" + "=", 12345,
], ids=lambda p: repr(p)[:30])
def test_malformed_client_first_gets_an_error(conn, sasl_user, payload):
    doc = sasl_start(conn, payload)
    assert doc.get("ok") == 0, "client-first %r is refused (got %r)" % (payload, doc)
    assert w.command(conn, PING).get("ok") == 1, "the connection still answers"


@pytest.mark.parametrize("doc", [
    SON([("saslStart", 1), ("payload", b"n,,n=u,r=abc"), ("$db", "admin")]),
    SON([("saslStart", 1), ("mechanism", 7), ("payload", b"n,,n=u,r=abc"), ("$db", "admin")]),
    SON([("saslStart", 1), ("mechanism", "PLAIN"), ("payload", b"\x00u\x00p"), ("$db", "admin")]),
    SON([("saslStart", 1), ("mechanism", "SCRAM-SHA-256"), ("$db", "admin")]),
    SON([("saslContinue", 1), ("payload", b"c=biws"), ("$db", "admin")]),
    SON([("saslContinue", 1), ("conversationId", 1), ("payload", b"c=biws"), ("$db", "admin")]),
    SON([("hello", 1), ("speculativeAuthenticate", 5), ("$db", "admin")]),
    SON([("hello", 1), ("speculativeAuthenticate", {"saslStart": 1}), ("$db", "admin")]),
    SON([("hello", 1), ("speculativeAuthenticate", {"saslStart": 1, "mechanism": "SCRAM-SHA-1",
                                                    "payload": b"garbage", "db": "admin"}),
         ("$db", "admin")]),
    SON([("hello", 1), ("saslSupportedMechs", 5), ("$db", "admin")]),
    SON([("hello", 1), ("saslSupportedMechs", "nodot"), ("$db", "admin")]),
    SON([("hello", 1), ("saslSupportedMechs", "x" * 100 + ".u"), ("$db", "admin")]),
], ids=lambda d: repr(dict(d))[:40])
def test_malformed_sasl_commands_never_crash(conn, sasl_user, doc):
    reply = w.command(conn, doc)
    if "hello" in doc:
        assert reply.get("ok") == 1, "hello still answers: %r" % reply
        assert "speculativeAuthenticate" not in reply, "no speculative reply for garbage"
    else:
        assert reply.get("ok") == 0, "%r is refused (got %r)" % (doc, reply)
    assert w.command(conn, PING).get("ok") == 1, "the connection still answers"


def _start_conversation(sock, mech="SCRAM-SHA-256"):
    from scramclient import ScramClient
    sc = ScramClient(SASL_USER, SASL_PWD, mech)
    r = sasl_start(sock, sc.first(), mech=mech)
    assert r.get("ok") == 1 and r["done"] is False, r
    return sc, r["payload"]


@pytest.mark.parametrize("mangle", ["truncated", "wrong nonce", "no proof", "garbage base64",
                                    "short proof", "wrong channel binding", "trailing junk",
                                    "empty"])
def test_malformed_client_final_gets_an_error_and_ends_the_conversation(conn, sasl_user, mangle):
    sc, server_first = _start_conversation(conn)
    good = sc.final(server_first)
    bad = {
        "truncated": good[:len(good) // 2],
        "wrong nonce": good.replace(b"r=" + sc.nonce.encode(), b"r=X" + sc.nonce.encode()),
        "no proof": good.split(b",p=")[0],
        "garbage base64": good.split(b",p=")[0] + b",p=%%%%",
        "short proof": good.split(b",p=")[0] + b",p=AAAA",
        "wrong channel binding": good.replace(b"c=biws", b"c=eSws"),
        "trailing junk": good + b",x=1",
        "empty": b"",
    }[mangle]
    r = sasl_continue(conn, bad)
    assert r.get("ok") == 0, "%s client-final is refused (got %r)" % (mangle, r)
    r = sasl_continue(conn, good)
    assert r.get("ok") == 0, "the failed conversation cannot be finished afterwards: %r" % r
    st = w.command(conn, SON([("connectionStatus", 1), ("$db", "admin")]))
    assert st["authInfo"]["authenticatedUsers"] == [], "nobody is logged in"


def test_replayed_client_final_is_refused(conn, sasl_user):
    sc, server_first = _start_conversation(conn)
    final = sc.final(server_first)
    r = sasl_continue(conn, final)
    assert r.get("ok") == 1 and r["done"] is False, "no skipEmptyExchange: one more step: %r" % r
    r = sasl_continue(conn, b"")
    assert r.get("ok") == 1 and r["done"] is True, r
    assert sasl_continue(conn, final).get("ok") == 0, "the same client-final again is refused"
    # and in a new conversation (a new server nonce) the old proof fails too
    sock = w.connect(*conn.getpeername())
    try:
        sasl_start(sock, sc.first())
        r = sasl_continue(sock, final)
        assert r.get("ok") == 0 and r.get("code") in (2, 18), r
    finally:
        sock.close()


def test_wrong_conversation_id_is_refused(conn, sasl_user):
    sc, server_first = _start_conversation(conn)
    r = sasl_continue(conn, sc.final(server_first), conversation_id=2)
    assert r.get("ok") == 0, r
