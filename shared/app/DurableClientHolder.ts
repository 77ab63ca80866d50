/**
 * The Durable client the leader's passes use, handed over by the functions that get one from the
 * host (the timer, the work-items worker, the mutating jobs routes). A client is only a set of URLs
 * into this host's extension, so the latest one serves every later pass, including the passes the
 * runtime runs on its own interval, which have no invocation. Holds nothing before the first handover.
 */
import { type DurableClient } from 'durable-functions';

export class DurableClientHolder {
  private client: DurableClient | undefined;

  set(client: DurableClient): void {
    this.client = client;
  }

  get(): DurableClient | undefined {
    return this.client;
  }
}
