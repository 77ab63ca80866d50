/** The chaos plan: the same seed gives the same faults and jobs, results are exact, options are checked. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { parseChaosArgs } from '../../../scripts/chaos';
import { buildPlan, exactSum, parseStepFaults, SHORT_STEP_FAULTS } from '../../chaos/chaosPlan';
import { START_STEPS } from '../../chaos/ChaosRecord';

describe('chaos plan', () => {
  it('is the same for the same seed and differs for another', () => {
    const a = buildPlan({ mode: 'long', seed: 42, faultPhaseMs: 300_000 });
    assert.deepEqual(buildPlan({ mode: 'long', seed: 42, faultPhaseMs: 300_000 }), a);
    assert.notDeepEqual(buildPlan({ mode: 'long', seed: 43, faultPhaseMs: 300_000 }).faults, a.faults);
  });

  it('spreads a long run over every kind of fault and cycles step faults through every step', () => {
    const plan = buildPlan({ mode: 'long', seed: 7, faultPhaseMs: 30 * 60_000 });
    assert.deepEqual(new Set(plan.faults.map((f) => f.kind)), new Set(['kill', 'pause', 'term', 'restart', 'blackhole', 'reset']));
    assert.deepEqual(new Set(plan.faults.flatMap((f) => (f.step === undefined ? [] : [f.step]))), new Set(START_STEPS));
    assert.ok(plan.faults.every((f) => f.at < 30 * 60_000));
    for (const fault of plan.faults.filter((f) => f.step !== undefined)) assert.equal(plan.triggerJobs[fault.id]?.via, 'queue');
    assert.ok(plan.jobs.some((j) => j.expect.status === 'rejected'));
  });

  it('gives the short mode its three step faults at the leader, or the ones asked for', () => {
    const plan = buildPlan({ mode: 'short', seed: 1 });
    assert.deepEqual(
      plan.faults.filter((f) => f.step !== undefined).map((f) => ({ kind: f.kind, step: f.step })),
      SHORT_STEP_FAULTS,
    );
    const asked = buildPlan({ mode: 'short', seed: 1, stepFaults: [{ kind: 'kill', step: 'start-message' }] });
    assert.deepEqual(
      asked.faults.filter((f) => f.step !== undefined).map((f) => `${f.kind}@${f.step}`),
      ['kill@start-message', 'kill@start-message', 'kill@start-message'],
    );
  });

  it('computes sums exactly, beyond 2^53 as decimal strings', () => {
    assert.deepEqual(exactSum([1, -2, '9007199254740993']), { count: 3, sum: '9007199254740992', min: -2, max: '9007199254740993' });
  });

  it('parses options and refuses bad ones', () => {
    assert.deepEqual(parseChaosArgs(['--short', '--seed', '5'], () => 9, {}), {
      host: 'extensions',
      mode: 'short',
      seed: 5,
      instances: 3,
      separateApps: false,
      flex: false,
      minutes: 8,
      quiet: false,
    });
    const long = parseChaosArgs(['--minutes=30', '--separate-apps', '--step-faults', 'kill@start-message,pause@start-read'], () => 9);
    assert.equal(long.mode, 'long');
    assert.equal(long.seed, 9);
    assert.equal(long.instances, 4);
    assert.deepEqual(long.stepFaults, [
      { kind: 'kill', step: 'start-message' },
      { kind: 'pause', step: 'start-read' },
    ]);
    const flex = parseChaosArgs(['--short', '--flex'], () => 9, {});
    assert.equal(flex.flex, true);
    assert.equal(flex.instances, 5, "Flex Consumption's shape: timer-1, durable-1, http-1, worker-1, worker-2");
    const bad = [['--seed', 'x'], ['--instances', '1'], ['--short', '--minutes', '5'], ['--bogus'], ['--step-faults', 'nap@start-read']];
    bad.push(['--host', 'func'], ['--host'], ['--flex', '--instances', '3'], ['--flex', '--separate-apps']);
    for (const argv of bad) {
      assert.throws(() => parseChaosArgs(argv, () => 9, {}), { name: 'ChaosArgsError' }, argv.join(' '));
    }
    assert.match(parseStepFaults('kill@nowhere') as string, /the step must be one of/);
  });

  it('runs on the host --host names, else on the one E2E_HOST names, as the end-to-end tests do', () => {
    assert.equal(parseChaosArgs(['--short', '--host', 'extensions'], () => 9, {}).host, 'extensions');
    assert.equal(parseChaosArgs(['--short', '--host=devhost'], () => 9, { E2E_HOST: 'extensions' }).host, 'devhost');
    assert.equal(parseChaosArgs(['--short'], () => 9, { E2E_HOST: 'extensions' }).host, 'extensions');
    assert.equal(parseChaosArgs(['--short'], () => 9, { E2E_HOST: '' }).host, 'extensions');
    assert.equal(parseChaosArgs(['--short'], () => 9, {}).host, 'extensions');
    assert.equal(parseChaosArgs(['--short'], () => 9, { E2E_HOST: 'devhost' }).host, 'devhost');
    assert.throws(() => parseChaosArgs(['--short'], () => 9, { E2E_HOST: 'func' }), {
      name: 'ChaosArgsError',
      message: /E2E_HOST must be devhost or extensions/,
    });
  });
});
