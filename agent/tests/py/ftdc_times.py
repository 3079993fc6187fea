"""Ground truth for the FTDC join test, read without mdiag: the time of
every sample in an FTDC directory's metric chunks (the `start` date, the
first metric of each sample), and the server version from the metadata.

FTDC: a file is BSON documents {_id, type, ...}; type 0 holds metadata
(`doc.buildInfo.version`); type 1 holds `data`: a 4-byte length, then zlib of
a reference BSON document, uint32 metric count, uint32 sample count, and the
deltas metric by metric, as varints where a 0 is followed by a varint count
of further zeros. `start` is the reference document's first field (a date, in
ms), so its deltas are the first `samples` of the stream.

Prints one JSON line: {"version": str, "starts_ms": [unix ms, ...]}.
"""
import json
import os
import struct
import sys
import zlib

import bson


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def chunk_starts(data):
    body = zlib.decompress(data[4:])
    ref_len = struct.unpack_from("<i", body, 0)[0]
    ref = bson.decode(body[:ref_len])
    start = next(iter(ref.values()))
    assert next(iter(ref)) == "start", list(ref)[:3]
    _metrics, samples = struct.unpack_from("<II", body, ref_len)
    t = int(start.timestamp() * 1000)
    out = [t]
    pos, zeros = ref_len + 8, 0
    for _ in range(samples):
        if zeros:
            delta, zeros = 0, zeros - 1
        else:
            delta, pos = varint(body, pos)
            if delta == 0:
                zeros, pos = varint(body, pos)
        t += delta
        out.append(t)
    return out


def main(directory):
    version, starts = None, []
    for name in sorted(os.listdir(directory)):
        if not name.startswith("metrics."):
            continue
        with open(os.path.join(directory, name), "rb") as f:
            for doc in bson.decode_all(f.read()):
                if doc["type"] == 0 and version is None:
                    version = doc["doc"]["buildInfo"]["version"]
                elif doc["type"] == 1:
                    starts.extend(chunk_starts(doc["data"]))
    print(json.dumps({"version": version, "starts_ms": sorted(set(starts))}))


if __name__ == "__main__":
    main(sys.argv[1])
