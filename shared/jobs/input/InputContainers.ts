/**
 * The containers a job may read: its `itemsBlob`, and every blob a work type reads for it (the
 * `wordcount` items). Deny by default: a job reads only containers on the allow-list
 * (`JOB_INPUT_CONTAINERS`: exact names, or prefixes written `name-*`), and never the app's own
 * containers (results, the lease), the Durable task hub's `<hub>-*` or the host's `azure-webjobs-*`,
 * whatever the list says. A submitter holding a function key could otherwise make the app read
 * another job's history or results, or the function keys themselves.
 */
import { type BlobClient, type BlobServiceClient } from '@azure/storage-blob';

import { allowListed } from '../../config/settings';
import { ItemError } from '../../worktypes/WorkType';
import { type BlobRef } from './BlobRef';

/** A container name, or a prefix ending in `-` (every name that starts with it). */
export type ContainerPattern = string;

function matches(pattern: ContainerPattern, container: string): boolean {
  return pattern.endsWith('-') ? container.startsWith(pattern) : container === pattern;
}

export class InputContainers {
  /**
   * `allowed`: the setting's entries (`name` or `prefix*`). `reserved`: the app's and the host's own
   * containers (`name`, or `prefix-` for a family), refused even when an entry would allow them.
   */
  constructor(
    private readonly allowed: readonly string[],
    private readonly reserved: readonly ContainerPattern[],
  ) {}

  allows(container: string): boolean {
    if (this.reserved.some((pattern) => matches(pattern, container))) return false;
    return allowListed(this.allowed, container);
  }

  /** For refusals: what is allowed, and where that is set. */
  describe(): string {
    return `${this.allowed.join(', ')} (setting JOB_INPUT_CONTAINERS)`;
  }
}

/** How a work type reaches a blob it was given as an item: only inside the job input containers. */
export interface InputBlobs {
  /** The blob, or an `ItemError` (`BLOB_NOT_ALLOWED`) when its container is not an input container. */
  blob(ref: BlobRef): BlobClient;
}

export function inputBlobs(blobs: BlobServiceClient, containers: InputContainers): InputBlobs {
  return {
    blob(ref) {
      if (!containers.allows(ref.container)) {
        throw new ItemError(
          'BLOB_NOT_ALLOWED',
          `${ref.container}/${ref.blob}: container "${ref.container}" is not a job input container; allowed: ${containers.describe()}`,
        );
      }
      return blobs.getContainerClient(ref.container).getBlobClient(ref.blob);
    },
  };
}

/** The app's and the host's containers no job may read: results, the lease, `<hub>-*`, `azure-webjobs-*`. */
export function reservedContainers(resultsContainer: string, leaseContainer: string, taskHubName: string): ContainerPattern[] {
  return [resultsContainer, leaseContainer, `${taskHubName.toLowerCase()}-`, 'azure-webjobs-'];
}
