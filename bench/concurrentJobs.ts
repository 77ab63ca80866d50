/**
 * Benchmark: ten jobs at once on the real app. Host processes (the extensions host unless --host devhost) as `npm start --instances N`
 * runs them (shipped host.json and settings, one Azurite), `noop` jobs whose items are in a blob, chunks
 * of 100. First one such job alone (the baseline, same cluster), then `--jobs` of them POSTed together
 * (spread over the instances). It prints POST -> `completed` of the job alone and the first / median / last
 * of the concurrent ones, the spread of their finishes, the aggregate items/s of the concurrent jobs
 * against the job alone's; for the first and the last of them, POST -> started by the leader, first window
 * sent (both from the app's log lines) and first chunk result; how many had a chunk result before any of
 * them had all its results (interleaving, from the results' `writtenAt`); and the most messages the
 * work-items queue held (its approximate count, peeked every 500 ms), which must stay within
 * jobs x JOB_DISPATCH_WINDOW. It throws when a job does not complete with exactly its item count, or when
 * the queue held more.
 *
 * Not measured: per-job messages in flight (only the queue's total); jobs of different sizes or work types;
 * storage transactions (bench/jobsThroughput.ts counts those).
 *
 * Run: `npm run bench -- concurrent-jobs [--instances 2] [--jobs 10] [--items 20000]`.
 */
import {
  type AppCluster,
  type Json,
  listNames,
  monitor,
  percentile,
  runJob,
  secs,
  sleep,
  startAppCluster,
  submitJob,
  uploadItems,
  waitForJob,
  workItemsDepth,
} from './appCluster';
import { type Bench } from './index';

const CHUNK_SIZE = 100;
/** Status polls of a job every this often: the same resolution for the job alone and the concurrent ones. */
const POLL_MS = 500;
const DEPTH_POLL_MS = 500;


interface Finished {
  readonly jobId: string;
  /** performance.now() of the POST and of the first status poll that saw the job finished. */
  readonly postedAt: number;
  readonly finishedAt: number;
}

function checkExact(jobId: string, view: Json, items: number): void {
  const count = (view.result as { count?: unknown } | undefined)?.count;
  if (view.status !== 'completed' || count !== items) {
    const seen = JSON.stringify(view).slice(0, 400);
    throw new Error(`job ${jobId} ended ${String(view.status)} with count ${String(count)}, expected completed with ${items}: ${seen}`);
  }
}

/** The `writtenAt` (ms since the epoch) of every chunk result of the job, read 16 blobs at a time. */
async function resultTimes(cluster: AppCluster, jobId: string): Promise<number[]> {
  const names = await listNames(cluster.results, `jobs/${jobId}/results/`);
  const times: number[] = [];
  for (let i = 0; i < names.length; i += 16) {
    const bodies = await Promise.all(names.slice(i, i + 16).map((name) => cluster.results.getBlockBlobClient(name).downloadToBuffer()));
    for (const body of bodies) times.push(Date.parse(String((JSON.parse(body.toString('utf8')) as { writtenAt?: unknown }).writtenAt)));
  }
  return times;
}

export const concurrentJobsBench: Bench = {
  name: 'concurrent-jobs',
  description: 'N noop jobs POSTed together on the real app vs one alone: POST -> completed, spread, aggregate items/s, queue depth',
  async run(ctx) {
    const instances = Number(ctx.options.get('instances') ?? 2);
    const jobs = Number(ctx.options.get('jobs') ?? 10);
    const items = Number(ctx.options.get('items') ?? 20_000);
    const chunks = Math.ceil(items / CHUNK_SIZE);
    const cluster = await startAppCluster(ctx.connectionString, { instances, label: 'conc', host: ctx.host });
    const window = Number(cluster.settings.JOB_DISPATCH_WINDOW ?? 64);
    const bound = jobs * window;
    try {
      await cluster.leader();
      // One blob serves every job: each job stages its own copy of the items at its plan.
      const itemsBlob = await uploadItems(cluster, 'items.json', Array.from({ length: items }, (_, i) => i));
      const submission = (jobId: string): Json & { jobId: string } => ({
        jobId,
        workType: 'noop',
        itemsBlob,
        options: { chunkSize: CHUNK_SIZE },
      });
      // Warm-up: queues, containers and the first orchestration exist before anything is timed.
      const warm = await runJob(cluster, { jobId: 'conc-warmup', workType: 'sum', items: [1, 2, 3, 4] }, 120_000);
      if (warm.view.status !== 'completed') throw new Error(`warm-up job ended ${String(warm.view.status)}`);

      let maxAlone = 0;
      const aloneDepth = monitor(DEPTH_POLL_MS, async () => {
        maxAlone = Math.max(maxAlone, await workItemsDepth(cluster));
      });
      const alonePostedAt = await submitJob(cluster, submission('conc-alone'));
      const alone = await waitForJob(cluster, 'conc-alone', 600_000, { pollMs: POLL_MS, note: ctx.note }).finally(() => aloneDepth.stop());
      checkExact('conc-alone', alone.view, items);
      const aloneMs = alone.finishedAt - alonePostedAt;
      ctx.note(`concurrent-jobs: one job alone (${items} items, ${chunks} chunks): ${secs(aloneMs)} s; now ${jobs} at once`);
      // The alone job's last messages are deleted before the concurrent ones are posted.
      for (let i = 0; i < 20 && (await workItemsDepth(cluster)) > 0; i++) await sleep(250);

      let maxQueued = 0;
      const depth = monitor(DEPTH_POLL_MS, async () => {
        maxQueued = Math.max(maxQueued, await workItemsDepth(cluster));
      });
      const ids = Array.from({ length: jobs }, (_, i) => `conc-${String(i).padStart(2, '0')}`);
      const targets = [...cluster.instances.keys()];
      let finished: Finished[];
      let postedWall = 0;
      try {
        // Together: every POST is sent before any answer is awaited, spread over the instances.
        postedWall = Date.now();
        const posted = await Promise.all(ids.map((id, i) => submitJob(cluster, submission(id), targets[i % targets.length])));
        finished = await Promise.all(
          ids.map(async (jobId, i) => {
            const done = await waitForJob(cluster, jobId, 900_000, { pollMs: POLL_MS, note: ctx.note });
            checkExact(jobId, done.view, items);
            return { jobId, postedAt: posted[i] as number, finishedAt: done.finishedAt };
          }),
        );
      } finally {
        await depth.stop();
      }
      if (maxQueued > bound) {
        throw new Error(`the work-items queue held ${maxQueued} messages, more than ${jobs} jobs x window ${window} = ${bound}`);
      }

      const firstPost = Math.min(...finished.map((f) => f.postedAt));
      const latencies = finished.map((f) => f.finishedAt - f.postedAt);
      const ends = finished.map((f) => f.finishedAt);
      const spreadMs = Math.max(...ends) - Math.min(...ends);
      const allMs = Math.max(...ends) - firstPost;
      const aloneRate = items / (aloneMs / 1000);
      const allRate = (jobs * items) / (allMs / 1000);
      // Interleaving, from the results' writtenAt (the app's clock, this machine's): a job completes only after
      // its last result, so jobs with a result before the first job had all of its own had one before it completed.
      const times = await Promise.all(ids.map((id) => resultTimes(cluster, id)));
      if (times.some((t) => t.length !== chunks || t.some(Number.isNaN))) {
        throw new Error(`result blobs per job ${times.map((t) => t.length).join(', ')}, expected ${chunks} each with a writtenAt`);
      }
      const firsts = times.map((t) => Math.min(...t) - postedWall);
      // Where the time before a job's first result goes: the leader's start (intake) and its plan sending the first window,
      // from the app's log lines (events `intake.started`, `job.planned`; their `ts`, this machine's clock).
      const logged = (event: string): number[] =>
        ids.map((id) => {
          const at = [...cluster.instances.values()].flatMap((h) => h.events(event)).filter((e) => e.jobId === id);
          return Math.min(...at.map((e) => Date.parse(String(e.ts)))) - postedWall;
        });
      const range = (values: number[]): string =>
        values.every(Number.isFinite) ? `${secs(Math.min(...values))} / ${secs(Math.max(...values))}` : '(not logged)';
      const firstAllDone = Math.min(...times.map((t) => Math.max(...t)));
      const startedBeforeFirstDone = times.filter((t) => Math.min(...t) < firstAllDone).length;
      return {
        title: `Concurrent jobs: ${jobs} at once against one alone`,
        lines: [
          `${instances} instance(s), shipped host.json and settings (JOB_DISPATCH_WINDOW ${window}); ` +
            `each job: noop of ${items} items by itemsBlob in ${chunks} chunks of ${CHUNK_SIZE}; ` +
            `the ${jobs} POSTed together; status polled every ${POLL_MS} ms.`,
          '',
          '| | POST -> completed (s) |',
          '|---|---:|',
          `| one job alone (baseline, same cluster, before) | ${secs(aloneMs)} |`,
          `| ${jobs} at once: first / median / last | ` +
            `${secs(Math.min(...latencies))} / ${secs(percentile(latencies, 50))} / ${secs(Math.max(...latencies))} |`,
          `| ${jobs} at once: spread (last finish - first finish) | ${secs(spreadMs)} |`,
          '',
          '| | |',
          '|---|---:|',
          `| items/s, one job alone (POST -> completed) | ${Math.round(aloneRate)} |`,
          `| items/s, the ${jobs} together (${jobs * items} items, first POST -> last completed, ${secs(allMs)} s) | ` +
            `${Math.round(allRate)} (${(allRate / aloneRate).toFixed(2)}x alone) |`,
          `| ${jobs} at once: POST -> started by the leader (intake), first job / last job (s) | ${range(logged('intake.started'))} |`,
          `| ${jobs} at once: POST -> first window sent (plan), first job / last job (s) | ${range(logged('job.planned'))} |`,
          `| ${jobs} at once: POST -> first chunk result, first job / last job (s) | ${range(firsts)} |`,
          `| jobs with a chunk result before any of them had all its results (interleaving) | ${startedBeforeFirstDone} of ${jobs} |`,
          `| most messages on the work-items queue (peeked every ${DEPTH_POLL_MS} ms): alone / ${jobs} at once ` +
            `(bound ${jobs} x ${window} = ${bound}) | ${maxAlone} / ${maxQueued} |`,
          `| every job completed with count == items, ${chunks} result blobs each | yes |`,
        ],
      };
    } finally {
      await cluster.stop();
    }
  },
};
