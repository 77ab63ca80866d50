/**
 * The work queue's shared messages (shared/jobs/dispatch/QueueWorkQueue.ts) against the run's Azurite
 * through the real queue client: sends of a few chunks that come while one is on its way go together,
 * up to four chunks to a message, whatever their jobs; a full send never waits; every send answers
 * for itself (a shared message that fails fails only the sends in it); a send aborted while it waits
 * is never sent. A policy on the sender's client counts its requests, can hold the first send until the
 * test lets it go, and can refuse the message that carries a given job.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { newPipeline, QueueClient, type RequestPolicy, type RequestPolicyFactory } from '@azure/storage-queue';

import { QueueWorkQueue } from '../../../../shared/jobs/dispatch/QueueWorkQueue';
import { parseWorkItemDelivery, type WorkItemMessage } from '../../../../shared/jobs/messageCodec';
import { azuriteConnectionString, uniqueName } from '../../../support/env';

const PER_MESSAGE = 4;

interface Rig {
  readonly queue: QueueWorkQueue;
  /** Message sends the sender's client made so far (the queue's creation not counted). */
  readonly sent: () => number;
  /** Holds the next send request until `release` (answers once that request is held). */
  hold(): Promise<void>;
  release(): void;
  /** Fails (before the request goes out) every send whose message carries this job's chunks. */
  refuse(jobId: string): void;
  /** Every message on the queue, as the worker would read it: one array of chunks a message. */
  drain(): Promise<WorkItemMessage[][]>;
}

async function rig(prefix: string): Promise<Rig> {
  const name = uniqueName(prefix);
  let sent = 0;
  let refused: string | undefined;
  let holding: { readonly held: () => void; readonly gate: Promise<void> } | undefined;
  let heldNow: (() => void) | undefined;
  let release: () => void = () => undefined;
  const holdAndCount: RequestPolicyFactory = {
    create: (next: RequestPolicy): RequestPolicy => ({
      sendRequest: async (request) => {
        if (request.method !== 'POST') return next.sendRequest(request);
        sent += 1;
        const body = typeof request.body === 'string' ? request.body : '';
        const text = /<MessageText>([^<]*)<\/MessageText>/.exec(body)?.[1] ?? '';
        const decoded = Buffer.from(text, 'base64').toString('utf8');
        const hold = holding;
        if (hold !== undefined) {
          holding = undefined;
          hold.held();
          await hold.gate;
        }
        if (refused !== undefined && decoded.includes(`"jobId":"${refused}"`)) throw new Error('refused by the test');
        return next.sendRequest(request);
      },
    }),
  };
  const plain = new QueueClient(azuriteConnectionString(), name);
  const pipeline = newPipeline(plain['credential'], { retryOptions: { maxTries: 1 } });
  pipeline.factories.push(holdAndCount);
  const client = new QueueClient(plain.url, pipeline);
  await client.create();
  const reader = new QueueClient(azuriteConnectionString(), name);
  return {
    queue: new QueueWorkQueue(client, PER_MESSAGE),
    sent: () => sent,
    hold: () =>
      new Promise<void>((resolve) => {
        heldNow = resolve;
        holding = {
          held: () => heldNow?.(),
          gate: new Promise<void>((open) => {
            release = open;
          }),
        };
      }),
    release: () => release(),
    refuse: (jobId) => {
      refused = jobId;
    },
    drain: async () => {
      const out: WorkItemMessage[][] = [];
      for (;;) {
        const { receivedMessageItems } = await reader.receiveMessages({ numberOfMessages: 32 });
        if (receivedMessageItems.length === 0) return out;
        for (const m of receivedMessageItems) {
          out.push(parseWorkItemDelivery(JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8'))));
          await reader.deleteMessage(m.messageId, m.popReceipt);
        }
      }
    },
  };
}

const chunk = (jobId: string, n = 0): WorkItemMessage => ({
  v: 1,
  jobId,
  chunk: n,
  workType: 'sum',
  firstIndex: n * 20,
  itemCount: 2,
  attempts: 3,
  epoch: 1,
  dispatch: 1,
  items: [n, 1],
});

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Lets the sends made so far reach the queue: they wait (the sender is busy) or are on their way. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await tick();
}

describe('the work queue\'s shared messages', () => {
  it('sends chunks of many jobs that pile up behind one send four to a message, each chunk once', async () => {
    const r = await rig('wqshare');
    const jobs = Array.from({ length: 41 }, (_, i) => `j-share-${i}`);
    await Promise.all(jobs.map((jobId) => r.queue.send([chunk(jobId)])));
    const messages = await r.drain();
    const chunks = messages.flat().map((m) => m.jobId).sort();
    assert.deepEqual(chunks, [...jobs].sort(), 'every job\'s chunk is on the queue once');
    // The first goes alone at once; the 40 behind it go four to a message (one message a send: 41).
    assert.ok(messages.length <= 11, `41 one-chunk sends took ${messages.length} messages`);
    assert.equal(r.sent(), messages.length, 'one request a message');
    assert.ok(messages.every((m) => m.length <= PER_MESSAGE), 'no message carries more than four chunks');
    assert.deepEqual(r.queue.counts(), { messages: messages.length, sends: 41 });
  });

  it('sends a full send at once, even while another waits on the queue', async () => {
    const r = await rig('wqfull');
    const held = r.hold();
    const first = r.queue.send([chunk('j-full-lone')]);
    await held;
    let behindDone = false;
    const behind = r.queue.send([chunk('j-full-behind')]).then(() => {
      behindDone = true;
    });
    await r.queue.send([0, 1, 2, 3].map((n) => chunk('j-full-four', n)));
    await settle();
    assert.equal(behindDone, false, 'a one-chunk send waits for the send on its way');
    r.release();
    await Promise.all([first, behind]);
    const messages = await r.drain();
    assert.equal(messages.length, 3);
    assert.deepEqual(messages.find((m) => m.length === PER_MESSAGE)?.map((m) => m.jobId), Array(4).fill('j-full-four'));
  });

  it('fails only the sends of a shared message that is refused, and never sends one aborted while it waits', async () => {
    const r = await rig('wqfail');
    r.refuse('j-bad');
    const held = r.hold();
    const first = r.queue.send([chunk('j-first')]);
    await held;
    const aborted = new AbortController();
    const names = ['j-a', 'j-bad', 'j-gone', 'j-b', 'j-c', 'j-d'];
    const outcomes = names.map((jobId) =>
      r.queue.send([chunk(jobId)], jobId === 'j-gone' ? aborted.signal : undefined).then(
        () => 'sent',
        (err: unknown) => (err instanceof Error ? err.message : String(err)),
      ),
    );
    await settle();
    aborted.abort(new Error('stopped waiting'));
    r.release();
    await first;
    const answered = await Promise.all(outcomes);
    // The round after the first: [j-a, j-bad, j-b, j-c] refused together, [j-d] alone; j-gone never sent.
    assert.equal(answered[2], 'stopped waiting');
    assert.deepEqual(
      names.filter((_, i) => answered[i] === 'sent'),
      ['j-d'],
      `outcomes: ${JSON.stringify(answered)}`,
    );
    const stored = (await r.drain()).flat().map((m) => m.jobId).sort();
    assert.deepEqual(stored, ['j-d', 'j-first']);
  });
});
