/**
 * Reads a zip archive through its central directory, the way an unzip tool does, to check what a
 * deployment package really holds. Every entry is inflated and its size and CRC-32 verified.
 * Not supported: zip64, encryption, methods other than store (0) and deflate (8).
 */
import { readFileSync } from 'node:fs';
import zlib from 'node:zlib';

export interface ZipEntry {
  readonly name: string;
  readonly data: Buffer;
  /** Unix permission bits from the external attributes (0 when the archive was not made on Unix). */
  readonly mode: number;
}

export function readZip(path: string): ZipEntry[] {
  const zip = readFileSync(path);
  let end = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      end = i;
      break;
    }
  }
  if (end < 0) throw new Error(`${path}: no end-of-central-directory record`);
  const count = zip.readUInt16LE(end + 10);
  const directorySize = zip.readUInt32LE(end + 12);
  let at = zip.readUInt32LE(end + 16);
  if (at + directorySize !== end) throw new Error(`${path}: the central directory does not end where the end record starts`);
  const entries: ZipEntry[] = [];
  for (let n = 0; n < count; n++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error(`${path}: central header ${n} has a bad signature`);
    const madeBy = zip.readUInt16LE(at + 4) >> 8;
    const method = zip.readUInt16LE(at + 10);
    const crc = zip.readUInt32LE(at + 16);
    const compressedSize = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const external = zip.readUInt32LE(at + 38);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    at += 46 + nameLength + extraLength + commentLength;

    if (zip.readUInt32LE(local) !== 0x04034b50) throw new Error(`${name}: bad local header signature`);
    if (zip.subarray(local + 30, local + 30 + zip.readUInt16LE(local + 26)).toString('utf8') !== name) throw new Error(`${name}: local header names another file`);
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const stored = zip.subarray(start, start + compressedSize);
    if (method !== 0 && method !== 8) throw new Error(`${name}: compression method ${method} is not supported`);
    const data = method === 8 ? zlib.inflateRawSync(stored) : Buffer.from(stored);
    if (data.length !== size) throw new Error(`${name}: ${data.length} bytes, the directory says ${size}`);
    if (zlib.crc32(data) !== crc) throw new Error(`${name}: CRC-32 mismatch`);
    entries.push({ name, data, mode: madeBy === 3 ? (external >>> 16) & 0o7777 : 0 });
  }
  return entries;
}
