"""Feeds envelopes to the reference decoder (run by tests/codec/reject.rs).

Reads from stdin a sequence of envelopes, each preceded by a 4-byte big-endian
byte count and a 4-byte big-endian message limit, and prints one line per
envelope: "reject" when Codec(limit).decode raises CodecError, "accept" when it
returns, or "error <ExceptionType>" when it raises anything else.
"""

from __future__ import annotations

import sys

from unienv_interface.remote.codec import Codec, CodecError


def main() -> int:
    data = sys.stdin.buffer.read()
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        limit = int.from_bytes(data[pos + 4:pos + 8], "big")
        frame = data[pos + 8:pos + 8 + size]
        pos += 8 + size
        try:
            Codec(limit).decode(frame)
            print("accept")
        except CodecError:
            print("reject")
        except Exception as exc:  # the reference should only raise CodecError
            print(f"error {type(exc).__name__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
