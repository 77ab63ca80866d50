/**
 * `npm test` after build and lint: starts one Azurite for the whole run (free ports, temporary data
 * folder), runs every compiled test file of the app and of the development host package
 * (devhost/dist/test, CI runs only this command) with Node's built-in test runner (whose summary CI
 * reads), then stops Azurite. Arguments narrow the run: `npm test -- test/unit`, `devhost/`, or a
 * file name fragment.
 * The end-to-end files (test/e2e/) go first, two at a time (TEST_E2E_CONCURRENCY); then the rest,
 * four at a time (TEST_CONCURRENCY). The chaos run (test/chaos/*.test.js) goes last, alone: it takes
 * minutes, runs its own cluster, and its fault timings should not compete with the rest of the
 * suite for the CPU.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

import { startAzurite } from 'devhost/testing';

import { buildExtHost, PREBUILT_SETTING } from './extHostProcess';
import { nodeTestArgs } from './nodeTestArgs';


// Compiled layout: <outDir>/scripts/runTests.js beside <outDir>/test. Any outDir works (helpers
// building in parallel use their own), so paths come from here, not from a fixed "dist".
const root = process.cwd();
const compiledTests = join(__dirname, '..', 'test');
// The development host package's own tests, compiled by its own build (npm run build -w devhost).
const devhostTests = join(dirname(require.resolve('devhost/package.json')), 'dist', 'test');

function findTests(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .flatMap((name) => {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) return name === 'support' || name === 'fixtures' ? [] : findTests(full);
      return name.endsWith('.test.js') ? [full] : [];
    })
    .sort();
}

async function main(): Promise<number> {
  const filters = process.argv.slice(2).map((f) => f.replace(/\.ts$/, '').replace(/[\\/]/g, sep).replace(/^test[\\/]/, ''));
  const candidates = [
    ...findTests(compiledTests).map((file) => ({ file, label: relative(compiledTests, file) })),
    ...findTests(devhostTests).map((file) => ({ file, label: join('devhost', relative(devhostTests, file)) })),
  ];
  const files = candidates.filter((c) => filters.length === 0 || filters.some((flt) => c.label.includes(flt))).map((c) => c.file);
  if (files.length === 0) {
    console.error(`No test files matched ${filters.join(' ') || '(all)'} under ${relative(root, compiledTests)}; did the build run?`);
    return 1;
  }
  const chaosDir = join(compiledTests, 'chaos') + sep;
  const e2eDir = join(compiledTests, 'e2e') + sep;
  const e2e = files.filter((f) => f.startsWith(e2eDir));
  const regular = files.filter((f) => !f.startsWith(chaosDir) && !f.startsWith(e2eDir));
  const chaos = files.filter((f) => f.startsWith(chaosDir));
  const extHostDll = prebuildExtHost(e2e);
  const azurite = await startAzurite();
  console.log(`Azurite for this run: blob ${azurite.blobPort}, queue ${azurite.queuePort}, table ${azurite.tablePort}, data ${azurite.location}`);
  const concurrency = process.env.TEST_CONCURRENCY ?? '4';
  // The end-to-end files each run two or three host processes on real clocks and bound their
  // recoveries in seconds: four of them at once on two cores (beside Azurite) push the slowest past
  // their bounds whatever the code under test (the same three files together). They run first, two
  // at a time.
  const e2eConcurrency = process.env.TEST_E2E_CONCURRENCY ?? '2';
  // A test that never settles must fail, not hold CI until its 90-minute limit: the slowest test
  // takes about a minute on two cores, so three minutes each is a generous bound. And a test file
  // whose tests are done but whose process stays alive (a leaked timer or loop) must not hang the
  // run either: scripts/testChildGuard ends it, with a failure, 10 s after its tests have finished.
  const timeout = process.env.TEST_TIMEOUT_MS ?? '180000';
  // The short chaos run takes about two minutes on two cores, longer when a failure makes it wait
  // its full settle time; the runner's limit applies to the whole file.
  const chaosTimeout = process.env.TEST_CHAOS_TIMEOUT_MS ?? '600000';
  const env = {
    ...process.env,
    AZURITE_CONNECTION_STRING: azurite.connectionString,
    COORDINATOR_LOG_LEVEL: process.env.COORDINATOR_LOG_LEVEL ?? 'warn',
    DEVHOST_LOG_LEVEL: process.env.DEVHOST_LOG_LEVEL ?? 'warn',
    ...(extHostDll === undefined ? {} : { [PREBUILT_SETTING]: extHostDll }),
  };
  try {
    const phases = [
      { name: 'end-to-end', files: e2e, concurrency: e2eConcurrency, timeout },
      { name: 'suite', files: regular, concurrency, timeout },
      { name: 'chaos', files: chaos, concurrency: '1', timeout: chaosTimeout },
    ];
    const results: Array<{ name: string; code: number; failures: string }> = [];
    for (const phase of phases) {
      if (phase.files.length === 0) continue;
      results.push({ name: phase.name, ...(await runNodeTests(phase.files, phase.concurrency, phase.timeout, env)) });
    }
    // Each phase's failures again at the very end: a CI log's tail then says what failed in every phase.
    const failed = results.filter((r) => r.code !== 0);
    if (failed.length > 0) {
      console.log(`\n=== failures, by phase: ${failed.map((r) => `${r.name} (exit ${r.code})`).join(', ')} ===`);
      for (const r of failed) console.log(`--- ${r.name} ---\n${briefly(r.failures) || '(no failure report: the runner exited before its summary)'}`);
    }
    return failed[0]?.code ?? 0;
  } finally {
    await azurite.stop();
  }
}

/**
 * The end-to-end files that run the extensions host (exthost/, .NET) build it once here, outside
 * their per-file time limit (a first NuGet restore takes a while). Without dotnet nothing is built
 * and those files fail on their own, saying why.
 */
function prebuildExtHost(e2eFiles: readonly string[]): string | undefined {
  const runsBoth = /(bothHosts|durableDifferential|slowActivityOnce)\.test\.js$/;
  const needs = e2eFiles.some((f) => runsBoth.test(f)) || (e2eFiles.length > 0 && process.env.E2E_HOST === 'extensions');
  if (!needs) return undefined;
  try {
    const dll = buildExtHost();
    console.log(`Extensions host built: ${relative(root, dll)}`);
    return dll;
  } catch (err) {
    console.error(`Extensions host not built (its tests will fail): ${err instanceof Error ? err.message : String(err)}`);
    return undefined;
  }
}

/** A failure report without its stack frames and assertion fields: each failing test and its message. */
function briefly(report: string): string {
  return report
    .split('\n')
    .filter((line) => !/^\s+at \S/.test(line) && !/^\s+(generatedMessage|code|actual|expected|operator|diff):/.test(line) && !/^\s+}\s*$/.test(line))
    .join('\n')
    .trim();
}

/** How much of a phase's failure report is kept for the end of the run. */
const FAILURE_REPORT_CHARS = 12_000;

/**
 * Runs one phase's files; its output goes through as it comes, and the failure report Node's runner
 * prints at its end ("✖ failing tests:" onwards) is kept, cut to its first FAILURE_REPORT_CHARS.
 */
function runNodeTests(
  files: readonly string[],
  concurrency: string,
  timeout: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; failures: string }> {
  return new Promise((resolve) => {
    const args = nodeTestArgs({ files, concurrency: Number(concurrency), timeoutMs: Number(timeout) });
    const child = spawn(process.execPath, args, {
      stdio: ['inherit', 'pipe', 'inherit'],
      cwd: root,
      env,
    });
    let tail = '';
    let report: string | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      if (report !== undefined) {
        if (report.length < FAILURE_REPORT_CHARS) report += chunk.toString('utf8');
        return;
      }
      // The marker may straddle two chunks: look in the end of the last one too.
      tail = (tail + chunk.toString('utf8')).slice(-FAILURE_REPORT_CHARS);
      const at = tail.indexOf('✖ failing tests:');
      if (at >= 0) report = tail.slice(at);
    });
    const forward = (signal: NodeJS.Signals): void => {
      child.kill(signal);
    };
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.once('close', (code, signal) => {
      process.removeListener('SIGINT', forward);
      process.removeListener('SIGTERM', forward);
      resolve({ code: code ?? (signal === null ? 1 : 128), failures: (report ?? '').slice(0, FAILURE_REPORT_CHARS) });
    });
  });
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
