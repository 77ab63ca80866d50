/**
 * scripts/zipWriter.ts (fflate underneath): the archive an unzip reads back (test/unit/infra/zipReader.ts
 * checks every entry's CRC-32 and size), names sorted with `/`, mode 0644, the same bytes from the
 * same files, an incompressible file stored rather than grown, and symbolic links refused.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { listFiles, writeZip } from '../../../scripts/zipWriter';
import { readZip } from './zipReader';

describe('zip writer', () => {
  const root = mkdtempSync(join(tmpdir(), 'zip-writer-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  it('writes the files an unzip reads back, reproducibly, storing what deflate would grow', () => {
    const src = join(root, 'src');
    mkdirSync(join(src, 'dist', 'functions'), { recursive: true });
    const text = 'const x = 1;\n'.repeat(500);
    const noise = randomBytes(4096);
    writeFileSync(join(src, 'host.json'), '{"version":"2.0"}');
    writeFileSync(join(src, 'dist', 'functions', 'app.js'), text);
    writeFileSync(join(src, 'dist', 'noise.bin'), noise);
    writeFileSync(join(src, 'dist', 'ünïcode.txt'), 'ok');
    const files = listFiles(src);
    assert.deepEqual(files, ['dist/functions/app.js', 'dist/noise.bin', 'dist/ünïcode.txt', 'host.json']);

    const first = writeZip(src, files, join(root, 'a.zip'));
    const second = writeZip(src, files, join(root, 'b.zip'));
    assert.ok(readFileSync(join(root, 'a.zip')).equals(readFileSync(join(root, 'b.zip'))), 'the same files give the same bytes');
    assert.deepEqual(first, second);
    assert.equal(first.entries, 4);
    assert.equal(first.unpackedBytes, text.length + noise.length + 2 + '{"version":"2.0"}'.length);

    const entries = readZip(join(root, 'a.zip'));
    assert.deepEqual(entries.map((e) => e.name), files);
    assert.deepEqual(entries.map((e) => e.mode), [0o644, 0o644, 0o644, 0o644]);
    assert.equal(entries[0]?.data.toString('utf8'), text);
    assert.ok(entries[1]?.data.equals(noise));
    // The text shrank; the random bytes were stored, not grown (a local header and a central entry around them).
    assert.ok(first.zipBytes < text.length + noise.length, `${first.zipBytes} bytes`);
    assert.ok(first.zipBytes < noise.length + 1_000, `${first.zipBytes} bytes`);
  });

  it('refuses a symbolic link', () => {
    const src = join(root, 'links');
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, 'real.txt'), 'x');
    symlinkSync(join(src, 'real.txt'), join(src, 'link.txt'));
    assert.throws(() => listFiles(src), /link\.txt is a symbolic link/);
  });
});
