"""Writes shuffle-partition fixtures with pyarrow (Arrow C++), an Arrow
implementation independent of funnel and of Arrow Java. The JUnit test
OtherProducersTest reads them through funnel and compares with Arrow Java's
reading of the same files.

    python3 tests/data/producers/gen_pyarrow.py tests/data/pyarrow

Deterministic (seeded); the outputs are committed so CI needs no Python.
"""
import decimal
import os
import random
import sys

import pyarrow as pa
import pyarrow.ipc as ipc

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = random.Random(7)


def maybe(v, p=0.15):
    return None if rng.random() < p else v


def rand_bytes(lo, hi):
    return bytes(rng.randrange(256) for _ in range(rng.randint(lo, hi)))


def rand_str(lo, hi):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzäöü€") for _ in range(rng.randint(lo, hi)))


schema = pa.schema([
    pa.field("i8", pa.int8()), pa.field("i16", pa.int16()),
    pa.field("i32", pa.int32(), nullable=False), pa.field("i64", pa.int64()),
    pa.field("u8", pa.uint8()), pa.field("u16", pa.uint16()),
    pa.field("u32", pa.uint32()), pa.field("u64", pa.uint64()),
    pa.field("f32", pa.float32()), pa.field("f64", pa.float64()),
    pa.field("b", pa.bool_()), pa.field("d32", pa.date32()), pa.field("d64", pa.date64()),
    pa.field("ts_s", pa.timestamp("s")), pa.field("ts_ms", pa.timestamp("ms", tz="UTC")),
    pa.field("ts_us", pa.timestamp("us", tz="Europe/Paris")), pa.field("ts_ns", pa.timestamp("ns")),
    pa.field("dec", pa.decimal128(20, 3)), pa.field("s", pa.string()), pa.field("bin", pa.binary()),
    pa.field("ls", pa.large_string()), pa.field("lbin", pa.large_binary()),
    pa.field("fsb", pa.binary(5)),
])


def column(f, n):
    t = f.type
    nul = 0.0 if not f.nullable else 0.15
    def m(v):
        return maybe(v, nul)
    if pa.types.is_integer(t):
        bits = t.bit_width
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if pa.types.is_signed_integer(t) else (0, (1 << bits) - 1)
        return [m(rng.randint(lo, hi)) for _ in range(n)]
    if pa.types.is_floating(t):
        return [m(rng.uniform(-1e6, 1e6)) for _ in range(n)]
    if pa.types.is_boolean(t):
        return [m(rng.random() < 0.5) for _ in range(n)]
    if pa.types.is_date32(t):
        return [m(rng.randint(-10000, 30000)) for _ in range(n)]
    if pa.types.is_date64(t):
        return [m(rng.randint(-10000, 30000) * 86400000) for _ in range(n)]
    if pa.types.is_timestamp(t):
        return [m(rng.randint(0, 2 ** 40)) for _ in range(n)]
    if pa.types.is_decimal(t):
        return [m(decimal.Decimal(rng.randint(-10 ** 17, 10 ** 17)).scaleb(-3)) for _ in range(n)]
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return [m(rand_str(0, 20)) for _ in range(n)]
    if pa.types.is_fixed_size_binary(t):
        return [m(rand_bytes(5, 5)) for _ in range(n)]
    return [m(rand_bytes(0, 20)) for _ in range(n)]


def batch(n):
    arrays = []
    for f in schema:
        vals = column(f, n)
        if pa.types.is_date64(f.type):
            arrays.append(pa.array(vals, type=pa.int64()).cast(pa.date64()))
        elif pa.types.is_timestamp(f.type) or pa.types.is_date32(f.type):
            arrays.append(pa.array(vals, type=pa.int64() if pa.types.is_timestamp(f.type) else pa.int32()).cast(f.type))
        else:
            arrays.append(pa.array(vals, type=f.type))
    return pa.record_batch(arrays, schema=schema)


def write_stream(name, batches, **opts):
    with open(os.path.join(out, name), "wb") as fh:
        with ipc.new_stream(fh, schema, options=ipc.IpcWriteOptions(**opts)) as w:
            for b in batches:
                w.write_batch(b)


# a reduce partition's map outputs: several batches, a sliced batch (offsets
# and validity not starting at 0), a schema-only stream, legacy framing, and
# the IPC file format
write_stream("p0.arrows", [batch(37), batch(1), batch(250)])
big = batch(301)
write_stream("p1.arrows", [big.slice(13, 200), big.slice(3, 5)])
write_stream("p2.arrows", [])
write_stream("p3.arrows", [batch(1000)], use_legacy_format=True)
with open(os.path.join(out, "p4.arrow"), "wb") as fh:
    with ipc.new_file(fh, schema) as w:
        w.write_batch(batch(64))
        w.write_batch(batch(9))

# inputs funnel must reject, each with its reason
small = pa.schema([pa.field("x", pa.int64())])
def write_small(name, arrays, sch, **opts):
    with open(os.path.join(out, name), "wb") as fh:
        with ipc.new_stream(fh, sch, options=ipc.IpcWriteOptions(**opts)) as w:
            w.write_batch(pa.record_batch(arrays, schema=sch))

write_small("bad_lz4.arrows", [pa.array(list(range(1000)), pa.int64())], small, compression="lz4")
write_small("bad_zstd.arrows", [pa.array(list(range(1000)), pa.int64())], small, compression="zstd")
dsch = pa.schema([pa.field("x", pa.dictionary(pa.int32(), pa.string()))])
write_small("bad_dictionary.arrows", [pa.array(["a", "b", "a"]).dictionary_encode()], dsch)
vsch = pa.schema([pa.field("x", pa.string_view())])
write_small("bad_utf8_view.arrows", [pa.array(["a", "bb", None], pa.string_view())], vsch)
other = pa.schema([pa.field("i8", pa.int16())])
write_small("bad_other_schema.arrows", [pa.array([1, 2], pa.int16())], other)

# nested columns, which funnel reads (they were among the rejections until
# funnel read nested columns: the files keep their bytes)
lsch = pa.schema([pa.field("x", pa.list_(pa.int32()))])
write_small("list.arrows", [pa.array([[1, 2], None, [3]], pa.list_(pa.int32()))], lsch)
ssch = pa.schema([pa.field("x", pa.struct([("a", pa.int32())]))])
write_small("struct.arrows", [pa.array([{"a": 1}, None], ssch[0].type)], ssch)

# compressed bodies as Arrow C++ writes them (LZ4 frames of 64 KiB linked
# blocks, ZSTD), which funnel decodes: the types of p0 over several batches,
# a sliced batch, nested columns (bad_lz4 and bad_zstd, above, were refused
# until funnel decoded compressed bodies: the files keep their names)
write_stream("lz4_p0.arrows", [batch(37), batch(1), batch(2000)], compression="lz4")
big2 = batch(301)
write_stream("zstd_p1.arrows", [big2.slice(13, 200), big2.slice(3, 5)], compression="zstd")
nsch = pa.schema([
    pa.field("l", pa.list_(pa.int64())),
    pa.field("m", pa.map_(pa.string(), pa.int64())),
    pa.field("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
])
def nested_rows(n):
    l = [maybe([maybe(rng.randint(-99, 99)) for _ in range(rng.randint(0, 4))]) for _ in range(n)]
    m = [maybe([(rand_str(1, 5), maybe(rng.randint(0, 9))) for _ in range(rng.randint(0, 3))]) for _ in range(n)]
    s = [maybe({"a": maybe(rng.randint(0, 1000)), "b": maybe(rand_str(0, 8))}) for _ in range(n)]
    return pa.record_batch([pa.array(l, nsch[0].type), pa.array(m, nsch[1].type),
                            pa.array(s, nsch[2].type)], schema=nsch)
for codec in ("lz4", "zstd"):
    with open(os.path.join(out, "nested_%s.arrows" % codec), "wb") as fh:
        with ipc.new_stream(fh, nsch, options=ipc.IpcWriteOptions(compression=codec)) as w:
            w.write_batch(nested_rows(500))
            w.write_batch(nested_rows(3))
print("wrote", sorted(os.listdir(out)))
