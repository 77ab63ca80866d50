/**
 * Benchmark: the job pipeline's throughput (items/s) and storage cost (transactions per item) for
 * a `noop` job, against two baselines measured in the same run on the same Azurite:
 *
 * - raw queue: send, receive (batches of 32) and delete chunk-sized messages with the SDK alone,
 *   what Azurite itself can carry for the work-items traffic;
 * - one Durable activity per item: a real fan-out/fan-in orchestration (bench/fixtures/fanOutApp.ts,
 *   one activity call per item, `Task.all`) run on a host process, the same Durable
 *   backend the app runs on, with the shipped host.json.
 *
 * The app runs black-box: one host process (the extensions host unless --host devhost) as `npm start` runs it (shipped host.json and
 * settings), the job submitted by POST /api/jobs with its items in a blob and followed by
 * GET /api/jobs/{id}, so whichever pipeline is built is what is measured. Every storage request of
 * the host processes goes through a counting HTTP proxy in front of Azurite, so transaction counts
 * are requests, not estimates (they include the bench's own status polls, reported separately).
 *
 * The job and the raw baseline are each run `--runs` times (default 3) and the medians compared: one
 * job's time varies by a third from run to run on a 2-core machine. A job's time runs from its POST
 * to its recorded completion (the status's `updatedAt`, written with the final summary); the time to
 * a status poll (every 250 ms) seeing it is printed too (`updatedAt` is the summary's time, or
 * Durable's completion in whole seconds when that is later). A job's storage transactions are those
 * between its POST and the next job's: its run's last Durable episode may fall in the next one's.
 *
 * Run: `npm run bench -- jobs-throughput [--items 100000] [--chunk-size 500 (the app's default)] [--activities 2000] [--runs 3]`.
 */
import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';

import { QueueServiceClient } from '@azure/storage-queue';
import { connectionStringFor } from 'devhost/testing';

import { JOB_OPTION_DEFAULTS } from '../shared/jobs/jobLimits';
import { type AppCluster, type BenchHost, jobTimeline, runJob, sleep, startAppCluster, submitJob, uploadItems, waitForJob } from './appCluster';
import { type Bench, type BenchContext } from './index';

interface Counter {
  total: number;
  byService: Record<string, number>;
  /** Requests whose path contains the task hub's name (the Durable backend's own state). */
  durable: number;
  /** Messages put on the task hub's activity (work-item) queue: one per activity call. */
  activityMessages: number;
  /** Requests by kind: service, method and the path with names and numbers folded (`kindOf`), for `--breakdown`. */
  byKind: Map<string, number>;
}

/**
 * A request's kind: `blob GET <container>/jobs/*\/start.json`; job ids, numbers and GUIDs folded to `*`,
 * the comp= query kept (a lease, a listing and a metadata write are different operations).
 */
export function kindOf(service: string, method: string, url: string, hub: string): string {
  const [path = '', query = ''] = url.split('?');
  const comp = new URLSearchParams(query).get('comp');
  // Table entity paths name the row: `table(PartitionKey='jobs',RowKey='...')` folds to `table(*)`.
  const parts = path.replace(/\(.*\)/, '(*)').split('/').filter((p) => p !== '').slice(1); // drop the account
  const folded = parts.map((p, i) => {
    if (i === 0) return hub !== '' && p.toLowerCase().startsWith(hub.toLowerCase()) ? `<hub>${p.slice(hub.length)}` : p.replace(/[0-9a-f]{6,}$/i, '*');
    return foldName(p);
  });
  // A listing's prefix, folded the same way (`jobs/*/results/*`): which listing it is.
  const prefix = comp === 'list' ? new URLSearchParams(query).get('prefix') : null;
  const listed = prefix === null || prefix === '' ? '' : ` prefix=${prefix.split('/').map((p) => (p === '' ? p : foldName(p))).join('/')}`;
  return `${service} ${method} ${folded.join('/')}${comp === null ? '' : ` comp=${comp}`}${listed}`;
}

/** A name's part folded when it is a number, an id or a generated name (`kindOf`). */
function foldName(part: string): string {
  return /^[a-z]?[0-9]+-?[0-9]*(\.json)?$|^[0-9a-f-]{20,}|^(job-)?([thq][0-9]+(c[0-9]+)?|f[bk])-[0-9]+/i.test(part) ? '*' : part;
}

/** The `limit` most frequent kinds of request, a line each: count per job (of `n`), then the kind (`--breakdown`). */
export function byKindPerJob(counter: Counter, n: number, limit: number): string {
  const top = [...counter.byKind].sort((a, b) => b[1] - a[1]).slice(0, limit);
  return top.map(([kind, count]) => `  ${(count / n).toFixed(2).padStart(7)}  ${kind}`).join('\n');
}

/** A counting HTTP proxy per storage service. */
export async function countingProxy(target: { blob: number; queue: number; table: number }, taskHub: () => string): Promise<{ ports: { blob: number; queue: number; table: number }; counter: Counter; reset(): void; close(): Promise<void> }> {
  const counter: Counter = { total: 0, byService: {}, durable: 0, activityMessages: 0, byKind: new Map() };
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const servers: Server[] = [];
  const ports: Record<string, number> = {};
  for (const [service, port] of Object.entries(target)) {
    const server = createServer((req, res) => {
      counter.total += 1;
      counter.byService[service] = (counter.byService[service] ?? 0) + 1;
      const hub = taskHub().toLowerCase();
      const path = (req.url ?? '').toLowerCase();
      const kind = kindOf(service, req.method ?? '?', req.url ?? '', hub);
      counter.byKind.set(kind, (counter.byKind.get(kind) ?? 0) + 1);
      if (hub !== '' && path.includes(hub)) {
        counter.durable += 1;
        if (service === 'queue' && req.method === 'POST' && path.includes(`${hub}-workitems`)) counter.activityMessages += 1;
      }
      const upstream = httpRequest({ host: '127.0.0.1', port, method: req.method, path: req.url, headers: req.headers, agent }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      upstream.on('error', () => {
        res.writeHead(502);
        res.end();
      });
      req.pipe(upstream);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    ports[service] = (server.address() as AddressInfo).port;
    servers.push(server);
  }
  return {
    ports: { blob: ports.blob ?? 0, queue: ports.queue ?? 0, table: ports.table ?? 0 },
    counter,
    reset() {
      counter.total = 0;
      counter.byService = {};
      counter.durable = 0;
      counter.activityMessages = 0;
      counter.byKind = new Map();
    },
    async close() {
      await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
      agent.destroy();
    },
  };
}

export interface JobsThroughputFigures {
  readonly items: number;
  readonly chunkSize: number;
  readonly chunks: number;
  /** Jobs measured, and raw-queue baselines (one before the jobs, each); figures are medians. */
  readonly runs: number;
  readonly job: {
    /** POST to the job's recorded completion (its status's `updatedAt`, written with the final summary). */
    readonly seconds: number;
    readonly itemsPerSecond: number;
    /** POST to a status poll (every 250 ms) seeing completed. */
    readonly secondsSeen: number;
    readonly itemsPerSecondSeen: number;
    /** Every run's POST -> recorded completion, in seconds, in run order. */
    readonly allSeconds: readonly number[];
    readonly transactions: number;
    readonly transactionsPerItem: number;
    readonly transactionsPerChunk: number;
    readonly byService: Record<string, number>;
    readonly durableTransactions: number;
    readonly activityCalls: number;
    /** The bench's GET /api/jobs/{id} polls during the median job, and the storage transactions one poll costs. */
    readonly polls: number;
    readonly transactionsPerPoll: number;
    /** The median job's time: ms from the POST to the first log line of each step, its recorded completion, and the status poll that saw it. */
    readonly breakdown: string;
  };
  readonly rawQueue: {
    readonly messages: number;
    readonly messagesPerSecond: number;
    readonly itemsPerSecondEquivalent: number;
    readonly transactionsPerMessage: number;
    readonly allSeconds: readonly number[];
  };
  readonly activityPerItem: {
    readonly activities: number;
    readonly seconds: number;
    readonly itemsPerSecond: number;
    readonly transactions: number;
    readonly transactionsPerItem: number;
    readonly durableTransactions: number;
    readonly activityMessages: number;
    readonly polls: number;
  };
}

/** The service ports of an Azurite connection string (`...Endpoint=http://127.0.0.1:<port>/...`). */
export function endpointPorts(connectionString: string): { blob: number; queue: number; table: number } {
  const port = (name: string): number => {
    const match = new RegExp(`${name}Endpoint=https?://[^:/;]+:(\\d+)`, 'i').exec(connectionString);
    if (match?.[1] === undefined) throw new Error(`The connection string has no ${name}Endpoint with a port.`);
    return Number(match[1]);
  };
  return { blob: port('Blob'), queue: port('Queue'), table: port('Table') };
}

/** Storage transactions of `count` status GETs of a finished job (what the bench's polling costs). */
async function pollCost(cluster: AppCluster, proxy: { counter: Counter }, path: string, count = 10): Promise<number> {
  const before = proxy.counter.total;
  for (let i = 0; i < count; i++) await cluster.call('GET', path);
  return round((proxy.counter.total - before) / count);
}

export async function runJobsThroughput(
  connectionString: string,
  options: { items: number; chunkSize: number; activities: number; runs: number; note: BenchContext['note']; host: BenchHost },
): Promise<JobsThroughputFigures> {
  const { items, chunkSize, activities, runs, note } = options;
  let hubName = '';
  const proxy = await countingProxy(endpointPorts(connectionString), () => hubName);
  const conn = connectionStringFor('127.0.0.1', proxy.ports.blob, proxy.ports.queue, proxy.ports.table);
  const queues = QueueServiceClient.fromConnectionString(conn);
  let cluster: AppCluster | undefined;
  try {
    // Baseline: the raw queue traffic of one message per chunk, with the SDK alone, `runs` times.
    const chunks = Math.ceil(items / chunkSize);
    const runId = Math.random().toString(36).slice(2, 8);
    const raw = queues.getQueueClient(`bench-raw-${runId}`);
    await raw.create();
    // A chunk-sized message like the pipeline's (base64 JSON, the host's encoding).
    const body = Buffer.from(JSON.stringify({ v: 1, jobId: 'bench', chunk: 0, items: Array.from({ length: chunkSize }, (_, i) => i) }), 'utf8').toString('base64');
    const rawMessages = Math.max(100, Math.min(chunks, 1_000));
    const rawRuns: number[] = [];
    let rawTransactions = 0;
    for (let run = 0; run < runs; run++) {
      proxy.reset();
      const rawStart = performance.now();
      for (let i = 0; i < rawMessages; i += 16) await Promise.all(Array.from({ length: Math.min(16, rawMessages - i) }, () => raw.sendMessage(body)));
      let received = 0;
      while (received < rawMessages) {
        const batch = await raw.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 60 });
        received += batch.receivedMessageItems.length;
        await Promise.all(batch.receivedMessageItems.map((m) => raw.deleteMessage(m.messageId, m.popReceipt)));
      }
      rawRuns.push((performance.now() - rawStart) / 1000);
      rawTransactions += proxy.counter.total;
    }
    const rawSeconds = median(rawRuns);
    rawTransactions /= runs;
    await raw.delete();

    // The job pipeline: one instance of the app, black-box, `runs` jobs one after the other.
    note(`jobs-throughput: raw queue done; the app on one instance, ${runs} noop jobs of ${items} items in ${chunks} chunks`);
    cluster = await startAppCluster(conn, { instances: 1, label: 'tp', host: options.host });
    hubName = cluster.names.taskHub;
    await cluster.leader();
    const itemsBlob = await uploadItems(cluster, 'items.json', Array.from({ length: items }, (_, i) => i));
    // Warm the app (containers, queues, first orchestration) with a tiny job, then measure.
    await runJob(cluster, { jobId: 'bench-warmup', workType: 'noop', items: [1, 2, 3] }, 120_000);
    const jobRuns: JobRun[] = [];
    const c: Counter = { total: 0, byService: {}, durable: 0, activityMessages: 0, byKind: new Map() };
    for (let run = 1; run <= runs; run++) {
      const jobId = `bench-job-${run}`;
      proxy.reset();
      const postedEpochMs = Date.now();
      const jobStart = await submitJob(cluster, { jobId, workType: 'noop', itemsBlob, options: { chunkSize } });
      const job = await waitForJob(cluster, jobId, 10 * 60_000, { pollMs: 250, note });
      if (job.view.status !== 'completed' || (job.view.result as { count?: number } | undefined)?.count !== items) {
        throw new Error(`The benchmark job did not complete exactly: ${JSON.stringify(job.view)}`);
      }
      const recordedMs = Date.parse(String(job.view.updatedAt)) - postedEpochMs;
      const marks = jobTimeline(cluster, jobId, postedEpochMs, ['job.submitted', 'intake.started', 'job.planned', 'workitem.done', 'job.aggregated'], ['workitem.done']);
      const breakdown = [
        ...Object.entries(marks).map(([event, ms]) => `${event} ${ms === undefined ? '-' : Math.round(ms)}`),
        `recorded ${Math.round(recordedMs)}`,
        `status seen ${Math.round(job.finishedAt - jobStart)}`,
      ].join(', ');
      note(`jobs-throughput: job ${run}/${runs}, ms from the POST: ${breakdown}`);
      jobRuns.push({ seenSeconds: (job.finishedAt - jobStart) / 1000, recordedSeconds: recordedMs / 1000, polls: job.polls, breakdown });
      c.total += proxy.counter.total;
      c.durable += proxy.counter.durable;
      c.activityMessages += proxy.counter.activityMessages;
      for (const [k, v] of Object.entries(proxy.counter.byService)) c.byService[k] = (c.byService[k] ?? 0) + v;
    }
    // The median job (with an even count, the run nearest the median) gives the breakdown.
    const recordedMedian = median(jobRuns.map((r) => r.recordedSeconds));
    const middle = [...jobRuns].sort((a, b) => Math.abs(a.recordedSeconds - recordedMedian) - Math.abs(b.recordedSeconds - recordedMedian))[0];
    if (middle === undefined) throw new Error('no job ran');
    const perPoll = await pollCost(cluster, proxy, `/api/jobs/bench-job-${runs}`);
    await cluster.stop();
    cluster = undefined;

    // One Durable activity per item: the fan-out/fan-in fixture on the same Durable backend and Azurite.
    note(`jobs-throughput: a fan-out/fan-in orchestration of ${activities} activities (one per item)`);
    cluster = await startAppCluster(conn, { instances: 1, label: 'fan', host: options.host, main: 'bench/fixtures/fanOutApp.js' });
    hubName = cluster.names.taskHub;
    const fanOut = async (n: number): Promise<{ seconds: number; polls: number }> => {
      const from = performance.now();
      const started = await cluster?.call('POST', `/api/fanout?items=${n}`);
      const id = String(started?.json.id);
      if (started?.status !== 202) throw new Error(`fan-out start answered ${String(started?.status)}: ${JSON.stringify(started?.json)}`);
      let polls = 0;
      let lastNote = from;
      for (;;) {
        polls += 1;
        const status = (await cluster?.call('GET', `/api/fanout/${id}`))?.json ?? {};
        if (status.runtimeStatus === 'Completed') {
          const count = (status.output as { count?: unknown } | undefined)?.count;
          if (count !== n) throw new Error(`fan-out of ${n} answered ${JSON.stringify(status.output)}`);
          return { seconds: (performance.now() - from) / 1000, polls };
        }
        if (!['Pending', 'Running', undefined].includes(status.runtimeStatus as string | undefined)) throw new Error(`fan-out ended ${JSON.stringify(status)}`);
        if (performance.now() - from > 10 * 60_000) throw new Error(`fan-out of ${n} not done in 10 minutes`);
        if (performance.now() - lastNote > 15_000) {
          lastNote = performance.now();
          note(`jobs-throughput: fan-out ${String(status.runtimeStatus)} after ${round((lastNote - from) / 1000, 0)} s`);
        }
        await sleep(250);
      }
    };
    await fanOut(3);
    proxy.reset();
    const fan = await fanOut(activities);
    const f = { ...proxy.counter };
    return {
      items,
      chunkSize,
      chunks,
      runs,
      job: {
        seconds: round(recordedMedian),
        itemsPerSecond: Math.round(items / recordedMedian),
        secondsSeen: round(median(jobRuns.map((r) => r.seenSeconds))),
        itemsPerSecondSeen: Math.round(items / median(jobRuns.map((r) => r.seenSeconds))),
        allSeconds: jobRuns.map((r) => round(r.recordedSeconds)),
        // Per job (the sums over the runs, divided by them).
        transactions: Math.round(c.total / runs),
        transactionsPerItem: round(c.total / runs / items, 4),
        transactionsPerChunk: round(c.total / runs / chunks),
        byService: Object.fromEntries(Object.entries(c.byService).map(([k, v]) => [k, Math.round(v / runs)])),
        durableTransactions: Math.round(c.durable / runs),
        activityCalls: round(c.activityMessages / runs, 1),
        polls: middle.polls,
        transactionsPerPoll: perPoll,
        breakdown: middle.breakdown,
      },
      rawQueue: {
        messages: rawMessages,
        messagesPerSecond: Math.round(rawMessages / rawSeconds),
        itemsPerSecondEquivalent: Math.round((rawMessages * chunkSize) / rawSeconds),
        transactionsPerMessage: round(rawTransactions / rawMessages),
        allSeconds: rawRuns.map((r) => round(r)),
      },
      activityPerItem: {
        activities,
        seconds: round(fan.seconds),
        itemsPerSecond: Math.round(activities / fan.seconds),
        transactions: f.total,
        transactionsPerItem: round(f.total / activities),
        durableTransactions: f.durable,
        activityMessages: f.activityMessages,
        polls: fan.polls,
      },
    };
  } finally {
    await cluster?.stop();
    await proxy.close();
  }
}

interface JobRun {
  readonly seenSeconds: number;
  readonly recordedSeconds: number;
  readonly polls: number;
  readonly breakdown: string;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function formatJobsThroughput(f: JobsThroughputFigures): string[] {
  const a = f.activityPerItem;
  const j = f.job;
  const ratio = (x: number, y: number): string => (y === 0 ? '-' : `${round(x / y, 2)}x`);
  return [
    `noop job of ${f.items} items in ${f.chunks} chunks of ${f.chunkSize}, submitted by HTTP with its items in a blob, on one instance (shipped host.json),`,
    `${f.runs} jobs one after the other and ${f.runs} raw-queue runs before them: medians;`,
    `one Durable activity per item: a fan-out/fan-in orchestration of ${a.activities} activity calls (Task.all) on the same Durable backend and Azurite.`,
    '',
    '| | items/s | storage transactions per item | notes |',
    '|---|---:|---:|---|',
    `| job pipeline | ${j.itemsPerSecond} | ${j.transactionsPerItem} | ${j.seconds} s from POST to the job's recorded completion (runs: ${j.allSeconds.join(', ')} s), ` +
      `${j.secondsSeen} s to a status poll seeing it (${j.itemsPerSecondSeen} items/s); per job ${j.transactions} transactions ` +
      `(${Object.entries(j.byService).map(([k, v]) => `${k} ${v}`).join(', ')}), ${j.transactionsPerChunk} per chunk; Durable backend ${j.durableTransactions} of them ` +
      `for ${j.activityCalls} activity calls; the bench's ${j.polls} status polls cost about ${j.transactionsPerPoll} each; the median job, ms from the POST: ${j.breakdown} |`,
    `| raw queue baseline | ${f.rawQueue.itemsPerSecondEquivalent} | ${round(f.rawQueue.transactionsPerMessage / f.chunkSize, 4)} | ${f.rawQueue.messages} chunk-sized messages ` +
      `sent, received (32 at a time) and deleted with the SDK alone: ${f.rawQueue.messagesPerSecond} messages/s (runs: ${f.rawQueue.allSeconds.join(', ')} s), ${f.rawQueue.transactionsPerMessage} transactions each |`,
    `| one Durable activity per item | ${a.itemsPerSecond} | ${a.transactionsPerItem} | ${a.seconds} s from the start request to a status poll seeing Completed; ` +
      `${a.transactions} transactions, Durable backend ${a.durableTransactions}, ${a.activityMessages} activity messages; ${a.polls} status polls |`,
    '',
    `items/s ratios: pipeline / raw queue ${ratio(j.itemsPerSecond, f.rawQueue.itemsPerSecondEquivalent)} (to a status poll seeing it: ` +
      `${ratio(j.itemsPerSecondSeen, f.rawQueue.itemsPerSecondEquivalent)}), pipeline / one activity per item ${ratio(j.itemsPerSecond, a.itemsPerSecond)}; ` +
      `transactions per item, one activity per item / pipeline: ${ratio(a.transactionsPerItem, j.transactionsPerItem)}.`,
    'Transactions are every storage request of the host processes (the app, the host and its Durable backend), counted by an HTTP proxy in front of Azurite;',
    'they include the bench\'s status polls. The item counts differ (the per-item fan-out is sized to finish in minutes), so compare rates and per-item costs.',
  ];
}

export const jobsThroughputBench: Bench = {
  name: 'jobs-throughput',
  description: 'items/s and storage transactions per item for a noop job, vs raw queue traffic and a real fan-out of one Durable activity per item',
  async run(ctx) {
    const items = Number(ctx.options.get('items') ?? 100_000);
    const chunkSize = Number(ctx.options.get('chunk-size') ?? JOB_OPTION_DEFAULTS.chunkSize);
    const activities = Number(ctx.options.get('activities') ?? 2_000);
    const runs = Number(ctx.options.get('runs') ?? 3);
    if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a whole number of at least 1, not ${String(ctx.options.get('runs'))}`);
    const figures = await runJobsThroughput(ctx.connectionString, { items, chunkSize, activities, runs, note: ctx.note, host: ctx.host });
    return { title: 'Jobs throughput and storage cost', lines: formatJobsThroughput(figures) };
  },
};
