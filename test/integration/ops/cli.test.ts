/**
 * The command line as a person or a script uses it: `bin/coordinator.js` (what `npx coordinator` runs) spawned as
 * its own process against the whole app on the development host (leader, workers, Durable backend,
 * function keys on) and Azurite. Checked: real stdout and stderr, and the documented exit codes.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';
import { freePort, startHostProcess } from 'devhost/testing';

import { EXIT } from '../../../cli/CoordinatorClient';
import { registerTestWorkTypes } from '../../fixtures/ops/testWorkTypes';
import { eventually, type JobsHost, MASTER_KEY, startJobsHost } from '../jobs/support/jobsHost';

// The command as npx runs it: the tracked bin file package.json names, which loads the build.
const CLI = join(__dirname, '..', '..', '..', '..', 'bin', 'coordinator.js');

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface Running {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  done: Promise<Run>;
}

describe('the command line against a running app (development host, Azurite)', () => {
  let h: JobsHost;
  let dir: string;
  let env: Record<string, string>;

  before(async () => {
    registerTestWorkTypes();
    h = await startJobsHost('cli', ['*'], { LEADER_TIMER_SCHEDULE: '*/1 * * * * *', LEADER_PASS_INTERVAL_SECONDS: '1' });
    dir = mkdtempSync(join(tmpdir(), 'cli-test-'));
    env = { PATH: process.env.PATH ?? '', COORDINATOR_URL: h.baseUrl, COORDINATOR_KEY: MASTER_KEY };
  });
  after(async () => {
    await h?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  function start(args: readonly string[], options: { env?: Record<string, string>; stdin?: string } = {}): Running {
    const child = spawn(process.execPath, [CLI, ...args], { env: options.env ?? env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.stdin?.end(options.stdin ?? '');
    const done = new Promise<Run>((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
    return { child, stdout: () => stdout, stderr: () => stderr, done };
  }

  const run = (args: readonly string[], options?: { env?: Record<string, string>; stdin?: string }): Promise<Run> => start(args, options).done;

  function file(name: string, text: string): string {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  }

  it('prints its usage with --help (exit 0) and refuses bad arguments with exit 2', async () => {
    const help = await run(['--help']);
    assert.equal(help.code, EXIT.ok);
    assert.match(help.stdout, /Usage: coordinator <command>/);
    assert.match(help.stdout, /Exit codes:/);
    assert.equal((await run([])).code, EXIT.usage);
    const unknown = await run(['frobnicate']);
    assert.equal(unknown.code, EXIT.usage);
    assert.match(unknown.stderr, /Unknown command "frobnicate"/);
    assert.equal((await run(['list', '--bogus'])).code, EXIT.usage);
    const notJson = await run(['submit', file('bad.json', '{ not json')]);
    assert.equal(notJson.code, EXIT.usage);
    assert.match(notJson.stderr, /is not JSON/);
    assert.equal((await run(['submit', join(dir, 'missing.json')])).code, EXIT.usage);
  });

  it('says when the app cannot be reached (exit 4) or the key is wrong (exit 5)', async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const unreachable = await run(['list', '--url', nowhere]);
    assert.equal(unreachable.code, EXIT.unavailable);
    assert.match(unreachable.stderr, /Cannot reach http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/);
    // watch asks again while the app cannot be reached (an instance restarting), within its --timeout.
    const watching = await run(['watch', 'some-job', '--url', nowhere, '--timeout', '3', '--interval', '0.5']);
    assert.equal(watching.code, EXIT.unavailable);
    assert.ok((watching.stderr.match(/Asking again\./g) ?? []).length >= 2, watching.stderr);
    const wrongKey = await run(['list', '--key', 'not-the-key']);
    assert.equal(wrongKey.code, EXIT.unauthorized);
    assert.match(wrongKey.stderr, /needs a function key/);
    assert.doesNotMatch(wrongKey.stderr, /not-the-key/, 'the key is never echoed');
  });

  it('submits an items file, watches it to the end and prints the exact result; status and list agree', async () => {
    const items = Array.from({ length: 41 }, (_, i) => i * 3 - 20);
    const submitted = await run(['submit', file('items.txt', items.join('\n')), '--work-type', 'sum', '--chunk-size', '4']);
    assert.equal(submitted.code, EXIT.ok, submitted.stderr);
    const jobId = submitted.stdout.trim();
    assert.match(jobId, /^j-[0-9a-f-]{36}$/, 'stdout is the job id alone, for scripts');
    assert.match(submitted.stderr, new RegExp(`accepted ${jobId}`));

    const watched = await run(['watch', jobId, '--interval', '0.2']);
    assert.equal(watched.code, EXIT.ok, watched.stderr);
    assert.deepEqual(JSON.parse(watched.stdout), { count: 41, sum: items.reduce((a, b) => a + b, 0), min: -20, max: 100 });
    assert.match(watched.stderr, /\[#{30}\] 41\/41 items \(100%\), chunks 11\/11 completed/);
    assert.match(watched.stderr, new RegExp(`${jobId}: completed`));

    const status = await run(['status', jobId]);
    assert.equal(status.code, EXIT.ok);
    assert.equal((JSON.parse(status.stdout) as { status: string }).status, 'completed');
    const list = await run(['list']);
    assert.equal(list.code, EXIT.ok);
    assert.match(list.stdout, /^JOB\s+STATUS\s+TYPE\s+ITEMS\s+UPDATED\s+ERROR/);
    assert.match(list.stdout, new RegExp(`${jobId}\\s+completed\\s+sum\\s+41/41`));
    assert.match(list.stderr, /^\d+ jobs: (.*, )?[1-9]\d* completed/m, 'the jobs per status, on stderr');
    const listed = JSON.parse((await run(['list', '--status', 'completed', '--json'])).stdout) as { jobs: Array<{ jobId: string }>; counts: { completed: number; total: number } };
    assert.ok(listed.jobs.some((j) => j.jobId === jobId));
    assert.ok(listed.counts.completed >= 1 && listed.counts.total >= listed.counts.completed, JSON.stringify(listed.counts));
    const byType = JSON.parse((await run(['list', '--work-type', 'noop', '--json'])).stdout) as { jobs: Array<{ jobId: string }> };
    assert.ok(!byType.jobs.some((j) => j.jobId === jobId), 'a sum job is not among the noop jobs');
  });

  it('submits a million items from stdin with one command: uploads them as the job\'s itemsBlob (with progress), watches it to the exact result', async () => {
    const count = 1_000_000;
    const lines = Array.from({ length: count }, (_, i) => String(i + 1)).join('\n');
    const submitted = await run(['submit', '-', '--work-type', 'sum', '--chunk-size', '10000', '--job-id', 'cli-million', '--watch', '--interval', '0.5'], { stdin: lines });
    assert.equal(submitted.code, EXIT.ok, submitted.stderr);
    assert.deepEqual(JSON.parse(submitted.stdout), { count, sum: (count * (count + 1)) / 2, min: 1, max: count });
    assert.match(submitted.stderr, /^uploading 1000000 items \(6\.6 MB\) to inputs\/cli\/\d{4}-\d{2}-\d{2}\/cli-million-[0-9a-z]+\.json$/m);
    assert.match(submitted.stderr, /^\[#{20}\] 6\.6\/6\.6 MB$/m, 'the upload\'s progress, to the end');
    assert.match(submitted.stderr, /\[#{30}\] 1000000\/1000000 items \(100%\), chunks 100\/100 completed/);
    // The job ran from the blob: its submission names it, and the blob holds the items as a JSON array.
    const submission = (await h.request('GET', '/api/jobs/cli-million/submission')).json as { itemsBlob?: string; items?: unknown };
    assert.equal(submission.items, undefined);
    assert.match(submission.itemsBlob ?? '', /^inputs\/cli\/.+\.json$/);
    const [container, ...name] = (submission.itemsBlob ?? '').split('/');
    const blob = BlobServiceClient.fromConnectionString(h.env.CoordinatorStorage ?? '').getContainerClient(container ?? '').getBlobClient(name.join('/'));
    const stored = JSON.parse((await blob.downloadToBuffer()).toString('utf8')) as number[];
    assert.equal(stored.length, count);
    assert.equal(stored[count - 1], count);
  });

  it('GET /api/job-inputs names the blob endpoint and the input containers, never a key', async () => {
    const target = await h.request('GET', '/api/job-inputs');
    assert.equal(target.status, 200);
    const answer = target.json as { blobServiceUrl: string; containers: string[]; maxBytes: number; inlineMaxBytes: number };
    assert.deepEqual(answer.containers, ['inputs', 'e2e-inputs-*', 'corpus-inputs-*']);
    assert.equal(answer.maxBytes, 64 * 1024 * 1024);
    assert.equal(answer.inlineMaxBytes, 48 * 1024);
    assert.match(answer.blobServiceUrl, /^http:\/\/127\.0\.0\.1:\d+\/devstoreaccount1$/, 'the endpoint, no key or query');
    assert.doesNotMatch(target.text, /AccountKey|Eby8vdM02/);
    assert.equal((await h.request('GET', '/api/job-inputs', undefined, null)).status, 401, 'a key is needed');
  });

  it('an upload to an account other than Azurite\'s signs in with Azure, and says so when there is no sign-in (exit 5)', async () => {
    // The same app on identity-based settings for an account that is not Azurite's: the command must not use a key there.
    const outDir = join(__dirname, '..', '..', '..');
    const other = 'https://127.0.0.1:9/otheraccount';
    const app = await startHostProcess({
      appRoot: join(outDir, '..'),
      hostId: 'cli-identity',
      instanceId: 'cli-identity',
      env: {
        AzureWebJobsStorage: h.env.CoordinatorStorage ?? '',
        // Set empty so that a local.settings.json (npm start writes one) cannot fill in Azurite's connection string.
        CoordinatorStorage: '',
        CoordinatorStorage__blobServiceUri: other,
        CoordinatorStorage__queueServiceUri: other.replace('otheraccount', 'otherqueue'),
        JOB_INPUT_CONTAINERS: 'uploads',
        // A fresh clone has no local.settings.json to fill these in (the jobs API binds a Durable client).
        TASK_HUB_NAME: 'CliIdentityHub',
      },
      extraArgs: ['--main', `${basename(outDir)}/functions/jobsApi.js`],
      timeoutMs: 30_000,
    });
    try {
      const items = Array.from({ length: 20_000 }, (_, i) => String(i)).join('\n');
      const noSignIn = { PATH: env.PATH ?? '', COORDINATOR_URL: app.baseUrl, AZURE_CONFIG_DIR: join(dir, 'no-az-login') };
      const refused = await run(['submit', '-', '--work-type', 'sum'], { env: noSignIn, stdin: items });
      assert.equal(refused.code, EXIT.unauthorized, refused.stderr);
      assert.match(refused.stderr, /uploading 20000 items \(0\.1 MB\) to uploads\/cli\//);
      assert.match(refused.stderr, /Cannot upload the items to uploads\/cli\/\S+: no Azure sign-in found\. Run `az login`/);
    } finally {
      await app.stop();
    }
  });

  it('passes the app refusal through with its code (exit 3): an invalid job from stdin, an unknown job', async () => {
    const invalid = await run(['submit', '-'], { stdin: JSON.stringify({ workType: 'sum', items: [1], colour: 'red' }) });
    assert.equal(invalid.code, EXIT.refused);
    assert.match(invalid.stderr, /SCHEMA_VIOLATION: Unknown property "colour"/);
    const unknown = await run(['status', 'no-such-job']);
    assert.equal(unknown.code, EXIT.refused);
    assert.match(unknown.stderr, /JOB_NOT_FOUND/);
  });

  it('list shows why a rejected job ended so (its error code)', async () => {
    await h.jobsQueue.sendMessage(Buffer.from(JSON.stringify({ jobId: 'cli-rejected', workType: 'no-such-type', items: [1] })).toString('base64'));
    const listed = await eventually(async () => {
      const list = await run(['list', '--status', 'rejected']);
      return list.stdout.includes('cli-rejected') ? list : undefined;
    }, 30_000, 'the rejected job in the list');
    assert.match(listed.stdout, /^cli-rejected\s+rejected\s+-\s+-\s+\S+\s+UNKNOWN_WORK_TYPE$/m);
  });

  it('watches a running job move, cancels it (watch exits 12), refuses a second cancel, resubmits it', async () => {
    // 960 chunks of 1.6 s, up to 96 at a time (24 messages of 4 chunks): about 16 s if not cancelled. The
    // status moves when the plan or a step answers: about every 2 s while chunks remain to send, but a
    // call that has sent every chunk waits up to 5 s for the last results. The first window (256
    // chunks, sent by the leader's intake) runs while the run's start message may be deferred (the
    // start race, docs/deploy.md: 2-4 s), so with 200 chunks the plan could send all the rest at once
    // and the status went from planning to done with one partial line at most (about one run in
    // five). With 960 the plan sends at most a window more, and the next step still has chunks to send.
    const items = Array.from({ length: 960 }, () => 1_600);
    const submitted = await run(['submit', file('slow.json', JSON.stringify(items)), '--work-type', 'slow', '--chunk-size', '1', '--job-id', 'cli-slow']);
    assert.equal(submitted.code, EXIT.ok, submitted.stderr);
    assert.equal(submitted.stdout.trim(), 'cli-slow');

    const watcher = start(['watch', 'cli-slow', '--interval', '0.2']);
    // Not a terminal: one line per change of progress.
    const moving = await eventually(
      () => {
        const partial = watcher.stderr().split('\n').filter((l) => /\] [1-9]\d*\/960 items/.test(l) && !l.includes('960/960'));
        return Promise.resolve(partial.length >= 2 ? partial : undefined);
      },
      90_000,
      'two different partial progress lines',
    );
    assert.notEqual(moving[0], moving[1]);

    const cancelled = await run(['cancel', 'cli-slow']);
    assert.equal(cancelled.code, EXIT.ok, cancelled.stderr);
    assert.equal(cancelled.stdout.trim(), 'cli-slow cancelling');
    const watched = await watcher.done;
    assert.equal(watched.code, EXIT.cancelled, watched.stderr);
    assert.match(watched.stderr, /cli-slow: cancelled/);

    const again = await run(['cancel', 'cli-slow']);
    assert.equal(again.code, EXIT.refused);
    assert.match(again.stderr, /JOB_ALREADY_FINISHED/);

    const resubmitted = await run(['resubmit', 'cli-slow']);
    assert.equal(resubmitted.code, EXIT.ok, resubmitted.stderr);
    const newId = resubmitted.stdout.trim();
    assert.match(newId, /^j-/);
    const timedOut = await run(['watch', newId, '--timeout', '1', '--interval', '0.2']);
    assert.equal(timedOut.code, EXIT.timedOut, timedOut.stderr);
    assert.match(timedOut.stderr, new RegExp(`${newId} is still (pending|running) after 1 s`));
    assert.equal((await run(['cancel', newId])).code, EXIT.ok);
  });

  it('leader: the public record without a key, terms and instances with one', async () => {
    const instance = h.env.COORDINATOR_INSTANCE_ID ?? '';
    await eventually(async () => ((await run(['leader'])).stdout.includes(`leader ${instance}`) ? true : undefined), 30_000, 'a leader');
    const keyed = await run(['leader']);
    assert.equal(keyed.code, EXIT.ok);
    assert.match(keyed.stdout, new RegExp(`^leader ${instance}  epoch \\d+  since \\S+  lease leased`));
    assert.match(keyed.stdout, /terms\nEPOCH\s+HOLDER\s+FROM\s+ENDED\n\d+\s+cli-host/);
    assert.match(keyed.stdout, new RegExp(`instances\\nINSTANCE\\s+ROLE\\s+STATE\\s+SEEN\\n${instance}\\s+leader\\s+alive`));
    const anonymous = await run(['leader', '--json'], { env: { PATH: env.PATH ?? '', COORDINATOR_URL: h.baseUrl } });
    assert.equal(anonymous.code, EXIT.ok, anonymous.stderr);
    assert.deepEqual(Object.keys(JSON.parse(anonymous.stdout) as object).sort(), ['acquiredAt', 'epoch', 'holder', 'leaseState', 'leaseStatus']);
    assert.match(anonymous.stderr, /terms and instances need a function key: pass --key or set COORDINATOR_KEY/);
  });

  it('leader: where keys are off (locally), the terms and the instances without a key', async () => {
    // A second host process of the same app with no keys configured (as `npm start` runs it), serving the leader routes.
    const outDir = join(__dirname, '..', '..', '..');
    const keysOff = await startHostProcess({
      appRoot: join(outDir, '..'),
      hostId: 'cli-keys-off',
      instanceId: 'cli-keys-off',
      env: { AzureWebJobsStorage: h.env.CoordinatorStorage ?? '', CoordinatorStorage: h.env.CoordinatorStorage ?? '', LEADER_LEASE_CONTAINER: h.env.LEADER_LEASE_CONTAINER ?? '' },
      extraArgs: ['--main', `${basename(outDir)}/functions/leaderApi.js`],
      timeoutMs: 30_000,
    });
    try {
      const shown = await run(['leader'], { env: { PATH: env.PATH ?? '', COORDINATOR_URL: keysOff.baseUrl } });
      assert.equal(shown.code, EXIT.ok, shown.stderr);
      assert.match(shown.stdout, new RegExp(`^leader ${h.env.COORDINATOR_INSTANCE_ID ?? ''}  epoch \\d+`));
      assert.match(shown.stdout, /terms\nEPOCH\s+HOLDER\s+FROM\s+ENDED\n\d+\s+cli-host/);
      assert.match(shown.stdout, /instances\nINSTANCE\s+ROLE\s+STATE\s+SEEN\ncli-host\s+leader\s+alive/);
      assert.doesNotMatch(shown.stderr, /need a function key/);
    } finally {
      await keysOff.stop();
    }
  });
});
