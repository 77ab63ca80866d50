/**
 * A job's chunks in the results container: the items of a chunk too big for its queue message
 * (`jobs/<jobId>/chunks/<n>.json`), each chunk's result, created once (`results/<n>.json`), and the
 * workers' claims on each dispatch of a chunk (`claims/<n>-<d>.json`, overwritten by each delivery,
 * heartbeats as metadata writes).
 *
 * Guarantees: a chunk result is written at most once, whoever writes first (a worker, a redelivered
 * copy, or the orchestration expiring the chunk) wins, and every reader sees that one. Its status,
 * counts and (when small) its partial ride in the blob's metadata, and claims are metadata too, so
 * progress and most aggregations cost one listing per 5,000 results-or-claims, not a read per chunk.
 * Not guaranteed: claim times are the claiming worker's clock (compared with the orchestration's).
 * Route: docs/architecture.md, "A submission from POST to result blob", steps 5 and 6.
 */
import { type Json } from '../../worktypes/WorkType';
import { type ChunkObservation } from '../dispatch/DispatchLedger';
import { type ChunkStore } from '../dispatch/PipelineStore';
import { checkJobId, type JsonDocuments } from './BlobDocuments';
import { type CancelMarkers } from './CancelMarkers';
import { type ChunkClaimEntry, type ChunkResult, type ChunkResultEntry, type JobListing } from './jobDocuments';

/** Partials up to this size ride in metadata (Azure allows 8 KiB of metadata per blob). */
const MAX_METADATA_PARTIAL = 6 * 1024;
const CHUNK_DIGITS = 5;
/**
 * A pass that needs no claims and has at most this many chunks in flight reads each one's result
 * metadata (a read of the blob's properties) instead of listing its group: a small job's plan and
 * steps then cost reads, not listings, which cost more on Azure (a list operation) and far more on
 * Azurite as its account fills (bench `azurite-size`: a listing at 0.15x, a read at 0.61x with
 * 10,000 blobs stored).
 */
export const READ_RESULTS_UP_TO = 4;

function pad(chunk: number): string {
  return String(chunk).padStart(CHUNK_DIGITS, '0');
}

export class ChunkBlobs implements ChunkStore {
  readonly cancelsCached = true;

  constructor(
    private readonly docs: JsonDocuments,
    private readonly cancels: CancelMarkers,
  ) {}

  static itemsBlob(jobId: string, chunk: number): string {
    return `jobs/${checkJobId(jobId)}/chunks/${pad(chunk)}.json`;
  }
  static resultBlob(jobId: string, chunk: number): string {
    return `jobs/${checkJobId(jobId)}/results/${pad(chunk)}.json`;
  }
  static claimBlob(jobId: string, chunk: number, dispatch: number): string {
    return `jobs/${checkJobId(jobId)}/claims/${pad(chunk)}-${dispatch}.json`;
  }

  /** The cancel marker, as read at most 5 s ago by this process (CancelMarkers says why that is enough). */
  isCancelled(jobId: string, signal?: AbortSignal): Promise<boolean> {
    return this.cancels.isCancelled(jobId, signal);
  }

  async writeChunkItems(jobId: string, chunk: number, items: readonly Json[], signal?: AbortSignal): Promise<string> {
    const name = ChunkBlobs.itemsBlob(jobId, chunk);
    await this.docs.put(name, items, { signal });
    return name;
  }

  async readChunkItems(name: string, signal?: AbortSignal): Promise<Json[] | undefined> {
    return this.docs.get<Json[]>(name, signal);
  }

  async chunkResultExists(jobId: string, chunk: number, signal?: AbortSignal): Promise<boolean> {
    return this.docs.exists(ChunkBlobs.resultBlob(jobId, chunk), signal);
  }

  /** The conditional create: 'exists' means another writer won and this result was discarded. */
  async writeChunkResult(result: ChunkResult, signal?: AbortSignal): Promise<'written' | 'exists'> {
    const metadata = resultMetadata(result);
    return this.docs.put(ChunkBlobs.resultBlob(result.jobId, result.chunk), result, { ifNoneMatch: true, metadata, signal });
  }

  async readChunkResult(jobId: string, chunk: number, signal?: AbortSignal): Promise<ChunkResult | undefined> {
    return this.docs.get<ChunkResult>(ChunkBlobs.resultBlob(jobId, chunk), signal);
  }

  /** Records that a worker took a delivery of the chunk's dispatch-`dispatch` message (one write, overwriting the previous delivery's). */
  async claimChunk(
    jobId: string,
    chunk: number,
    dispatch: number,
    claim: { readonly claimedAt: string; readonly claimedBy: string; readonly dequeueCount: number; readonly beatAt?: string },
    signal?: AbortSignal,
  ): Promise<void> {
    await this.docs.put(
      ChunkBlobs.claimBlob(jobId, chunk, dispatch),
      { jobId, chunk, dispatch, ...claim },
      { metadata: claimMetadata(claim), signal },
    );
  }

  /** The claiming worker is alive: one metadata write on its claim (the listing sees it). */
  async beatClaim(
    jobId: string,
    chunk: number,
    dispatch: number,
    claim: { readonly claimedAt: string; readonly dequeueCount: number; readonly beatAt: string },
    signal?: AbortSignal,
  ): Promise<void> {
    await this.docs.setMetadata(ChunkBlobs.claimBlob(jobId, chunk, dispatch), claimMetadata(claim), signal);
  }


  /** The job's chunk results (from metadata), claims and its cancel marker, in one listing. */
  async listJob(jobId: string, signal?: AbortSignal): Promise<JobListing> {
    const prefix = `jobs/${checkJobId(jobId)}/`;
    const listing: JobListing = { cancelled: false, results: [], claims: [] };
    const cancelled = await this.collectEntries(prefix, '', listing, signal);
    return { ...listing, cancelled };
  }

  /**
   * The results and claims of the named chunks (and of their neighbours: one listing of results and,
   * `withClaims`, one of claims per group of 100 chunk numbers; or, without claims and for at most
   * READ_RESULTS_UP_TO chunks, a read of each one's result metadata), and the cancel marker. The
   * dispatcher's view of a window, at a cost that does not grow with the job.
   */
  async observeChunks(jobId: string, chunks: readonly number[], withClaims: boolean, signal?: AbortSignal): Promise<ChunkObservation> {
    const prefix = `jobs/${checkJobId(jobId)}/`;
    if (!withClaims && chunks.length <= READ_RESULTS_UP_TO) {
      const [cancelled, ...read] = await Promise.all([
        this.isCancelled(jobId, signal),
        ...chunks.map((c) => this.docs.metadata(ChunkBlobs.resultBlob(jobId, c), signal)),
      ]);
      const results = chunks.flatMap((c, i) => {
        const meta = read[i];
        const entry = meta === undefined ? undefined : resultEntry(`results/${pad(c)}.json`, meta);
        return entry === undefined ? [] : [entry];
      });
      return { cancelled, results, claims: [] };
    }
    const groups = [...new Set(chunks.map((c) => pad(c).slice(0, CHUNK_DIGITS - 2)))];
    const found: Pick<JobListing, 'results' | 'claims'> = { results: [], claims: [] };
    const [cancelled] = await Promise.all([
      this.isCancelled(jobId, signal),
      ...groups.flatMap((g) => [
        this.collectEntries(prefix, `results/${g}`, found, signal),
        ...(withClaims ? [this.collectEntries(prefix, `claims/${g}`, found, signal)] : []),
      ]),
    ]);
    return { cancelled, ...found };
  }

  /**
   * Adds the results and claims among the blobs under `<jobPrefix><sub>` (read from their metadata)
   * to `into`; true when the job's cancel marker was among them. A missing container lists nothing.
   */
  private async collectEntries(
    jobPrefix: string,
    sub: string,
    into: Pick<JobListing, 'results' | 'claims'>,
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    let cancelled = false;
    for await (const blob of this.docs.list(`${jobPrefix}${sub}`, true, signal)) {
      const rest = blob.name.slice(jobPrefix.length);
      if (rest === 'cancel.json') {
        cancelled = true;
        continue;
      }
      const claim = claimEntry(rest, blob.metadata);
      if (claim !== undefined) into.claims.push(claim);
      const result = resultEntry(rest, blob.metadata);
      if (result !== undefined) into.results.push(result);
    }
    return cancelled;
  }
}

/** A result's blob metadata: what a listing or a metadata read of it answers (`resultEntry`). */
function resultMetadata(result: ChunkResult): Record<string, string> {
  const metadata: Record<string, string> = {
    status: result.status,
    items: String(result.itemCount),
    itemsfailed: String(result.itemsFailed),
  };
  if (result.error !== undefined) metadata.errorcode = result.error.code;
  const partial = Buffer.from(JSON.stringify(result.partial), 'utf8').toString('base64url');
  if (partial.length <= MAX_METADATA_PARTIAL) metadata.partial = partial;
  return metadata;
}

/** What a read of a result's metadata answers once `writeChunkResult` created it: the same entry, without the read. */
export function resultEntryOf(result: ChunkResult): ChunkResultEntry {
  const entry = resultEntry(`results/${pad(result.chunk)}.json`, resultMetadata(result));
  if (entry === undefined) throw new Error(`No result entry for chunk ${result.chunk}`);
  return entry;
}

function claimEntry(rest: string, meta: Record<string, string>): ChunkClaimEntry | undefined {
  const claim = /^claims\/(\d+)-(\d+)\.json$/.exec(rest);
  if (claim?.[1] === undefined || claim[2] === undefined) return undefined;
  return {
    chunk: Number(claim[1]),
    dispatch: Number(claim[2]),
    claimedAt: meta.claimedat ?? '',
    ...(meta.beat === undefined ? {} : { beatAt: meta.beat }),
  };
}

function resultEntry(rest: string, meta: Record<string, string>): ChunkResultEntry | undefined {
  const match = /^results\/(\d+)\.json$/.exec(rest);
  if (match?.[1] === undefined) return undefined;
  return {
    chunk: Number(match[1]),
    status: meta.status === 'failed' ? 'failed' : 'ok',
    itemCount: Number(meta.items ?? 0),
    itemsFailed: Number(meta.itemsfailed ?? 0),
    ...(meta.partial === undefined ? {} : { partial: JSON.parse(Buffer.from(meta.partial, 'base64url').toString('utf8')) as Json }),
    ...(meta.errorcode === undefined ? {} : { errorCode: meta.errorcode }),
  };
}

function claimMetadata(claim: {
  readonly claimedAt: string;
  readonly dequeueCount: number;
  readonly beatAt?: string;
}): Record<string, string> {
  return {
    claimedat: claim.claimedAt,
    dequeuecount: String(claim.dequeueCount),
    ...(claim.beatAt === undefined ? {} : { beat: claim.beatAt }),
  };
}
