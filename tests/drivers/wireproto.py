"""Hand-built MongoDB wire messages for the raw-socket tests.

Builds OP_MSG, OP_QUERY and OP_COMPRESSED frames byte by byte (BSON bodies
come from pymongo's bson), reads replies, and tells a closed connection from
a reply. Nothing here is clever on purpose: the point is to send what a
driver would never send.
"""

import itertools
import socket
import struct
import zlib

import bson

OP_REPLY = 1
OP_UPDATE = 2001
OP_INSERT = 2002
OP_QUERY = 2004
OP_GET_MORE = 2005
OP_DELETE = 2006
OP_KILL_CURSORS = 2007
OP_COMPRESSED = 2012
OP_MSG = 2013

MSG_CHECKSUM_PRESENT = 1 << 0
MSG_MORE_TO_COME = 1 << 1
MSG_EXHAUST_ALLOWED = 1 << 16

COMPRESSOR_NOOP = 0
COMPRESSOR_SNAPPY = 1
COMPRESSOR_ZLIB = 2
COMPRESSOR_ZSTD = 3

_ids = itertools.count(1000)


def next_request_id():
    return next(_ids)


# --- CRC-32C (Castagnoli), reflected, as OP_MSG checksums use -------------

def _crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "CRC-32C check value"


# --- building frames -------------------------------------------------------

def header(length, request_id, response_to, opcode):
    return struct.pack("<iiii", length, request_id, response_to, opcode)


def frame(opcode, body, request_id=None, response_to=0):
    """A whole message: header with the right length, then body."""
    if request_id is None:
        request_id = next_request_id()
    return header(16 + len(body), request_id, response_to, opcode) + body


def section_kind0(doc):
    return b"\x00" + (doc if isinstance(doc, bytes) else bson.encode(doc))


def section_kind1(identifier, docs):
    payload = identifier.encode() + b"\x00" + b"".join(
        d if isinstance(d, bytes) else bson.encode(d) for d in docs)
    return b"\x01" + struct.pack("<i", 4 + len(payload)) + payload


def op_msg(doc, flags=0, extra_sections=(), request_id=None, checksum=None):
    """An OP_MSG frame. checksum: None (only if flagged: computed), or an int to force."""
    body = struct.pack("<I", flags) + section_kind0(doc) + b"".join(extra_sections)
    if flags & MSG_CHECKSUM_PRESENT:
        if request_id is None:
            request_id = next_request_id()
        total = 16 + len(body) + 4
        head = header(total, request_id, 0, OP_MSG)
        crc = crc32c(head + body) if checksum is None else checksum
        return head + body + struct.pack("<I", crc)
    return frame(OP_MSG, body, request_id=request_id)


def op_query(full_collection_name, query, number_to_return=-1, flags=0, request_id=None):
    body = (struct.pack("<i", flags) + full_collection_name.encode() + b"\x00"
            + struct.pack("<ii", 0, number_to_return) + bson.encode(query))
    return frame(OP_QUERY, body, request_id=request_id)


def compress(compressor_id, data):
    if compressor_id == COMPRESSOR_ZLIB:
        return zlib.compress(data)
    if compressor_id == COMPRESSOR_ZSTD:
        import zstandard
        return zstandard.ZstdCompressor().compress(data)
    if compressor_id == COMPRESSOR_SNAPPY:
        import snappy
        return snappy.compress(data)
    if compressor_id == COMPRESSOR_NOOP:
        return data
    raise ValueError(compressor_id)


def decompress(compressor_id, data):
    if compressor_id == COMPRESSOR_ZLIB:
        return zlib.decompress(data)
    if compressor_id == COMPRESSOR_ZSTD:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(data)
    if compressor_id == COMPRESSOR_SNAPPY:
        import snappy
        return snappy.uncompress(data)
    if compressor_id == COMPRESSOR_NOOP:
        return data
    raise ValueError(compressor_id)


def op_compressed(inner_frame, compressor_id, uncompressed_size=None, payload=None):
    """Wraps a whole frame (header included) into OP_COMPRESSED."""
    request_id, response_to, opcode = struct.unpack("<iii", inner_frame[4:16])
    inner_body = inner_frame[16:]
    if uncompressed_size is None:
        uncompressed_size = len(inner_body)
    if payload is None:
        payload = compress(compressor_id, inner_body)
    body = struct.pack("<iiB", opcode, uncompressed_size, compressor_id) + payload
    return frame(OP_COMPRESSED, body, request_id=request_id, response_to=response_to)


# --- reading replies -------------------------------------------------------

class Closed(Exception):
    """The server closed the connection (EOF or reset)."""


class Reply:
    """One reply frame, decoded."""

    def __init__(self, request_id, response_to, opcode, body):
        self.request_id = request_id
        self.response_to = response_to
        self.opcode = opcode          # opcode on the wire (may be OP_COMPRESSED)
        self.body = body
        self.compressor_id = None
        self.inner_opcode = opcode
        self.flags = None
        self.doc = None
        self.docs = []
        self._decode()

    def _decode(self):
        body = self.body
        opcode = self.opcode
        if opcode == OP_COMPRESSED:
            opcode, size, self.compressor_id = struct.unpack("<iiB", body[:9])
            body = decompress(self.compressor_id, body[9:])
            assert len(body) == size, "OP_COMPRESSED uncompressedSize matches the payload"
            self.inner_opcode = opcode
        if opcode == OP_MSG:
            self.flags = struct.unpack("<I", body[:4])[0]
            end = len(body) - (4 if self.flags & MSG_CHECKSUM_PRESENT else 0)
            pos = 4
            while pos < end:
                kind = body[pos]
                pos += 1
                if kind == 0:
                    n = struct.unpack("<i", body[pos:pos + 4])[0]
                    self.doc = bson.decode(body[pos:pos + n])
                    pos += n
                elif kind == 1:
                    n = struct.unpack("<i", body[pos:pos + 4])[0]
                    pos += n
                else:
                    raise AssertionError("reply OP_MSG has unknown section kind %d" % kind)
        elif opcode == OP_REPLY:
            self.flags, cursor_id, starting_from, number_returned = struct.unpack("<iqii", body[:20])
            self.cursor_id = cursor_id
            self.starting_from = starting_from
            self.number_returned = number_returned
            self.docs = bson.decode_all(body[20:])
            self.doc = self.docs[0] if self.docs else None
        else:
            raise AssertionError("reply has unexpected opcode %d" % opcode)


def connect(host, port, timeout=10.0):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(sock, n):
    chunks = []
    while n > 0:
        try:
            chunk = sock.recv(n)
        except (ConnectionResetError, BrokenPipeError):
            raise Closed()
        if not chunk:
            raise Closed()
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_reply(sock):
    """Reads one reply frame; raises Closed on EOF/reset, socket.timeout on silence."""
    head = recv_exact(sock, 16)
    length, request_id, response_to, opcode = struct.unpack("<iiii", head)
    assert 16 <= length <= 48_000_000, "reply length %d is sane" % length
    body = recv_exact(sock, length - 16)
    return Reply(request_id, response_to, opcode, body)


def send(sock, data):
    """Sends everything; a reset while sending counts as the server closing."""
    try:
        sock.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        raise Closed()


def command(sock, doc, **kw):
    """Sends an OP_MSG command and returns the reply document."""
    msg = op_msg(doc, **kw)
    send(sock, msg)
    reply = read_reply(sock)
    assert reply.response_to == struct.unpack("<i", msg[4:8])[0], \
        "reply's responseTo names the request"
    return reply.doc


def outcome(sock, timeout=10.0):
    """What the server did after bad input: ('closed', None) or ('reply', Reply).

    Raises AssertionError if it did neither within `timeout` (a hang)."""
    sock.settimeout(timeout)
    try:
        return "reply", read_reply(sock)
    except Closed:
        return "closed", None
    except socket.timeout:
        raise AssertionError("server neither replied nor closed the connection within %.0fs" % timeout)
