// Writes shuffle-partition fixtures with Arrow JS (apache-arrow on npm), an
// Arrow implementation independent of funnel, Arrow Java and Arrow C++.
// OtherProducersTest reads them through funnel and compares with Arrow
// Java's reading of the same files.
//
//   npm install apache-arrow@21 && node tests/data/producers/gen_arrowjs.mjs tests/data/arrowjs
//
// Deterministic (seeded); the outputs are committed so CI needs no Node.
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  Bool, Binary, DateDay, DateMillisecond, Field, FixedSizeBinary, Float32, Float64, Int8, Int16,
  Int32, Int64, LargeBinary, LargeUtf8, Schema, Table, TimestampMicrosecond,
  TimestampMillisecond, TimestampNanosecond, TimestampSecond, Uint8, Uint16, Uint32, Uint64, Utf8,
  tableToIPC, vectorFromArray, makeVector, RecordBatch, makeData, Struct,
} from 'apache-arrow';

const out = process.argv[2];
fs.mkdirSync(out, { recursive: true });
let seed = 11;
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const maybe = (v) => (rnd() < 0.15 ? null : v);
const str = () => Array.from({ length: int(0, 16) }, () => 'abcdefghijklmnopqrstuvwxyzé€'[int(0, 27)]).join('');
const bytes = (lo, hi) => Uint8Array.from({ length: int(lo, hi) }, () => int(0, 255));

const columns = [
  ['i8', new Int8(), () => int(-128, 127)],
  ['i16', new Int16(), () => int(-32768, 32767)],
  ['i32', new Int32(), () => int(-2147483648, 2147483647)],
  ['i64', new Int64(), () => BigInt(int(-1e9, 1e9)) * 1000003n],
  ['u8', new Uint8(), () => int(0, 255)],
  ['u16', new Uint16(), () => int(0, 65535)],
  ['u32', new Uint32(), () => int(0, 4294967295)],
  ['u64', new Uint64(), () => BigInt(int(0, 2e9)) * 4000037n],
  ['f32', new Float32(), () => Math.fround(rnd() * 1000 - 500)],
  ['f64', new Float64(), () => rnd() * 1e9 - 5e8],
  ['b', new Bool(), () => rnd() < 0.5],
  ['d32', new DateDay(), () => new Date(int(0, 20000) * 86400000)],
  ['d64', new DateMillisecond(), () => new Date(int(0, 20000) * 86400000)],
  ['ts_s', new TimestampSecond(), () => int(0, 2e9) * 1000],  // JS takes milliseconds
  ['ts_ms', new TimestampMillisecond('UTC'), () => int(0, 2e9) * 1000],
  ['ts_us', new TimestampMicrosecond(), () => int(0, 2e9) * 1000],
  ['ts_ns', new TimestampNanosecond('Asia/Tokyo'), () => int(0, 2e9) * 1000],
  ['s', new Utf8(), str],
  ['bin', new Binary(), () => bytes(0, 12)],
  ['ls', new LargeUtf8(), str],
  ['lbin', new LargeBinary(), () => bytes(0, 12)],
  ['fsb', new FixedSizeBinary(4), () => bytes(4, 4)],
];

function table(n) {
  const vectors = {};
  for (const [name, type, gen] of columns) {
    const values = Array.from({ length: n }, () => maybe(gen()));
    vectors[name] = vectorFromArray(values, type);
  }
  return new Table(vectors);
}

function write(name, t) {
  fs.writeFileSync(path.join(out, name), tableToIPC(t, 'stream'));
}

write('p0.arrows', table(50));
write('p1.arrows', table(1).concat(table(333)));  // two record batches
write('p2.arrows', table(0));
write('p3.arrows', table(7));
console.log('wrote', fs.readdirSync(out).sort());
