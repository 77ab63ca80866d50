/**
 * The aggregation folds the results the last dispatch pass saw when they name every chunk (no listing
 * of the job), and lists the job otherwise: the same summary either way. On the in-memory twin of
 * the results container, whose request counts stand for a counting proxy's.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type ItemError, type JobSummary, resultDocumentOf } from '../../../../shared/jobs/JobSummary';
import { aggregateJob } from '../../../../shared/jobs/run/aggregation';
import { type ChunkResultEntry } from '../../../../shared/jobs/store/jobDocuments';
import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { memoryLogger } from '../../../../shared/observability/log';
import { workTypes } from '../../../../shared/worktypes/WorkTypeRegistry';
import { MemoryDocuments } from '../support/MemoryDocuments';

const AT = '2026-03-01T12:00:00.000Z';

async function setup(jobId: string, itemErrors: readonly ItemError[] = []) {
  const docs = new MemoryDocuments(() => Date.parse(AT));
  const store = new JobStore(docs, 'job-results', () => Promise.resolve(undefined));
  for (const [chunk, partial] of [[0, { count: 2, sum: '3', min: 1, max: 2 }], [1, { count: 1, sum: '4', min: 4, max: 4 }]] as const) {
    // The item errors, when given, are chunk 1's.
    const errors = chunk === 1 ? itemErrors : [];
    await store.chunks.writeChunkResult({
      jobId, chunk, status: 'ok', itemCount: partial.count, itemsFailed: errors.length, partial, itemErrors: errors, attempt: 1, dispatch: 1, writtenBy: 'w', writtenAt: AT,
    });
  }
  const deps = { store, registry: workTypes, logger: memoryLogger('aggregation'), now: () => new Date(AT) };
  const run = { jobId, workType: 'sum', epoch: 3, options: { chunkSize: 2, attempts: 3, deadlineSeconds: 300 } };
  const aggregate = async (landed?: readonly ChunkResultEntry[]): Promise<{ summary: JobSummary; lists: number }> => {
    docs.calls.clear();
    const summary = await aggregateJob(deps, { run, chunkCount: 2, itemCount: 3, cancelled: false }, landed);
    return { summary, lists: docs.calls.get('list') ?? 0 };
  };
  return { store, docs, aggregate };
}

describe('aggregation from the results a pass saw', () => {
  it('folds what the last pass saw when it names every chunk, without listing the job; the same summary as from a listing', async () => {
    const listed = await setup('agg-listed');
    const fromListing = await listed.aggregate();
    assert.equal(fromListing.lists, 1, 'no results given: one listing of the job');
    const seen = await setup('agg-seen');
    const landed = (await seen.store.chunks.observeChunks('agg-seen', [0, 1], false)).results;
    const fromSeen = await seen.aggregate(landed);
    assert.equal(fromSeen.lists, 0, 'every chunk seen: no listing');
    assert.deepEqual(fromSeen.summary.result, { count: 3, sum: 7, min: 1, max: 4 });
    assert.deepEqual({ ...fromSeen.summary, jobId: '', resultBlob: '' }, { ...fromListing.summary, jobId: '', resultBlob: '' });
  });

  it('lists the job when the pass saw only some chunks (a chunk expired in that pass is recorded after its listing)', async () => {
    const t = await setup('agg-part');
    const landed = (await t.store.chunks.observeChunks('agg-part', [1], false)).results;
    const partly = await t.aggregate(landed);
    assert.equal(partly.lists, 1);
    assert.deepEqual(partly.summary.result, { count: 3, sum: 7, min: 1, max: 4 }, 'both chunks folded');
  });

  it('keeps a small result without errors in the summary alone (no result blob); one with an item error keeps its blob', async () => {
    const clean = await setup('agg-clean');
    const { summary } = await clean.aggregate();
    assert.equal(summary.resultBlob, undefined);
    assert.equal(await clean.docs.exists('jobs/agg-clean/result.json'), false, 'a result blob was written');
    // The same bytes as the blob would have held (compared as text: the order of the fields too).
    assert.equal(
      JSON.stringify(resultDocumentOf(summary)),
      JSON.stringify({
        jobId: 'agg-clean',
        workType: 'sum',
        status: 'completed',
        progress: summary.progress,
        result: { count: 3, sum: 7, min: 1, max: 4 },
        chunkErrors: [],
        itemErrors: [],
        epoch: 3,
        finishedAt: AT,
      }),
    );

    const failedItem = { index: 2, code: 'ITEM_INVALID', message: 'not a number' };
    const errors = await setup('agg-errors', [failedItem]);
    const withErrors = (await errors.aggregate()).summary;
    assert.equal(withErrors.status, 'completed_with_errors');
    assert.equal(withErrors.resultBlob, 'jobs/agg-errors/result.json');
    const text = (await errors.docs.getText('jobs/agg-errors/result.json')) ?? 'null';
    const stored = JSON.parse(text) as { itemErrors: unknown };
    assert.deepEqual(stored.itemErrors, [failedItem], 'every item error in the blob');
    // One order of fields for both: the stored document, with its errors emptied, is what a summary would build.
    const emptied = JSON.stringify({ ...(JSON.parse(text) as object), chunkErrors: [], itemErrors: [] });
    const { resultBlob: _blob, errors: _errors, ...errorsDropped } = withErrors;
    assert.equal(JSON.stringify(resultDocumentOf(errorsDropped)), emptied);
    assert.equal(resultDocumentOf(withErrors), undefined, 'the summary does not stand for a stored result');
    assert.equal(resultDocumentOf({ ...summary, superseded: { reason: 'newer start' } }), undefined, 'a stood-down run stands for nothing');
  });
});
