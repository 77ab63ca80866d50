/**
 * The command line's arguments (cli/coordinator.ts parseArgs, on node:util's parser): options in
 * both forms, positionals (`-` for stdin), `--` ending the options, values starting with a dash, and
 * usage errors with exit 2 and the command line's own messages.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { parseArgs } from '../../../cli/coordinator';
import { CliError, EXIT } from '../../../cli/CoordinatorClient';

function usageError(argv: string[], message: RegExp): void {
  assert.throws(() => parseArgs(argv), (err: unknown) => err instanceof CliError && err.exitCode === EXIT.usage && message.test(err.message));
}

describe('coordinator argument parsing', () => {
  it('reads the command, positionals and options in both forms', () => {
    const args = parseArgs(['submit', '-', '--work-type', 'sum', '--chunk-size=100', '--watch', '--url', 'http://localhost:7071']);
    assert.equal(args.command, 'submit');
    assert.deepEqual(args.positional, ['-']);
    assert.deepEqual(Object.fromEntries(args.flags), { 'work-type': 'sum', 'chunk-size': '100', watch: true, url: 'http://localhost:7071' });
    assert.deepEqual(Object.fromEntries(parseArgs(['-h']).flags), { help: true });
    // After `--` everything is a positional, even what looks like an option.
    assert.deepEqual(parseArgs(['status', '--', '--odd-job']).positional, ['--odd-job']);
  });

  it('refuses unknown options, values on switches and options without a value (exit 2)', () => {
    usageError(['list', '--colour'], /^Unknown option --colour\. See --help\.$/);
    usageError(['list', '--json=yes'], /^--json takes no value\.$/);
    usageError(['list', '--status'], /^--status needs a value\.$/);
    usageError(['list', '--status='], /^--status needs a value\.$/);
    usageError(['submit', 'items.json', '--work-type', '--watch'], /^--work-type needs a value\.$/);
  });

  it('takes a value starting with one dash, as the hand-written parser did; one starting with two only after =', () => {
    const args = parseArgs(['status', 'job-1', '--key', '-Ab3_key==', '--chunk-size', '-5', '-h']);
    assert.deepEqual(Object.fromEntries(args.flags), { key: '-Ab3_key==', 'chunk-size': '-5', help: true });
    assert.deepEqual(args.positional, ['job-1']);
    assert.equal(parseArgs(['list', '--work-type=--odd']).flags.get('work-type'), '--odd');
    usageError(['list', '-x'], /^Unknown option -x\. See --help\.$/);
    usageError(['list', '--constructor'], /^Unknown option --constructor\. See --help\.$/);
  });
});
