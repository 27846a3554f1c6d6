"""A fake of Amazon Bedrock's Converse API on loopback, for the tests of
the `bedrock` provider kind (tests/all/serve_bedrock.rs).

Each request's SigV4 signature is computed again by botocore's own signer
(`botocore.auth.SigV4Auth`) over the headers the request says it signed,
and a request whose signature differs is refused 403, as AWS refuses it.
A request with a bearer token (a Bedrock API key) must carry the expected
one. ConverseStream answers are AWS event-stream frames, each checked by
botocore's own decoder (`botocore.eventstream.EventStreamBuffer`) before
it is sent, so the framing is AWS's, not the project's.

Usage: bedrock_fake.py SCRIPT LOG, where SCRIPT is a JSON object
{"region", "accessKey", "secretKey", "sessionToken", "bearer", "replies"}
and each reply is {"json": BODY}, {"events": [[TYPE, PAYLOAD], ...]},
{"exception": [TYPE, MESSAGE]} (after the events) or {"status": N,
"json": BODY}. Each request is appended to LOG as a JSON line. Prints
its port, then serves until its standard input closes.
"""

import binascii
import json
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.eventstream import EventStreamBuffer

SCRIPT = json.loads(sys.argv[1])
LOG = sys.argv[2]
LOCK = threading.Lock()
SEEN = []


def header(name, value):
    name, value = name.encode(), value.encode()
    # Type 7: a string.
    return struct.pack("!B", len(name)) + name + b"\x07" + struct.pack("!H", len(value)) + value


def frame(headers, payload):
    """One event-stream message, checked by botocore's decoder."""
    head = b"".join(header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack("!II", total, len(head))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + head + payload
    message += struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)
    buffer = EventStreamBuffer()
    buffer.add_data(message)
    decoded = list(buffer)
    assert len(decoded) == 1 and decoded[0].payload == payload, "botocore reads the frame"
    assert {k: v for k, v in decoded[0].headers.items()} == headers
    return message


def signature_ok(handler, body):
    """Whether the request's SigV4 signature is the one botocore makes."""
    auth = handler.headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False, "no SigV4 authorization"
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    signed = fields["SignedHeaders"].split(";")
    credential = fields["Credential"].split("/")
    if credential[0] != SCRIPT["accessKey"] or credential[2] != SCRIPT["region"] or credential[3] != "bedrock":
        return False, "credential scope " + fields["Credential"]
    headers = {name: handler.headers.get(name) for name in signed}
    request = AWSRequest(
        method=handler.command,
        url="http://" + handler.headers.get("host") + handler.path,
        data=body,
        headers=headers,
    )
    request.context["timestamp"] = handler.headers.get("x-amz-date")
    credentials = Credentials(SCRIPT["accessKey"], SCRIPT["secretKey"], SCRIPT.get("sessionToken"))
    signer = SigV4Auth(credentials, "bedrock", SCRIPT["region"])
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if expected != fields["Signature"]:
        return False, "signature mismatch"
    if SCRIPT.get("sessionToken") and handler.headers.get("x-amz-security-token") != SCRIPT["sessionToken"]:
        return False, "session token"
    return True, "ok"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if SCRIPT.get("bearer"):
            ok = self.headers.get("authorization") == "Bearer " + SCRIPT["bearer"]
            why = "ok" if ok else "bearer"
        else:
            ok, why = signature_ok(self, body)
        with LOCK:
            index = len(SEEN)
            entry = {"path": self.path, "signed": ok, "why": why,
                     "headers": {k.lower(): v for k, v in self.headers.items()},
                     "body": json.loads(body or b"null")}
            SEEN.append(entry)
            with open(LOG, "a") as log:
                log.write(json.dumps(entry) + "\n")
        if not ok:
            message = "The request signature we calculated does not match the signature you provided."
            return self.reply(403, {"message": message}, [("x-amzn-ErrorType", "InvalidSignatureException")])
        replies = SCRIPT["replies"]
        if index >= len(replies):
            return self.reply(500, {"message": "script exhausted"})
        reply = replies[index]
        if "events" not in reply:
            return self.reply(reply.get("status", 200), reply["json"])
        self.send_response(200)
        self.send_header("content-type", "application/vnd.amazon.eventstream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        messages = [frame({":event-type": kind, ":content-type": "application/json",
                           ":message-type": "event"}, json.dumps(payload).encode())
                    for kind, payload in reply["events"]]
        if "exception" in reply:
            kind, message = reply["exception"]
            messages.append(frame({":exception-type": kind, ":content-type": "application/json",
                                   ":message-type": "exception"},
                                  json.dumps({"message": message}).encode()))
        for message in messages:
            # Each message split in two chunks: a reader must join them.
            for piece in (message[:7], message[7:]):
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(server.server_address[1], flush=True)
sys.stdin.read()
server.shutdown()
