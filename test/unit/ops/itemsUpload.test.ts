/**
 * Where `coordinator submit` puts items above the inline limit (cli/itemsUpload.ts): the container
 * chosen from JOB_INPUT_CONTAINERS, the blob's name, when Azurite's public key is used (only for
 * Azurite's account on this machine; everything else signs in with Azure), the progress line.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CliError } from '../../../cli/CoordinatorClient';
import { uploadBlobName, uploadContainer, uploadLine } from '../../../cli/itemsUpload';
import { isLocalAzurite } from '../../../cli/storageAccess';
import { parseBlobRef } from '../../../shared/jobs/input/BlobRef';

describe('uploading a job\'s items', () => {
  it('uploads to the first exact input container, else to a name made from the first prefix', () => {
    assert.equal(uploadContainer(['inputs-*', 'job-inputs', 'other']), 'job-inputs');
    assert.equal(uploadContainer(['inputs-*']), 'inputs-cli');
    assert.throws(() => uploadContainer([]), (err: unknown) => err instanceof CliError && /JOB_INPUT_CONTAINERS is empty/.test(err.message));
  });

  it('names the blob by day and job, and the name is one the app accepts as itemsBlob', () => {
    const at = new Date('2026-11-26T17:00:00.000Z');
    assert.match(uploadBlobName('nightly-42', at), /^cli\/2026-11-26\/nightly-42-[0-9a-z]+\.json$/);
    assert.match(uploadBlobName(undefined, at), /^cli\/2026-11-26\/items-[0-9a-f]{12}-[0-9a-z]+\.json$/);
    assert.notEqual(uploadBlobName(undefined, at), uploadBlobName(undefined, at));
    for (const name of [uploadBlobName('a_B-9', at), uploadBlobName(undefined, at)]) assert.ok('container' in parseBlobRef(`job-inputs/${name}`), name);
  });

  it("uses Azurite's public key only for Azurite's account on this machine", () => {
    assert.equal(isLocalAzurite('http://127.0.0.1:10000/devstoreaccount1'), true);
    assert.equal(isLocalAzurite('http://localhost:41234/devstoreaccount1'), true);
    assert.equal(isLocalAzurite('https://stabc123.blob.core.windows.net'), false);
    assert.equal(isLocalAzurite('https://devstoreaccount1.blob.core.windows.net/devstoreaccount1'), false);
    assert.equal(isLocalAzurite('http://127.0.0.1:10000/otheraccount'), false);
  });

  it('shows the upload as a bar with megabytes', () => {
    assert.equal(uploadLine(0, 8 * 1024 * 1024), '[--------------------] 0.0/8.0 MB');
    assert.equal(uploadLine(4 * 1024 * 1024, 8 * 1024 * 1024), '[##########----------] 4.0/8.0 MB');
    assert.equal(uploadLine(8 * 1024 * 1024, 8 * 1024 * 1024), '[####################] 8.0/8.0 MB');
  });
});
