/**
 * End-to-end, two instances of the real app with the project's host.json: the instance that runs a
 * job's deliver activity is SIGKILLed after the job's outcome is recorded (`final.json` written) and
 * while its send to the reply queue is held by its storage proxy, so the send never reaches storage.
 * Durable runs the activity again on the survivor (its message comes back after host.json's
 * `workItemQueueVisibilityTimeout`), which sends the outcome: the reply queue and the outcome stream
 * each get it, with the job id and the correlation id (docs/jobs.md, "Outcomes": at least once, a
 * kill between recording and sending included). The survivor is kept off the task hub's activity
 * queue until the kill, so the victim runs the job's activities.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { QueueServiceClient } from '@azure/storage-queue';
import { eventually } from 'devhost/testing';

import { type JobOutcome } from '../../shared/jobs/delivery/JobOutcome';
import { uniqueName } from '../support/env';
import { startStorageProxy } from '../support/storageProxy';
import { proxiedScenarios } from './support/realApp';

/** The activity's message comes back within 10 s of the kill, and the survivor polls and sends within a few more. */
const REPLIED_WITHIN_MS = 40_000;

describe('the instance delivering a job outcome is killed between recording it and sending it (shipped host.json)', () => {
  const scenarios = proxiedScenarios();

  it('the survivor runs the deliver activity again and the reply queue and the outcome stream get the outcome', async () => {
    const jobId = 'rk-reply';
    const replyQueue = uniqueName('rk-replies');
    const streamQueue = uniqueName('rk-outcomes');
    const { s, proxy } = await scenarios.start();
    Object.assign(s.extraEnv, { JOB_REPLY_QUEUES: replyQueue, JOB_OUTCOMES_QUEUE: streamQueue, DEVHOST_LOG_LEVEL: 'debug' });
    const survivorProxy = await startStorageProxy(s.conn);
    const activityQueue = `/${s.taskHub.toLowerCase()}-workitems/messages`;
    const offActivities = survivorProxy.refuse((r) => r.service === 'queue' && r.method === 'GET' && r.path.endsWith(activityQueue));
    try {
      const victim = await s.start(`${jobId}-victim`, proxy.connectionString);
      await s.leading(victim);
      const survivor = await s.start(`${jobId}-survivor`, survivorProxy.connectionString);
      const hold = proxy.hold((r) => r.service === 'queue' && r.method === 'POST' && r.path.endsWith(`/${replyQueue}/messages`));
      await s.submitByQueue({ jobId, workType: 'sum', items: [1, 2, 3, 4, 5], options: { chunkSize: 2 }, replyTo: replyQueue, correlationId: 'kill-1' });
      const held = await hold.within(60_000, 'the victim never sent the reply');
      // Recorded before the send: the outcome is there while the send is held.
      const final = await s.resultsBlob(`jobs/${jobId}/final.json`);
      assert.ok(final !== undefined, 'the outcome was recorded before the reply was sent');
      assert.equal((JSON.parse(final.text) as { status: string }).status, 'completed');
      const killedAt = Date.now();
      await victim.kill();
      assert.ok(held.clientGone || victim.child.signalCode === 'SIGKILL');
      offActivities.remove();

      const queues = QueueServiceClient.fromConnectionString(s.conn);
      const outcomeOn = (queue: string): Promise<JobOutcome> =>
        eventually(
          async () => {
            const client = queues.getQueueClient(queue);
            if (!(await client.exists())) return undefined;
            const peeked = await client.peekMessages({ numberOfMessages: 32 });
            const found = peeked.peekedMessageItems
              .map((m) => JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as JobOutcome)
              .find((o) => o.jobId === jobId);
            return found;
          },
          REPLIED_WITHIN_MS + 20_000,
          `the outcome of ${jobId} on ${queue}`,
        );
      const reply = await outcomeOn(replyQueue);
      const after = Date.now() - killedAt;
      console.log(`[diagnostic] ${jobId}: replied ${(after / 1000).toFixed(1)} s after the delivering instance was killed`);
      assert.equal(reply.status, 'completed');
      assert.equal(reply.correlationId, 'kill-1');
      assert.deepEqual(reply.result, { count: 5, sum: 15, min: 1, max: 5 });
      assert.deepEqual(await outcomeOn(streamQueue), reply);
      assert.ok(after <= REPLIED_WITHIN_MS, `replied ${after} ms after the kill; the bound is ${REPLIED_WITHIN_MS} ms`);
      // Sent by the survivor: the victim died holding its send.
      assert.ok(survivor.events('delivery.sent').some((e) => e.jobId === jobId && e.kind === 'reply'), 'the survivor sent the reply');
      assert.ok(!victim.events('delivery.sent').some((e) => e.jobId === jobId && e.kind === 'reply'), 'the victim never sent it');
      const view = await s.job(survivor, jobId);
      assert.equal((view as { delivery?: { replyTo?: { state: string } } } | undefined)?.delivery?.replyTo?.state, 'sent');
    } finally {
      offActivities.remove();
      await survivorProxy.close();
    }
  });
});
