/**
 * The job index table's coalesced row writes (shared/jobs/store/TableWrites.ts) against the run's
 * Azurite through the real table client, every HTTP request counted by a policy of that client:
 * writes that come while one is on its way go together as one transaction, and each still answers
 * for itself: a transaction that fails (a delete of a missing row, a row the service refuses) is made
 * again row by row, so only the write at fault fails; writes of one row land in the order they were
 * made; a write aborted while it waits is never sent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { TableClient } from '@azure/data-tables';

import { INDEX_PARTITION, JobIndex } from '../../../../shared/jobs/store/JobIndex';
import { MAX_TRANSACTION_ROWS, type TableWrites } from '../../../../shared/jobs/store/TableWrites';
import { memoryLogger } from '../../../../shared/observability/log';
import { azuriteConnectionString, uniqueTableName } from '../../../support/env';

interface Counted {
  readonly writes: TableWrites;
  /** The same table through a client of its own, for the test's reads. */
  readonly table: TableClient;
  /** Requests the writer's client sent so far (the table's creation not counted). */
  readonly sent: () => number;
}

async function countedTable(prefix: string): Promise<Counted> {
  let sent = 0;
  let counting = false;
  const name = uniqueTableName(prefix);
  const counted = TableClient.fromConnectionString(azuriteConnectionString(), name, {
    allowInsecureConnection: true,
    additionalPolicies: [
      {
        position: 'perRetry',
        policy: {
          name: 'countRequests',
          sendRequest: (request, next) => {
            if (counting) sent += 1;
            return next(request);
          },
        },
      },
    ],
  });
  const index = new JobIndex(counted, memoryLogger('index'));
  await index.ensureTable();
  counting = true;
  const table = TableClient.fromConnectionString(azuriteConnectionString(), name, { allowInsecureConnection: true });
  return { writes: index.writes, table, sent: () => sent };
}

async function rows(table: TableClient, partitionKey: string): Promise<Map<string, unknown>> {
  const out = new Map<string, unknown>();
  for await (const row of table.listEntities<{ v?: unknown }>({ queryOptions: { filter: `PartitionKey eq '${partitionKey}'` } })) {
    out.set(row.rowKey ?? '', row.v);
  }
  return out;
}

describe('the index table\'s coalesced writes', () => {
  it('sends writes that pile up behind one request as one transaction, each landing', async () => {
    const t = await countedTable('twbatch');
    const n = 2 * MAX_TRANSACTION_ROWS + 50;
    const keys = Array.from({ length: n }, (_, i) => `r-${String(i).padStart(4, '0')}`);
    await Promise.all(keys.map((rowKey, i) => t.writes.upsert({ partitionKey: 'p', rowKey, v: i })));
    const stored = await rows(t.table, 'p');
    assert.equal(stored.size, n, 'every row landed');
    keys.forEach((rowKey, i) => assert.equal(stored.get(rowKey), i, `${rowKey} holds its own value`));
    // The first goes alone at once; the rest waited for it and go 100 to a transaction.
    const counts = t.writes.counts();
    assert.equal(counts.rows, n);
    assert.equal(t.sent(), counts.requests, 'the writer counts every request it sends');
    assert.ok(t.sent() <= 1 + Math.ceil((n - 1) / MAX_TRANSACTION_ROWS), `${n} writes took ${t.sent()} requests`);
    assert.ok(counts.transactions >= 3, `${counts.transactions} transactions`);

    // A write made alone, with nothing on its way, goes at once as its own request.
    const before = t.sent();
    await t.writes.delete('p', 'r-0000');
    assert.equal(t.sent(), before + 1);
    assert.equal((await rows(t.table, 'p')).has('r-0000'), false);
  });

  it('makes a failed transaction\'s writes again alone: only the one at fault fails', async () => {
    const t = await countedTable('twfail');
    const first = t.writes.upsert({ partitionKey: 'p', rowKey: 'first', v: 0 });
    // These wait for the first and go together; the missing row's delete and the refused row fail the transaction.
    const missing = t.writes.delete('p', 'never-written');
    const good = t.writes.upsert({ partitionKey: 'p', rowKey: 'good', v: 1 });
    const refused = t.writes.upsert({ partitionKey: 'p', rowKey: 'refused', v: 'x'.repeat(70_000) });
    const other = t.writes.upsert({ partitionKey: 'p', rowKey: 'other', v: 2 });
    const settled = await Promise.allSettled([first, missing, good, refused, other]);
    assert.deepEqual(
      settled.map((s) => s.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
      'a delete of a missing row is success; only the refused row fails',
    );
    const failed = settled[3];
    assert.equal(failed?.status === 'rejected' ? (failed.reason as { statusCode?: number }).statusCode : undefined, 400);
    assert.deepEqual([...(await rows(t.table, 'p')).entries()].sort(), [['first', 0], ['good', 1], ['other', 2]]);
    // first alone, the failed transaction, then its four writes alone.
    assert.equal(t.sent(), 1 + 1 + 4);
    assert.equal(t.writes.counts().transactions, 1);
  });

  it('lands writes of one row in the order they were made, one a transaction', async () => {
    const t = await countedTable('tworder');
    const writes = [
      t.writes.upsert({ partitionKey: 'p', rowKey: 'warm', v: 0 }),
      t.writes.upsert({ partitionKey: 'p', rowKey: 'k', v: 1 }),
      t.writes.upsert({ partitionKey: 'p', rowKey: 'k', v: 2 }),
      t.writes.upsert({ partitionKey: 'p', rowKey: 'gone', v: 1 }),
      t.writes.delete('p', 'k'),
      t.writes.delete('p', 'gone'),
      t.writes.upsert({ partitionKey: 'p', rowKey: 'k', v: 3 }),
    ];
    await Promise.all(writes);
    assert.deepEqual([...(await rows(t.table, 'p')).entries()].sort(), [['k', 3], ['warm', 0]]);
    // warm alone; then k=1 with gone=1; k=2 with the delete of gone; the delete of k; k=3.
    assert.equal(t.sent(), 5);
  });

  it('keeps partitions apart: each has its own request on its way', async () => {
    const t = await countedTable('twparts');
    await Promise.all([
      t.writes.upsert({ partitionKey: INDEX_PARTITION, rowKey: 'a', v: 1 }),
      t.writes.upsert({ partitionKey: 'starts', rowKey: 'a', v: 2 }),
    ]);
    assert.equal(t.sent(), 2, 'two partitions, two requests at once (neither waited for the other)');
    assert.equal(t.writes.counts().transactions, 0);
    assert.equal((await rows(t.table, INDEX_PARTITION)).get('a'), 1);
    assert.equal((await rows(t.table, 'starts')).get('a'), 2);
  });

  it('never sends a write aborted while it waits, and rejects it with the abort', async () => {
    const t = await countedTable('twabort');
    const first = t.writes.upsert({ partitionKey: 'p', rowKey: 'first', v: 0 });
    const controller = new AbortController();
    const aborted = t.writes.upsert({ partitionKey: 'p', rowKey: 'aborted', v: 1 }, controller.signal);
    const kept = t.writes.upsert({ partitionKey: 'p', rowKey: 'kept', v: 2 });
    controller.abort(new Error('given up'));
    await assert.rejects(aborted, /given up/);
    await Promise.all([first, kept]);
    await assert.rejects(t.writes.upsert({ partitionKey: 'p', rowKey: 'late', v: 3 }, controller.signal), /given up/);
    assert.deepEqual([...(await rows(t.table, 'p')).keys()].sort(), ['first', 'kept']);
    assert.equal(t.sent(), 2, 'first, then kept alone');
  });
});
