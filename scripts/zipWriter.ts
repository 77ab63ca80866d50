/**
 * Writes a folder as a zip archive (PKWARE APPNOTE 6.3: local headers, deflate or store, a central
 * directory), the format azd, Core Tools and Flex Consumption's one-deploy endpoint take.
 *
 * Guarantees: entries are the folder's regular files in sorted order with `/` separators and UTF-8
 * names, each with its CRC-32 and a fixed timestamp, so the same files give the same bytes on
 * every machine; each entry is deflated unless that would make it larger. Unix permissions 0644.
 * Not supported: zip64 (more than 65,535 entries or 4 GiB), symbolic links (refused), empty folders.
 */
import { closeSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import zlib from 'node:zlib';

const LOCAL_HEADER = 0x04034b50;
const CENTRAL_HEADER = 0x02014b50;
const END_OF_CENTRAL_DIRECTORY = 0x06054b50;
const VERSION = 20; // 2.0: deflate
const MADE_BY_UNIX = (3 << 8) | VERSION;
const UTF8_NAMES = 0x0800;
// 1980-01-01 00:00, the zip epoch: a fixed time keeps the archive reproducible.
const DOS_TIME = 0;
const DOS_DATE = (0 << 9) | (1 << 5) | 1;
const FILE_MODE = 0o100644;
const MAX_ENTRIES = 0xffff;
const MAX_SIZE = 0xffffffff;

export interface ZipSummary {
  readonly entries: number;
  /** Sum of the files' own sizes. */
  readonly unpackedBytes: number;
  /** Size of the archive written. */
  readonly zipBytes: number;
}

/** Regular files under `root` (relative, `/`-separated, sorted); `exclude` sees each relative path. */
export function listFiles(root: string, exclude: (relativePath: string) => boolean = () => false): string[] {
  const found: string[] = [];
  const visit = (dir: string, prefix: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const relativePath = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
      if (exclude(relativePath)) continue;
      if (entry.isSymbolicLink()) throw new Error(`${relativePath} is a symbolic link; a deployment package holds regular files only`);
      if (entry.isDirectory()) visit(join(dir, entry.name), relativePath);
      else if (entry.isFile()) found.push(relativePath);
    }
  };
  visit(root, '');
  return found.sort();
}

export function writeZip(root: string, files: readonly string[], zipPath: string): ZipSummary {
  if (files.length > MAX_ENTRIES) throw new Error(`${files.length} files: more than a zip without zip64 holds (${MAX_ENTRIES})`);
  const fd = openSync(zipPath, 'w');
  const central: Buffer[] = [];
  let offset = 0;
  let unpackedBytes = 0;
  const write = (buffer: Buffer): void => {
    writeSync(fd, buffer);
    offset += buffer.length;
  };
  try {
    for (const file of files) {
      const data = readFileSync(join(root, file));
      const deflated = zlib.deflateRawSync(data);
      const [method, body] = deflated.length < data.length ? [8, deflated] : [0, data];
      if (data.length > MAX_SIZE || offset > MAX_SIZE) throw new Error(`${file}: the archive passes 4 GiB, which needs zip64`);
      const name = Buffer.from(file, 'utf8');
      const crc = crc32(data);
      const local = Buffer.alloc(30);
      local.writeUInt32LE(LOCAL_HEADER, 0);
      local.writeUInt16LE(VERSION, 4);
      local.writeUInt16LE(UTF8_NAMES, 6);
      local.writeUInt16LE(method, 8);
      local.writeUInt16LE(DOS_TIME, 10);
      local.writeUInt16LE(DOS_DATE, 12);
      local.writeUInt32LE(crc, 14);
      local.writeUInt32LE(body.length, 18);
      local.writeUInt32LE(data.length, 22);
      local.writeUInt16LE(name.length, 26);
      local.writeUInt16LE(0, 28);
      const header = Buffer.alloc(46);
      header.writeUInt32LE(CENTRAL_HEADER, 0);
      header.writeUInt16LE(MADE_BY_UNIX, 4);
      header.writeUInt16LE(VERSION, 6);
      header.writeUInt16LE(UTF8_NAMES, 8);
      header.writeUInt16LE(method, 10);
      header.writeUInt16LE(DOS_TIME, 12);
      header.writeUInt16LE(DOS_DATE, 14);
      header.writeUInt32LE(crc, 16);
      header.writeUInt32LE(body.length, 20);
      header.writeUInt32LE(data.length, 24);
      header.writeUInt16LE(name.length, 28);
      // extra field, comment, disk number, internal attributes: all 0 (Buffer.alloc zero-fills)
      header.writeUInt32LE((FILE_MODE << 16) >>> 0, 38);
      header.writeUInt32LE(offset, 42);
      central.push(header, name);
      write(Buffer.concat([local, name]));
      write(body);
      unpackedBytes += data.length;
    }
    const directory = Buffer.concat(central);
    const end = Buffer.alloc(22);
    end.writeUInt32LE(END_OF_CENTRAL_DIRECTORY, 0);
    end.writeUInt16LE(files.length, 8);
    end.writeUInt16LE(files.length, 10);
    end.writeUInt32LE(directory.length, 12);
    end.writeUInt32LE(offset, 16);
    write(directory);
    write(end);
  } finally {
    closeSync(fd);
  }
  return { entries: files.length, unpackedBytes, zipBytes: offset };
}

/** CRC-32 (ISO-HDLC) as zip wants it; Node has it built in from 20.15 and 22.2. */
export function crc32(data: Buffer): number {
  if (typeof zlib.crc32 === 'function') return zlib.crc32(data);
  let crc = 0xffffffff;
  for (const byte of data) crc = (CRC_TABLE[(crc ^ byte) & 0xff] as number) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
