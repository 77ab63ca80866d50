/**
 * The package's own test run (`npm test` in devhost/): starts one Azurite for the run (free ports,
 * temporary data folder), runs every compiled test file with Node's test runner, then stops
 * Azurite. Arguments narrow the run to files whose path contains one of them (`unit`, `durable`).
 */
import { spawn } from 'node:child_process';
import { relative } from 'node:path';

import { startAzurite } from '../src/testing/azurite';
import { findTestFiles, PACKAGE_TESTS } from './testFiles';

async function main(): Promise<number> {
  const filters = process.argv.slice(2);
  const files = findTestFiles(PACKAGE_TESTS).filter((f) => filters.length === 0 || filters.some((flt) => relative(PACKAGE_TESTS, f).includes(flt)));
  if (files.length === 0) {
    console.error(`No test files matched ${filters.join(' ') || '(all)'}; did the build run?`);
    return 1;
  }
  const azurite = await startAzurite();
  try {
    return await new Promise<number>((resolve) => {
      const child = spawn(
        process.execPath,
        ['--test', `--test-concurrency=${process.env.TEST_CONCURRENCY ?? '4'}`, `--test-timeout=${process.env.TEST_TIMEOUT_MS ?? '180000'}`, '--test-force-exit', '--test-reporter=spec', ...files],
        { stdio: 'inherit', env: { ...process.env, AZURITE_CONNECTION_STRING: azurite.connectionString, DEVHOST_LOG_LEVEL: process.env.DEVHOST_LOG_LEVEL ?? 'warn' } },
      );
      child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
    });
  } finally {
    await azurite.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
