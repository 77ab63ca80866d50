/**
 * The planner the stager replaced, kept as the tests' oracle: it downloads an itemsBlob whole,
 * `JSON.parse`s it, checks nesting and every item, exactly as `JobActivities.loadItems` did before
 * staging. The stager must answer the same items, or the same code and message (for an items blob
 * over the limit, the stager's "more than", since it stops reading there).
 */
import { type BlobServiceClient } from '@azure/storage-blob';

import { tooManyInBlob } from '../../../../shared/jobs/input/InputStager';
import { JobError } from '../../../../shared/jobs/JobError';
import { JOB_LIMITS, maxItemsAt } from '../../../../shared/jobs/jobLimits';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { assertChunkCount, MAX_NESTING_DEPTH, nestingDepthExceeds } from '../../../../shared/jobs/JobSubmission';
import { isStatus } from '../../../../shared/jobs/store/JobStore';
import { type Json } from '../../../../shared/worktypes/WorkType';
import { type WorkTypeRegistry } from '../../../../shared/worktypes/WorkTypeRegistry';

export async function wholeArrayItems(blobs: BlobServiceClient, registry: WorkTypeRegistry, run: JobRun): Promise<Json[]> {
  const type = registry.get(run.workType);
  if (type === undefined) throw new JobError('UNKNOWN_WORK_TYPE', `Work type "${run.workType}" is not registered on this instance.`);
  let items: Json[];
  if (run.source.kind === 'inline') {
    items = run.source.items;
  } else {
    const { container, blob } = run.source;
    const client = blobs.getContainerClient(container).getBlobClient(blob);
    let text: string;
    try {
      const props = await client.getProperties();
      if ((props.contentLength ?? 0) > JOB_LIMITS.maxItemsBlobBytes) {
        throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${container}/${blob} is ${props.contentLength} bytes; the limit is ${JOB_LIMITS.maxItemsBlobBytes}.`);
      }
      text = (await client.downloadToBuffer()).toString('utf8');
    } catch (err) {
      if (isStatus(err, 404)) throw new JobError('ITEMS_BLOB_NOT_FOUND', `itemsBlob ${container}/${blob} does not exist.`);
      throw err;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      if (err instanceof RangeError) throw tooDeep(container, blob);
      throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${container}/${blob} is not JSON.`);
    }
    if (!Array.isArray(parsed)) throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${container}/${blob} must hold a JSON array of items.`);
    if (nestingDepthExceeds(parsed, MAX_NESTING_DEPTH - 1)) throw tooDeep(container, blob);
    if (parsed.length === 0) throw new JobError('ITEMS_EMPTY', `itemsBlob ${container}/${blob} holds an empty array.`);
    items = parsed as Json[];
    const problems: string[] = [];
    let rejected = 0;
    items.forEach((item, index) => {
      const reason = type.validateItem(item);
      if (reason === undefined) return;
      rejected += 1;
      if (problems.length < 5) problems.push(`item ${index}: ${reason}`);
    });
    // The stager reads no further than the first item past the limit, and says so (the same code).
    if (rejected === 0 && items.length > maxItemsAt(run.options.chunkSize)) throw tooManyInBlob(`${container}/${blob}`, run.options.chunkSize);
    if (rejected > 0) throw new JobError('ITEM_REJECTED', `${rejected} of ${items.length} items in ${container}/${blob} rejected by work type "${type.name}": ${problems.join('; ')}${rejected > problems.length ? '; ...' : ''}.`);
  }
  assertChunkCount(items.length, run.options.chunkSize);
  return items;
}

function tooDeep(container: string, blob: string): JobError {
  return new JobError('NESTING_TOO_DEEP', `itemsBlob ${container}/${blob} nests arrays or objects more than ${MAX_NESTING_DEPTH - 1} levels deep (${MAX_NESTING_DEPTH} counting the submission, as for inline items).`);
}
