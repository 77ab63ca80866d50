/**
 * The job index table's row writes (the index's rows and the start marks), coalesced: writes to one
 * partition that come while an earlier write of that partition is on its way wait for it, then go
 * together as one entity group transaction (up to 100 rows, one request). Nothing waits on a timer:
 * a write made alone goes out at once, as its own request; under a burst (the intake starting 48
 * jobs a pass, many plans confirming their starts at once) the rows that pile up behind one request
 * go in the next. Every job writes its start mark, then its index rows, then deletes its mark, so
 * this is a cost paid per job: one request of a transaction's rows is one transaction on Azure's
 * bill, and one request's HTTP work (about 40% of Azurite's CPU in a burst, docs/figures.md) for
 * all its rows.
 *
 * Guarantees: each write answers for itself, as the single call would: an upsert replaces the row;
 * a delete of a missing row is success. A transaction is all or nothing, so when one fails (a
 * delete of a row already gone fails it with 404, a row that is refused fails it with 400) each of
 * its writes is made again alone and answers its own outcome: one bad row never fails the others.
 * Writes of one row keep their order (a transaction holds at most one write of a row; a later write
 * of the same row goes in the next request). A write whose signal aborts while it waits is dropped and
 * rejects with the abort; one already sent is not recalled.
 */
import { type TableClient, type TableEntity, type TransactionAction } from '@azure/data-tables';

/** The service's limit on one entity group transaction. */
export const MAX_TRANSACTION_ROWS = 100;

/** Per request: a write of the table must never hold a submission or a start for long. */
const WRITE_TIMEOUT_MS = 5_000;

/** The table the writes go to, and the guard that creates it when missing (JobIndex.withTable). */
export interface WritesTable {
  readonly table: TableClient;
  withTable<T>(call: () => Promise<T>): Promise<T>;
}

/** A row's write: its keys, and the row itself for an upsert. */
type Write = { readonly partitionKey: string; readonly rowKey: string } & (
  | { readonly kind: 'upsert'; readonly entity: TableEntity }
  | { readonly kind: 'delete' }
);

interface Waiting {
  readonly write: Write;
  readonly signal: AbortSignal | undefined;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
  readonly onAbort: () => void;
}

interface Partition {
  readonly waiting: Waiting[];
  sending: boolean;
}

export interface TableWriteCounts {
  /** Requests sent: single writes plus transactions (a failed transaction's rows made again alone count too). */
  readonly requests: number;
  readonly transactions: number;
  readonly rows: number;
}

export class TableWrites {
  readonly #partitions = new Map<string, Partition>();

  #requests = 0;

  #transactions = 0;

  #rows = 0;

  constructor(private readonly host: WritesTable) {}

  /** Writes the row, replacing any that is there. */
  upsert(entity: TableEntity, signal?: AbortSignal): Promise<void> {
    return this.enqueue({ kind: 'upsert', partitionKey: entity.partitionKey, rowKey: entity.rowKey, entity }, signal);
  }

  /** Deletes the row; a row that is not there is success. */
  delete(partitionKey: string, rowKey: string, signal?: AbortSignal): Promise<void> {
    return this.enqueue({ kind: 'delete', partitionKey, rowKey }, signal);
  }

  /** What this writer sent so far (its tests read it). */
  counts(): TableWriteCounts {
    return { requests: this.#requests, transactions: this.#transactions, rows: this.#rows };
  }

  private enqueue(write: Write, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted === true) return Promise.reject(abortReason(signal));
    let partition = this.#partitions.get(write.partitionKey);
    if (partition === undefined) {
      partition = { waiting: [], sending: false };
      this.#partitions.set(write.partitionKey, partition);
    }
    const own = partition;
    const done = new Promise<void>((resolve, reject) => {
      const waiting: Waiting = {
        write,
        signal,
        resolve,
        reject,
        onAbort: () => {
          const at = own.waiting.indexOf(waiting);
          if (at < 0) return;
          own.waiting.splice(at, 1);
          reject(abortReason(signal));
        },
      };
      signal?.addEventListener('abort', waiting.onAbort, { once: true });
      own.waiting.push(waiting);
    });
    if (!own.sending) void this.send(own);
    return done;
  }

  /** Sends what waits, one request at a time per partition, until nothing does. */
  private async send(partition: Partition): Promise<void> {
    partition.sending = true;
    try {
      while (partition.waiting.length > 0) {
        const batch = takeBatch(partition.waiting);
        for (const w of batch) w.signal?.removeEventListener('abort', w.onAbort);
        await this.sendBatch(batch);
      }
    } finally {
      partition.sending = false;
    }
  }

  private async sendBatch(batch: readonly Waiting[]): Promise<void> {
    this.#rows += batch.length;
    if (batch.length === 1) {
      const only = batch[0] as Waiting;
      await this.alone(only.write, only.signal).then(only.resolve, only.reject);
      return;
    }
    this.#requests += 1;
    this.#transactions += 1;
    try {
      const actions = batch.map((w): TransactionAction => actionOf(w.write));
      const abortSignal = AbortSignal.timeout(WRITE_TIMEOUT_MS);
      await this.host.withTable(() => this.host.table.submitTransaction(actions, { abortSignal }));
      for (const w of batch) w.resolve();
    } catch {
      // All or nothing: each write is made again alone, so only the one at fault answers a failure.
      await Promise.all(batch.map((w) => this.alone(w.write, undefined).then(w.resolve, w.reject)));
    }
  }

  private async alone(write: Write, signal: AbortSignal | undefined): Promise<void> {
    this.#requests += 1;
    const timeout = AbortSignal.timeout(WRITE_TIMEOUT_MS);
    const abortSignal = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
    if (write.kind === 'upsert') {
      await this.host.withTable(() => this.host.table.upsertEntity(write.entity, 'Replace', { abortSignal }));
      return;
    }
    try {
      await this.host.withTable(() => this.host.table.deleteEntity(write.partitionKey, write.rowKey, { abortSignal }));
    } catch (err) {
      if (!isTableStatus(err, 404)) throw err;
    }
  }
}

/** The next request's writes: in order, at most one per row (a row's later write waits for the next), at most the service's limit. */
function takeBatch(waiting: Waiting[]): Waiting[] {
  const batch: Waiting[] = [];
  const rows = new Set<string>();
  const left: Waiting[] = [];
  for (const w of waiting) {
    if (batch.length < MAX_TRANSACTION_ROWS && !rows.has(w.write.rowKey)) batch.push(w);
    else left.push(w);
    rows.add(w.write.rowKey);
  }
  waiting.splice(0, waiting.length, ...left);
  return batch;
}

function actionOf(write: Write): TransactionAction {
  if (write.kind === 'upsert') return ['upsert', write.entity, 'Replace'];
  return ['delete', { partitionKey: write.partitionKey, rowKey: write.rowKey }];
}

function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('The table write was aborted before it was sent.');
}

/** A table call's HTTP status (the table SDK's errors, told apart by shape, as JobIndex tells a missing table). */
function isTableStatus(err: unknown, code: number): boolean {
  return (err as { statusCode?: number } | null)?.statusCode === code;
}
