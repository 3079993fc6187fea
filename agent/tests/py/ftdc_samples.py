"""Ground truth for `mdiag export`, read without mdiag: every metric of every
sample in FTDC files, decoded with pymongo's `bson` and this file alone.

FTDC (mongod's src/mongo/db/ftdc): a file is BSON documents {_id, type, ...};
type 1 holds `data`: a 4-byte length, then zlib of a reference BSON document,
uint32 metric count, uint32 sample count, and the deltas metric by metric
(`samples` deltas per metric), as varints where a 0 is followed by a varint
count of further zeros (the zero run carries over from one metric to the
next). The metrics of the reference document are, in document order,
recursing into sub-documents and arrays (elements named by index): doubles
(C++ `(long long)d`: truncated, NaN and out of range give -2^63), int32,
int64, decimal128 (rounded half to even), booleans (0/1), dates (ms since
the epoch) and timestamps (two metrics, `path.t` then `path.i`). Sample k is
the reference value plus the sum of the first k deltas, modulo 2^64.

This decoder shares the file format with ftdc_times.py (which reads only the
sample times); it is independent of mdiag's Rust decoder (agent/src/ftdc).

Usage: ftdc_samples.py FILE...  Prints one JSON line per sample, files in the
order given, chunks in file order:
{"file": name, "chunk": i, "t": ms, "t_text": RFC 3339, "metrics": [[path, int], ...]}
(pairs, in metric order: a path can occur twice, see Pairs)
and reads nothing else (metadata documents are counted on stderr).
"""
import datetime
import decimal
import json
import os
import struct
import sys
import zlib

import bson
from collections.abc import MutableMapping
from bson.decimal128 import Decimal128
from bson.timestamp import Timestamp

# The delta stream's unsigned LEB128, as the sample-times decoder beside
# this file reads it (the script's directory is on sys.path).
from ftdc_times import varint

MIN64 = -(1 << 63)


class Pairs(MutableMapping):
    """A BSON document as its fields in order, duplicates kept: mongod's
    systemMetrics can name one mount twice (`mounts./dev/shm` in a
    container), and each copy is a metric of its own."""

    def __init__(self):
        self.pairs = []

    def __setitem__(self, key, value):
        self.pairs.append((key, value))

    def __getitem__(self, key):
        return next(v for k, v in self.pairs if k == key)

    def __delitem__(self, key):
        self.pairs = [(k, v) for k, v in self.pairs if k != key]

    def __iter__(self):
        return (k for k, _ in self.pairs)

    def __len__(self):
        return len(self.pairs)

    def items(self):
        return list(self.pairs)


OPTIONS = bson.CodecOptions(document_class=Pairs, tz_aware=True)


def as_long(value):
    """A double or decimal as mongod stores it in the delta stream."""
    if isinstance(value, Decimal128):
        d = value.to_decimal()
        if not d.is_finite():
            return MIN64
        i = int(d.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_EVEN))
    else:
        if value != value or value >= 2.0**63 or value < -(2.0**63):
            return MIN64
        i = int(value)
    return i if MIN64 <= i < (1 << 63) else MIN64


def flatten(doc, prefix, out):
    for key, value in doc.items():
        flatten_one(prefix + key, value, out)


def flatten_one(path, value, out):
    if isinstance(value, bool):
        out.append((path, int(value)))
    elif isinstance(value, int):
        out.append((path, int(value)))
    elif isinstance(value, (float, Decimal128)):
        out.append((path, as_long(value)))
    elif isinstance(value, datetime.datetime):
        delta = value - datetime.datetime(1970, 1, 1, tzinfo=value.tzinfo)
        out.append((path, delta // datetime.timedelta(milliseconds=1)))
    elif isinstance(value, Timestamp):
        out.append((path + ".t", value.time))
        out.append((path + ".i", value.inc))
    elif isinstance(value, Pairs):
        flatten(value, path + ".", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            flatten_one(f"{path}.{i}", v, out)


def signed(u):
    u &= (1 << 64) - 1
    return u - (1 << 64) if u >= (1 << 63) else u


def chunk_samples(data):
    body = zlib.decompress(data[4:])
    (ref_len,) = struct.unpack_from("<i", body, 0)
    ref = bson.decode(body[:ref_len], codec_options=OPTIONS)
    metrics = []
    flatten(ref, "", metrics)
    count, samples = struct.unpack_from("<II", body, ref_len)
    if count != len(metrics):
        raise SystemExit(f"chunk header says {count} metrics, reference has {len(metrics)}")
    columns = []
    pos, zeros = ref_len + 8, 0
    for _path, first in metrics:
        column, value = [first], first
        for _ in range(samples):
            if zeros:
                delta, zeros = 0, zeros - 1
            else:
                delta, pos = varint(body, pos)
                if delta == 0:
                    zeros, pos = varint(body, pos)
            value = signed(value + delta)
            column.append(value)
        columns.append(column)
    if pos != len(body):
        raise SystemExit(f"{len(body) - pos} bytes left after the deltas")
    paths = [p for p, _ in metrics]
    for s in range(samples + 1):
        yield [[p, c[s]] for p, c in zip(paths, columns)]


def rfc3339(ms):
    t = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def main(files):
    metadata = 0
    out = sys.stdout
    for path in files:
        with open(path, "rb") as f:
            docs = bson.decode_all(f.read())
        for i, doc in enumerate(d for d in docs if d["type"] == 1):
            for sample in chunk_samples(doc["data"]):
                if sample[0][0] != "start":
                    raise SystemExit(f"first metric is {sample[0][0]!r}, not start")
                ms = sample[0][1]
                line = {"file": os.path.basename(path), "chunk": i, "t": ms, "t_text": rfc3339(ms)}
                line["metrics"] = sample
                out.write(json.dumps(line) + "\n")
        metadata += sum(1 for d in docs if d["type"] != 1)
    print(f"{metadata} metadata documents", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
