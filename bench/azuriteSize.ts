/**
 * Benchmark: how Azurite's cost per request grows with what the account holds, the yardstick for
 * jobs-scale's "cost per job" figures. Every job leaves blobs behind (its records, staged input,
 * results, summary) and a burst parks its submissions on the jobs queue; on Azure a point read, a
 * prefix listing or a queue receive costs the same whatever else the account holds, but Azurite
 * keeps its metadata in LokiJS collections shared by the whole account, and the queries it runs for
 * a read, a listing and a receive filter every blob (or message) of the account.
 *
 * Measured here, on one Azurite with a data folder (as the benches run it): requests per second, 8
 * in flight, for 5 s each, on a probe container and queue that hold one blob and one message, first
 * with nothing else stored, then with `--blobs` blobs in another container, then with `--messages`
 * messages in another queue as well, then with both deleted again (the control: the machine's drift
 * over the run). The ratios are to the first row, same run.
 *
 * Run: `npm run bench -- azurite-size [--blobs 10000] [--messages 1000] [--seconds 5]`.
 */
import { BlobServiceClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';

import { type Bench } from './index';

const IN_FLIGHT = 8;

async function perSecond(seconds: number, op: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  let n = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() - t0 < seconds * 1000) {
        await op();
        n++;
      }
    }),
  );
  return n / ((performance.now() - t0) / 1000);
}

export const azuriteSizeBench: Bench = {
  name: 'azurite-size',
  description: "Azurite's requests per second as the account fills: a blob read, a prefix listing, a blob write, a queue receive+delete",
  async run(ctx) {
    const blobs = Number(ctx.options.get('blobs') ?? '10000');
    const messages = Number(ctx.options.get('messages') ?? '1000');
    const seconds = Number(ctx.options.get('seconds') ?? '5');
    const blobService = BlobServiceClient.fromConnectionString(ctx.connectionString);
    const queueService = QueueServiceClient.fromConnectionString(ctx.connectionString);
    const probe = blobService.getContainerClient('size-probe');
    const filler = blobService.getContainerClient('size-filler');
    const probeQueue = queueService.getQueueClient('size-probe');
    const fillerQueue = queueService.getQueueClient('size-filler');
    await Promise.all([probe.create(), filler.create(), probeQueue.create(), fillerQueue.create()]);
    const result = probe.getBlockBlobClient('jobs/j/results/0000');
    await result.upload('{}', 2);

    const ops: ReadonlyArray<readonly [string, () => Promise<unknown>]> = [
      ['blob read (HEAD)', () => result.getProperties()],
      [
        'prefix listing',
        async () => {
          for await (const blob of probe.listBlobsFlat({ prefix: 'jobs/j/results/00' })) void blob;
        },
      ],
      ['blob write (PUT)', () => probe.getBlockBlobClient('jobs/j/write').upload('{}', 2)],
      [
        'queue send+receive+delete',
        async () => {
          await probeQueue.sendMessage('e30=');
          const got = await probeQueue.receiveMessages({ numberOfMessages: 1 });
          for (const m of got.receivedMessageItems) await probeQueue.deleteMessage(m.messageId, m.popReceipt);
        },
      ],
    ];
    const rows: Array<{ label: string; rates: number[] }> = [];
    const measure = async (label: string): Promise<void> => {
      const rates: number[] = [];
      for (const [, op] of ops) rates.push(await perSecond(seconds, op));
      rows.push({ label, rates });
      ctx.note(`${label}: ${rates.map((r) => r.toFixed(0)).join(', ')} /s`);
    };

    // Warm-up (connections, JIT), not counted.
    for (const [, op] of ops) await perSecond(1, op);
    await measure('nothing else stored');
    for (let i = 0; i < blobs; i += 500) {
      await Promise.all(Array.from({ length: Math.min(500, blobs - i) }, (_, k) => filler.getBlockBlobClient(`jobs/f${i + k}/final.json`).upload('{}', 2)));
    }
    await measure(`${blobs.toLocaleString('en-US')} blobs in another container`);
    for (let i = 0; i < messages; i += 100) {
      await Promise.all(Array.from({ length: Math.min(100, messages - i) }, () => fillerQueue.sendMessage('e30=')));
    }
    await measure(`and ${messages.toLocaleString('en-US')} messages in another queue`);
    // The control: the same account emptied again (the machine's drift over the run shows here).
    await Promise.all([filler.delete(), fillerQueue.delete()]);
    await measure('emptied again (control)');

    const base = rows[0]?.rates ?? [];
    const lines = [
      `Requests per second (${IN_FLIGHT} in flight, ${seconds} s each; in parentheses: the ratio to the first row, same run).`,
      '',
      `| account holds | ${ops.map(([name]) => name).join(' | ')} |`,
      `|---|${ops.map(() => '---:').join('|')}|`,
      ...rows.map((row) => `| ${row.label} | ${row.rates.map((r, i) => `${r.toFixed(0)} (${(r / (base[i] ?? r)).toFixed(2)}x)`).join(' | ')} |`),
    ];
    return { title: "Azurite's cost per request as the account fills", lines };
  },
};
