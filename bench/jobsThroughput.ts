/**
 * Benchmark: the job pipeline's throughput (items/s) and storage cost (transactions per item) for
 * a `noop` job, against two baselines measured in the same run on the same Azurite:
 *
 * - raw queue: send, receive (batches of 32) and delete chunk-sized messages with the SDK alone,
 *   what Azurite itself can carry for the work-items traffic;
 * - one Durable activity per item: the Durable backend's own transactions per activity call,
 *   measured on this job's activities, times the item count (what a fan-out of one activity per item
 *   would cost on the same backend).
 *
 * Every storage request of the process (app, dev host, Durable backend) goes through a counting
 * HTTP proxy in front of a private Azurite, so the counts are requests, not estimates. The app runs
 * on the development host in this process, the leader's pass is called directly (as the leader
 * runs it), and the queue trigger and Durable dispatcher run as they do under `npm start`.
 *
 * Run: `npm run bench -- jobs-throughput [--items 100000] [--chunk-size 1000]`. The measurement runs
 * in a child process (`node <outDir>/bench/jobsThroughput.js`), since the development host loads one
 * app per process and the app reads its settings from the environment.
 */
import { spawn } from 'node:child_process';
import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { basename, join, resolve } from 'node:path';

import { InvocationContext } from '@azure/functions';
import { BlobServiceClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';
import { FunctionHost } from 'devhost';
import { connectionStringFor, startAzurite } from 'devhost/testing';
import * as df from 'durable-functions';

import { appRoot } from '../shared/app/appRoot';
import { jobCoordinationPass } from '../shared/jobs/jobCoordinationPass';
import { type JobView } from '../shared/jobs/JobService';
import { encodeQueueMessage } from '../shared/jobs/messageCodec';
import { createLogger } from '../shared/observability/log';
import { type Bench } from './index';

const OUT_DIR = join(__dirname, '..');
const REPO_ROOT = resolve(OUT_DIR, '..');

interface Counter {
  total: number;
  byService: Record<string, number>;
  /** Requests whose path contains the task hub's name (the Durable backend's own state). */
  durable: number;
  /** Messages put on the task hub's activity (work-item) queue: one per activity call. */
  activityMessages: number;
}

/** A counting HTTP proxy per storage service. */
export async function countingProxy(target: { blob: number; queue: number; table: number }, taskHub: () => string): Promise<{ ports: { blob: number; queue: number; table: number }; counter: Counter; reset(): void; close(): Promise<void> }> {
  const counter: Counter = { total: 0, byService: {}, durable: 0, activityMessages: 0 };
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const servers: Server[] = [];
  const ports: Record<string, number> = {};
  for (const [service, port] of Object.entries(target)) {
    const server = createServer((req, res) => {
      counter.total += 1;
      counter.byService[service] = (counter.byService[service] ?? 0) + 1;
      const hub = taskHub().toLowerCase();
      const path = (req.url ?? '').toLowerCase();
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
  readonly job: { readonly seconds: number; readonly itemsPerSecond: number; readonly transactions: number; readonly transactionsPerItem: number; readonly transactionsPerChunk: number; readonly byService: Record<string, number>; readonly durableTransactions: number; readonly activityCalls: number };
  readonly rawQueue: { readonly messages: number; readonly messagesPerSecond: number; readonly itemsPerSecondEquivalent: number; readonly transactionsPerMessage: number };
  readonly activityPerItem: { readonly transactionsPerActivity: number; readonly transactionsPerItem: number };
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

export async function runJobsThroughput(connectionString: string | undefined, items = 100_000, chunkSize = 1_000): Promise<JobsThroughputFigures> {
  process.env.COORDINATOR_LOG_LEVEL ??= 'warn';
  const azurite = connectionString === undefined ? await startAzurite() : undefined;
  let hubName = '';
  const target = azurite === undefined ? endpointPorts(connectionString ?? '') : { blob: azurite.blobPort, queue: azurite.queuePort, table: azurite.tablePort };
  const proxy = await countingProxy(target, () => hubName);
  const conn = connectionStringFor('127.0.0.1', proxy.ports.blob, proxy.ports.queue, proxy.ports.table);
  const queues = QueueServiceClient.fromConnectionString(conn);
  const blobs = BlobServiceClient.fromConnectionString(conn);
  let host: FunctionHost | undefined;
  try {
    // Baseline: the raw queue traffic of one message per chunk, with the SDK alone.
    const chunks = Math.ceil(items / chunkSize);
    const runId = Math.random().toString(36).slice(2, 8);
    const raw = queues.getQueueClient(`bench-raw-${runId}`);
    await raw.create();
    const body = encodeQueueMessage({ v: 1, items: Array.from({ length: chunkSize }, (_, i) => i) });
    const rawMessages = Math.max(100, Math.min(chunks, 1_000));
    proxy.reset();
    const rawStart = performance.now();
    for (let i = 0; i < rawMessages; i += 16) await Promise.all(Array.from({ length: Math.min(16, rawMessages - i) }, () => raw.sendMessage(body)));
    let received = 0;
    while (received < rawMessages) {
      const batch = await raw.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 60 });
      received += batch.receivedMessageItems.length;
      await Promise.all(batch.receivedMessageItems.map((m) => raw.deleteMessage(m.messageId, m.popReceipt)));
    }
    const rawSeconds = (performance.now() - rawStart) / 1000;
    const rawTransactions = proxy.counter.total;

    // The job pipeline on the development host.
    hubName = `Bench${runId}`;
    Object.assign(process.env, {
      AzureWebJobsStorage: conn,
      CoordinatorStorage: conn,
      TASK_HUB_NAME: hubName,
      JOBS_QUEUE: `bench-jobs-${runId}`,
      WORK_ITEMS_QUEUE: `bench-work-items-${runId}`,
      JOB_RESULTS_CONTAINER: `bench-results-${runId}`,
      JOB_INPUT_CONTAINERS: 'bench-inputs-*',
      COORDINATOR_INSTANCE_ID: 'bench-host',
    });
    host = await FunctionHost.start({
      appRoot: REPO_ROOT,
      main: `${basename(OUT_DIR)}/functions/{jobsApi,jobOrchestrator,jobActivities,workItemsWorker}.js`,
      port: 0,
      hostId: 'bench',
      instanceId: 'bench-host',
      env: process.env,
      logger: createLogger('bench-host'),
    });
    const inputs = blobs.getContainerClient(`bench-inputs-${runId}`);
    await inputs.createIfNotExists();
    const text = JSON.stringify(Array.from({ length: items }, (_, i) => i));
    await inputs.getBlockBlobClient('items.json').upload(text, Buffer.byteLength(text));
    const clientInput = df.input.durableClient();
    const context = new InvocationContext({ functionName: 'bench', options: { extraInputs: [clientInput] } });
    context.extraInputs.set(clientInput, host.durableClientBinding());
    const client = df.getClient(context);
    // Warm the app (containers, queues, first orchestration) with a tiny job, then measure.
    await runJob(host, client, 'bench-warmup', '', items, 1, true);
    proxy.reset();
    const jobStart = performance.now();
    const view = await runJob(host, client, 'bench-job', `${inputs.containerName}/items.json`, items, chunkSize, false);
    const seconds = (performance.now() - jobStart) / 1000;
    if (view.status !== 'completed' || (view.result as { count?: number } | undefined)?.count !== items) {
      throw new Error(`The benchmark job did not complete exactly: ${JSON.stringify(view)}`);
    }
    const c = proxy.counter;
    const perActivity = c.activityMessages === 0 ? 0 : c.durable / c.activityMessages;
    return {
      items,
      chunkSize,
      chunks,
      job: {
        seconds: round(seconds),
        itemsPerSecond: Math.round(items / seconds),
        transactions: c.total,
        transactionsPerItem: round(c.total / items, 4),
        transactionsPerChunk: round(c.total / chunks),
        byService: { ...c.byService },
        durableTransactions: c.durable,
        activityCalls: c.activityMessages,
      },
      rawQueue: {
        messages: rawMessages,
        messagesPerSecond: Math.round(rawMessages / rawSeconds),
        itemsPerSecondEquivalent: Math.round((rawMessages * chunkSize) / rawSeconds),
        transactionsPerMessage: round(rawTransactions / rawMessages),
      },
      activityPerItem: { transactionsPerActivity: round(perActivity), transactionsPerItem: round(perActivity) },
    };
  } finally {
    await host?.stop();
    await proxy.close();
    await azurite?.stop();
  }
}

async function runJob(host: FunctionHost, client: df.DurableClient, jobId: string, itemsBlob: string, items: number, chunkSize: number, warmup: boolean): Promise<JobView> {
  const submission = warmup ? { jobId, workType: 'noop', items: [1, 2, 3] } : { jobId, workType: 'noop', itemsBlob, options: { chunkSize } };
  const response = await fetch(`${host.baseUrl}/api/jobs`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(submission) });
  if (response.status !== 202) throw new Error(`submit: ${response.status} ${await response.text()}`);
  await jobCoordinationPass(appRoot().jobs, () => client)({ epoch: 1, holder: 'bench', signal: new AbortController().signal, progress: () => undefined });
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const status = await fetch(`${host.baseUrl}/api/jobs/${jobId}`);
    const view = (await status.json()) as JobView;
    if (view.status !== 'pending' && view.status !== 'running') return view;
    if (Date.now() > deadline) throw new Error(`${jobId} (${items} items) did not finish in 10 minutes`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function formatJobsThroughput(f: JobsThroughputFigures): string[] {
  return [
    `noop job of ${f.items} items in ${f.chunks} chunks of ${f.chunkSize}, submitted by HTTP with its items in a blob:`,
    '',
    '| | items/s | storage transactions per item | notes |',
    '|---|---|---|---|',
    `| job pipeline | ${f.job.itemsPerSecond} | ${f.job.transactionsPerItem} | ${f.job.seconds} s from submission to completed; ${f.job.transactions} transactions (${Object.entries(f.job.byService).map(([k, v]) => `${k} ${v}`).join(', ')}), ${f.job.transactionsPerChunk} per chunk; Durable backend ${f.job.durableTransactions} of them for ${f.job.activityCalls} activity calls |`,
    `| raw queue baseline | ${f.rawQueue.itemsPerSecondEquivalent} | ${round(f.rawQueue.transactionsPerMessage / f.chunkSize, 4)} | ${f.rawQueue.messages} chunk-sized messages sent, received (32 at a time) and deleted with the SDK alone: ${f.rawQueue.messagesPerSecond} messages/s, ${f.rawQueue.transactionsPerMessage} transactions each |`,
    `| one Durable activity per item | - | ${f.activityPerItem.transactionsPerItem} | the Durable backend's transactions per activity call, measured on this job |`,
    '',
    'Transactions are every storage request of the process (app, development host, Durable backend), counted by an HTTP proxy in front of Azurite.',
  ];
}

/** The bench `npm run bench` runs: the measurement in a child process (one app per process). */
export const jobsThroughputBench: Bench = {
  name: 'jobs-throughput',
  description: 'items/s and storage transactions per item for a noop job, vs raw queue traffic and one Durable activity per item',
  async run(ctx) {
    const items = Number(ctx.options.get('items') ?? 100_000);
    const chunkSize = Number(ctx.options.get('chunk-size') ?? 1_000);
    const child = spawn(process.execPath, [__filename, String(items), String(chunkSize)], {
      env: { ...process.env, BENCH_AZURITE_CONNECTION_STRING: ctx.connectionString, COORDINATOR_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    const last = output.trim().split('\n').at(-1) ?? '';
    if (code !== 0 || !last.startsWith('{"items"')) throw new Error(`jobs-throughput child failed (exit ${code}):\n${output}`);
    return { title: 'Jobs throughput and storage cost', lines: formatJobsThroughput(JSON.parse(last) as JobsThroughputFigures) };
  },
};

if (require.main === module) {
  const [items, chunkSize] = process.argv.slice(2).map(Number);
  runJobsThroughput(process.env.BENCH_AZURITE_CONNECTION_STRING || undefined, items || undefined, chunkSize || undefined).then(
    (figures) => {
      console.log(JSON.stringify(figures));
      process.exit(0);
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
