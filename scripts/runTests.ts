/**
 * `npm test` after build and lint: runs every compiled test file of the app and of the development
 * host package (devhost/dist/test, CI runs only this command) with Node's built-in test runner, each
 * file in its own `node --test` (scripts/testPool.ts), with an Azurite of its own unless it is a unit
 * file (those share one). Arguments narrow the run: `npm test -- test/unit`, `devhost/`, or a file
 * name fragment.
 * The end-to-end files (test/e2e/) go first, two at a time (TEST_E2E_CONCURRENCY); then the rest,
 * four at a time (TEST_CONCURRENCY). The chaos runs (test/chaos/*.test.js: the short run, and the same
 * plan in Flex Consumption's shape) go last, one at a time: each takes
 * minutes, runs its own cluster, and its fault timings should not compete with the rest of the
 * suite for the CPU. The end-to-end files and the chaos run start the app on the extensions host
 * (the real Durable, queue and timer extensions; built once here) unless `E2E_HOST=devhost` says the
 * development host (test/e2e/support/appHost.ts); the rest run in-process or on the development host. Each phase prints one summary in Node's form; the run ends with every phase's
 * failing tests.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

import { type AzuriteInstance, startAzurite } from 'devhost/testing';

import { e2eHost } from '../test/e2e/support/appHost';
import { buildExtHost, PREBUILT_SETTING } from './extHostProcess';
import { failureReport, phaseReport, runPool } from './testPool';


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
  const extHostDll = prebuildExtHost([...e2e, ...chaos]);
  if (e2e.length + chaos.length > 0) console.log(`End-to-end files and the chaos run on the ${e2eHost() === 'extensions' ? 'extensions host (E2E_HOST=devhost for the development host)' : 'development host (E2E_HOST=devhost)'}`);
  // One Azurite for the unit files (few of them touch storage); each other file gets one of its own
  // (scripts/testPool.ts says why), started ahead while earlier files run.
  const shared = await startAzurite();
  console.log(`Azurite for the unit files: blob ${shared.blobPort}, queue ${shared.queuePort}, table ${shared.tablePort}, data ${shared.location}`);
  const azurites = new AzuriteSpares();
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
  // Each short chaos run takes about two minutes on two cores, longer when a failure makes it wait
  // its full settle time; the runner's limit applies to the whole file.
  const chaosTimeout = process.env.TEST_CHAOS_TIMEOUT_MS ?? '600000';
  const env = {
    ...process.env,
    AZURITE_CONNECTION_STRING: shared.connectionString,
    COORDINATOR_LOG_LEVEL: process.env.COORDINATOR_LOG_LEVEL ?? 'warn',
    DEVHOST_LOG_LEVEL: process.env.DEVHOST_LOG_LEVEL ?? 'warn',
    ...(extHostDll === undefined ? {} : { [PREBUILT_SETTING]: extHostDll }),
  };
  const labels = new Map(candidates.map((c) => [c.file, c.label]));
  const label = (file: string): string => labels.get(file) ?? file;
  const isUnit = (file: string): boolean => /^(devhost[\\/])?unit[\\/]/.test(label(file));
  const prepare = async (file: string): Promise<{ env: NodeJS.ProcessEnv; done: () => Promise<void> }> => {
    if (isUnit(file)) return { env: {}, done: () => Promise.resolve() };
    const own = await azurites.take();
    return { env: { AZURITE_CONNECTION_STRING: own.connectionString }, done: () => own.stop() };
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
      const began = Date.now();
      const { outcomes, interrupted } = await runPool({
        files: phase.files,
        concurrency: Number(phase.concurrency),
        timeoutMs: Number(phase.timeout),
        env,
        cwd: root,
        prepare,
        label,
        write: (text) => process.stdout.write(text),
      });
      const report = phaseReport(outcomes, Date.now() - began, label);
      console.log(`\n${phase.name}: ${phase.files.length} files\n${report}\n`);
      const code = outcomes.find((o) => o.code !== 0)?.code ?? 0;
      results.push({ name: phase.name, code: interrupted && code === 0 ? 130 : code, failures: failureReport(report) });
      if (interrupted) break;
    }
    // Each phase's failures again at the very end: a CI log's tail then says what failed in every phase.
    const failed = results.filter((r) => r.code !== 0);
    if (failed.length > 0) {
      console.log(`\n=== failures, by phase: ${failed.map((r) => `${r.name} (exit ${r.code})`).join(', ')} ===`);
      for (const r of failed) console.log(`--- ${r.name} ---\n${briefly(r.failures) || '(no failure report)'}`);
    }
    return failed[0]?.code ?? 0;
  } finally {
    await Promise.all([shared.stop(), azurites.close()]);
  }
}

/** A cut of a failure report: each failing test and its message, without stack frames and assertion fields. */
function briefly(report: string): string {
  return report
    .split('\n')
    .filter((line) => !/^\s+at \S/.test(line) && !/^\s+(generatedMessage|code|actual|expected|operator|diff):/.test(line) && !/^\s+}\s*$/.test(line))
    .join('\n')
    .slice(0, 12_000)
    .trim();
}

/** Fresh Azurites, one started ahead: `take` hands out a running one and starts the next. */
class AzuriteSpares {
  #spare: Promise<AzuriteInstance> | undefined;
  readonly #running = new Set<AzuriteInstance>();

  async take(): Promise<AzuriteInstance & { stop(): Promise<void> }> {
    // The spare is this take's before any await: two takes at once never share one.
    const mine = this.#spare ?? startAzurite();
    const next = startAzurite();
    // A spare that failed to start is reported by the take that awaits it.
    next.catch(() => undefined);
    this.#spare = next;
    // One more try when the spare failed: a port it chose can be taken by another process before its
    // bind (a run that lost its whole suite to one spare that never listened).
    let taken = await mine.catch((err: unknown) => {
      console.log(`An Azurite failed to start (${err instanceof Error ? err.message : String(err)}); starting another`);
      return startAzurite();
    });
    // A spare that has exited since it started (nothing watches it while it waits) is not handed out.
    if (taken.pid === undefined) {
      console.log('A spare Azurite had exited; starting another');
      await taken.stop();
      taken = await startAzurite();
    }
    this.#running.add(taken);
    return {
      ...taken,
      stop: async () => {
        this.#running.delete(taken);
        await taken.stop();
      },
    };
  }

  async close(): Promise<void> {
    const spare = this.#spare;
    this.#spare = undefined;
    await Promise.all([...[...this.#running].map((a) => a.stop()), spare?.then((a) => a.stop(), () => undefined)]);
  }
}

/**
 * The extensions host (exthost/, .NET), built once here, outside each file's time limit (a first
 * NuGet restore takes a while), for the end-to-end files and the chaos run when they run on it, and
 * for the files that run both hosts whatever E2E_HOST says. Without dotnet nothing is built and
 * those files fail on their own, saying why.
 */
function prebuildExtHost(files: readonly string[]): string | undefined {
  const runsBoth = /(bothHosts|durableDifferential|slowActivityOnce|missingActivity|functionTimeout)\.test\.js$/;
  const needs = files.some((f) => runsBoth.test(f)) || (files.length > 0 && e2eHost() === 'extensions');
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

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
