/**
 * The intake's shared runs in the making (StartBatches): places reserved before the start records,
 * a run started once every place is settled (joined or released) or full, never for nobody, and
 * each joiner told whether its run started.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { StartBatches } from '../../../../shared/jobs/intake/StartBatches';
import { isBatchInstanceId } from '../../../../shared/jobs/jobIds';
import { type BatchState } from '../../../../shared/jobs/run/batchOrchestration';
import { smallRun } from '../support/smallRun';


function recorder(fail = false): { started: Array<{ id: string; jobs: string[] }>; start: (id: string, input: BatchState) => Promise<void> } {
  const started: Array<{ id: string; jobs: string[] }> = [];
  return {
    started,
    start: (id, input) => {
      started.push({ id, jobs: input.runs.map((r) => r.run.jobId) });
      return fail ? Promise.reject(new Error('Durable refused the start')) : Promise.resolve();
    },
  };
}

describe('StartBatches (small jobs started together share a run)', () => {
  it('starts a run once every reserved place has joined or been released, with the jobs that joined, in joining order', async () => {
    const r = recorder();
    const batches = new StartBatches(10, r.start);
    const [a, b, c] = [batches.reserve(), batches.reserve(), batches.reserve()];
    assert.ok(isBatchInstanceId(a));
    assert.equal(a, b);
    assert.equal(b, c);
    const joinedB = batches.join(b, smallRun('b'), undefined);
    batches.release(c);
    assert.equal(r.started.length, 0, 'a place still reserved holds the run back');
    const joinedA = batches.join(a, smallRun('a'), { itemCount: 1, chunkCount: 1, unstaged: true });
    await Promise.all([joinedA, joinedB]);
    assert.deepEqual(r.started, [{ id: a, jobs: ['b', 'a'] }]);
    // The next reservation opens a new run: the started one takes nobody more.
    const d = batches.reserve();
    assert.notEqual(d, a);
    await batches.join(d, smallRun('d'), undefined);
    assert.deepEqual(r.started.map((s) => s.jobs), [['b', 'a'], ['d']], 'a lone job does not wait for company');
  });

  it('gives out at most `size` places a run, starts none for a run whose places were all released, and fails every joiner when its start fails', async () => {
    const r = recorder(true);
    const batches = new StartBatches(2, r.start);
    const first = [batches.reserve(), batches.reserve()];
    const third = batches.reserve();
    assert.equal(first[0], first[1]);
    assert.notEqual(third, first[0], 'a full run gives out no more places');
    batches.release(third);
    assert.equal(r.started.length, 0, 'a run nobody joined is not started');
    const joins = first.map((id, i) => batches.join(id, smallRun(`j${i}`), undefined));
    for (const joined of joins) await assert.rejects(joined, /Durable refused the start/);
    assert.deepEqual(r.started.map((s) => s.jobs), [['j0', 'j1']]);
    await assert.rejects(batches.join(first[0] ?? '', smallRun('late'), undefined), /No shared run/);
  });
});
