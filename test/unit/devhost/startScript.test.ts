/** `npm start` options and the instances they produce. */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { FLEX_GROUPS } from '../../../scripts/flexShape';
import { chooseHost, parseStartArgs, planInstances } from '../../../scripts/start';

describe('npm start options', () => {
  it('defaults to one instance on 7071 with the shared host id', () => {
    const args = parseStartArgs([]);
    assert.deepEqual(planInstances(args), [{ port: 7071, instanceId: 'instance-1', hostId: 'leader-coordinator' }]);
  });

  it('runs several instances on consecutive ports sharing one host id', () => {
    assert.deepEqual(planInstances(parseStartArgs(['--port', '8000', '--instances=3'])), [
      { port: 8000, instanceId: 'instance-1', hostId: 'leader-coordinator' },
      { port: 8001, instanceId: 'instance-2', hostId: 'leader-coordinator' },
      { port: 8002, instanceId: 'instance-3', hostId: 'leader-coordinator' },
    ]);
  });

  it('gives each instance its own host id with --separate-apps', () => {
    const hostIds = planInstances(parseStartArgs(['--instances', '2', '--separate-apps'])).map((i) => i.hostId);
    assert.deepEqual(hostIds, ['leader-coordinator-1', 'leader-coordinator-2']);
  });

  it('picks the host: auto by default, --host devhost|func|extensions, --devhost as an alias', () => {
    assert.equal(parseStartArgs([]).host, 'auto');
    assert.equal(parseStartArgs(['--host', 'extensions']).host, 'extensions');
    assert.equal(parseStartArgs(['--host=func']).host, 'func');
    assert.equal(parseStartArgs(['--devhost']).host, 'devhost');
  });

  it('runs Flex Consumption\'s shape with --flex: one instance per scale group, two workers, one host id', () => {
    const plan = planInstances(parseStartArgs(['--flex', '--port', '9000']));
    assert.deepEqual(
      plan.map((i) => [i.port, i.instanceId, i.group, i.hostId]),
      [
        [9000, 'timer-1', 'timer', 'leader-coordinator'],
        [9001, 'durable-1', 'durable', 'leader-coordinator'],
        [9002, 'http-1', 'http', 'leader-coordinator'],
        [9003, 'worker-1', 'worker', 'leader-coordinator'],
        [9004, 'worker-2', 'worker', 'leader-coordinator'],
      ],
    );
    assert.throws(() => parseStartArgs(['--flex', '--instances', '3']), { name: 'StartError' });
    assert.throws(() => parseStartArgs(['--flex', '--host', 'func']), { name: 'StartError', message: /Core Tools/ });
  });

  it('gives every function file of functions/ to exactly one Flex scale group', () => {
    const files = readdirSync(join(__dirname, '..', '..', '..', 'functions')).filter((f) => f.endsWith('.js')).map((f) => f.replace(/\.js$/, '')).sort();
    const grouped = Object.values(FLEX_GROUPS).flatMap((g) => g.functions).sort();
    assert.deepEqual(grouped, files);
    for (const [group, { entry, functions }] of Object.entries(FLEX_GROUPS)) {
      const text = readFileSync(join(__dirname, '..', '..', '..', 'scripts', 'flex', entry), 'utf8');
      for (const fn of functions) assert.match(text, new RegExp(`functions/${fn}`), `${group} loads ${fn}`);
    }
  });

  it('rejects bad options with a message', () => {
    for (const argv of [['--host', 'azure'], ['--host'], ['--port', '0'], ['--instances', '0'], ['--instances', '17'], ['--port', '65535', '--instances', '2'], ['--bogus'], ['--host-id', 'Bad_Id'], ['--port']]) {
      assert.throws(() => parseStartArgs(argv), { name: 'StartError' }, argv.join(' '));
    }
  });

  it('chooses Core Tools, else the extensions host with a .NET SDK 8 or later, else the development host, saying why', () => {
    const func = { usable: true, reason: 'Core Tools 4.0.7030 found' };
    const noFunc = { usable: false, reason: '`func --version` could not run (ENOENT)' };
    const sdk10 = { version: '10.0.401', reason: '.NET SDK 10.0.401' };
    const sdk6 = { version: '6.0.428', reason: '.NET SDK 6.0.428' };
    const noSdk = { reason: '`dotnet --version` could not run (ENOENT)' };
    const never = (): never => assert.fail('a forced choice asked for a detection it does not need');
    assert.equal(chooseHost('auto', () => func, never).kind, 'func');
    const ext = chooseHost('auto', () => noFunc, () => sdk10);
    assert.equal(ext.kind, 'extensions');
    assert.match(ext.reason, /ENOENT.*\.NET SDK 10\.0\.401/);
    const old = chooseHost('auto', () => noFunc, () => sdk6);
    assert.equal(old.kind, 'devhost');
    assert.match(old.reason, /6\.0\.428 is older than 8/);
    const none = chooseHost('auto', () => noFunc, () => noSdk);
    assert.equal(none.kind, 'devhost');
    assert.match(none.reason, /dotnet --version/);
    assert.deepEqual(chooseHost('devhost', never, never), { kind: 'devhost', reason: '--host devhost given' });
    assert.equal(chooseHost('extensions', never, never).kind, 'extensions');
    assert.equal(chooseHost('func', () => func, never).kind, 'func');
    assert.throws(() => chooseHost('func', () => noFunc, never), { name: 'StartError', message: /Core Tools is not usable/ });
  });
});
