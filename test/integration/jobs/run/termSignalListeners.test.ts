/**
 * The 'abort' listeners on a leader term's signal (issue 48, item 5: a chaos run on the extensions
 * host printed 12 `MaxListenersExceededWarning: Possible EventTarget memory leak detected. 11 abort
 * listeners added to [AbortSignal]`). A real CoordinatorRuntime on a blob lease in Azurite runs the
 * app's coordination pass (jobCoordinationPass, the components the app builds) over a burst of
 * submissions, with the Durable backend of the development host: the term's signal is the one the
 * elector makes, handed to the pass as `ctx.signal` and by it to every storage request of the
 * intake's lanes, so the storage SDK adds one listener per request in flight (and removes it when
 * the request and its body end). What is asserted: those requests are many at once (more than
 * Node's default limit of 10), none is left once the work has ended, and no warning is printed.
 *
 * Later Node 22 releases (22.23 has it) give an AbortSignal no listener limit (nodejs/node#55816);
 * Node 20 and earlier 22 releases give it 10 and warn at the 11th, as the chaos run did. On a
 * Node without the limit this test gives the process's new signals that limit of 10
 * (`withOlderNodeSignalLimits`), so it asserts the same thing on every Node.
 */
import assert from 'node:assert/strict';
import { getEventListeners, getMaxListeners, setMaxListeners } from 'node:events';
import { after, before, describe, it } from 'node:test';

import { appRoot } from '../../../../shared/app/appRoot';
import { jobCoordinationPass } from '../../../../shared/jobs/intake/jobCoordinationPass';
import { encodeQueueMessage } from '../../../../shared/jobs/messageCodec';
import { BlobLeaseStore } from '../../../../shared/leader/BlobLeaseStore';
import { CoordinatorRuntime } from '../../../../shared/leader/CoordinatorRuntime';
import { memoryLogger } from '../../../../shared/observability/log';
import { uniqueName } from '../../../support/env';
import { eventually, type JobsHost, startJobsHost } from '../support/jobsHost';

/** The listener limit Node 20 (and earlier Node 22 releases) give every EventTarget, AbortSignals included. */
const OLDER_NODE_LIMIT = 10;

/**
 * On a Node whose AbortSignals have no listener limit, gives the signals made from now on
 * (AbortController, AbortSignal.timeout, AbortSignal.any) the limit older Nodes give them, until the
 * returned function is called. A limit the code under test sets on its own signals overrides it, as
 * it would on those Nodes.
 */
function withOlderNodeSignalLimits(): () => void {
  if (getMaxListeners(new AbortController().signal) !== 0) return () => undefined;
  const Plain = globalThis.AbortController;
  const timeout = AbortSignal.timeout.bind(AbortSignal);
  const any = AbortSignal.any.bind(AbortSignal);
  const limited = (signal: AbortSignal): AbortSignal => {
    setMaxListeners(OLDER_NODE_LIMIT, signal);
    return signal;
  };
  globalThis.AbortController = class extends Plain {
    constructor() {
      super();
      limited(this.signal);
    }
  };
  AbortSignal.timeout = (ms: number): AbortSignal => limited(timeout(ms));
  AbortSignal.any = (signals: AbortSignal[]): AbortSignal => limited(any(signals));
  return () => {
    globalThis.AbortController = Plain;
    AbortSignal.timeout = timeout;
    AbortSignal.any = any;
  };
}

describe('a leader term\'s signal under a burst (development host, Durable backend, Azurite)', () => {
  let h: JobsHost;

  before(async () => {
    h = await startJobsHost('termsig');
  });
  after(async () => {
    await h.stop();
  });

  it('carries more than 10 requests at once through a burst, none left once the work ended, and no MaxListenersExceededWarning', async () => {
    const restore = withOlderNodeSignalLimits();
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => {
      if (warning.name === 'MaxListenersExceededWarning') warnings.push(`${warning.message}\n${warning.stack ?? ''}`);
    };
    process.on('warning', onWarning);
    let runtime: CoordinatorRuntime | undefined;
    try {
      const c = appRoot().jobs;
      const n = 60;
      await h.jobsQueue.createIfNotExists();
      for (let i = 0; i < n; i++) await h.jobsQueue.sendMessage(encodeQueueMessage({ jobId: `term-signal-${i}`, workType: 'noop', items: [i] }));

      const coordination = jobCoordinationPass(c, () => h.client);
      const signals = new Set<AbortSignal>();
      /** Listeners on the term's signal as each pass starts: the runtime's own waits, nothing of earlier passes. */
      const atStart: number[] = [];
      let most = 0;
      let received = 0;
      runtime = new CoordinatorRuntime({
        elector: {
          store: BlobLeaseStore.fromConnection(c.settings.storage, uniqueName('termsig-lease'), 'leader', 2_000),
          holder: 'termsig',
          leaseSeconds: 15,
          renewDeadlineMs: 10_000,
          retryPeriodMs: 500,
          requestTimeoutMs: 2_000,
          drainTimeoutMs: 3_000,
          logger: memoryLogger('termsig'),
        },
        pass: async (ctx) => {
          signals.add(ctx.signal);
          const count = (): number => getEventListeners(ctx.signal, 'abort').length;
          atStart.push(count());
          // Sampled between the pass's awaits: the requests in flight then, each with its listener.
          const sampler = setInterval(() => {
            most = Math.max(most, count());
          }, 1);
          try {
            received += (await coordination(ctx))?.received ?? 0;
          } finally {
            most = Math.max(most, count());
            clearInterval(sampler);
          }
        },
        passIntervalMs: 500,
        stallTimeoutMs: 30_000,
        logger: memoryLogger('termsig'),
      });
      runtime.offer();

      await eventually(() => Promise.resolve(received >= n ? true : undefined), 90_000, `the burst of ${n} taken`);
      const term = [...signals][0];
      assert.ok(term !== undefined && signals.size === 1, `one term for the whole burst (${signals.size})`);
      const baseline = atStart[0] ?? 0;
      // The work the burst began (its lanes, first windows, table writes) ends: passes then start with the baseline again, and keep it.
      const settledFrom = await eventually(() => {
        const from = atStart.length;
        return Promise.resolve(from > 1 && atStart[from - 1] === baseline ? from : undefined);
      }, 30_000, `a pass that starts with ${baseline} listeners on the term's signal (the last ones: ${atStart.slice(-5).join(', ')})`);
      await eventually(() => Promise.resolve(atStart.length >= settledFrom + 3 ? true : undefined), 30_000, 'three more passes');
      assert.deepEqual(atStart.slice(settledFrom - 1), atStart.slice(settledFrom - 1).map(() => baseline), `listeners at each pass's start: ${atStart.join(', ')}`);
      assert.equal(term.aborted, false);
      assert.ok(most > OLDER_NODE_LIMIT, `the burst had more than ${OLDER_NODE_LIMIT} requests at once on the term's signal (most: ${most})`);
      assert.deepEqual(warnings, []);
    } finally {
      await runtime?.stop();
      process.off('warning', onWarning);
      restore();
    }
  });
});
