/**
 * `"<container>/<blob name>"` references to blobs in the app's storage account (a job's
 * `itemsBlob`, the `wordcount` type's items). Parsing is strict on purpose: the reference comes from
 * a submitter and becomes a storage request path, so container names follow Azure's rule and blob
 * names are `/`-separated segments of `[A-Za-z0-9._-]`, never `.` or `..` (no traversal, no `%`
 * escapes, no empty segments). Narrower than Azure allows; widen here if a user needs more.
 *
 * The Functions host's own containers (`azure-webjobs-secrets` holds the function keys,
 * `azure-webjobs-hosts` its locks) are refused whatever the job: a key holder must not be able to
 * make the app read them. The app's own containers are refused for `itemsBlob` by the caller.
 */
export interface BlobRef {
  readonly container: string;
  readonly blob: string;
}

const CONTAINER = /^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$/;
const SEGMENT = /^[A-Za-z0-9._-]+$/;
const MAX_BLOB_NAME = 1024;
const HOST_CONTAINER_PREFIX = 'azure-webjobs-';

/** The reference, or a reason it is not one. */
export function parseBlobRef(value: unknown): BlobRef | { readonly reason: string } {
  if (typeof value !== 'string') return { reason: 'must be a string "<container>/<blob name>"' };
  const slash = value.indexOf('/');
  if (slash < 0) return { reason: `"${preview(value)}" has no "/": use "<container>/<blob name>"` };
  const container = value.slice(0, slash);
  const blob = value.slice(slash + 1);
  if (!CONTAINER.test(container)) {
    return { reason: `container "${preview(container)}" is not valid: use 3-63 lowercase letters, digits and single hyphens` };
  }
  if (container.startsWith(HOST_CONTAINER_PREFIX)) {
    return { reason: `container "${container}" belongs to the Functions host and may not be read by a job` };
  }
  if (blob.length === 0 || blob.length > MAX_BLOB_NAME) return { reason: `blob name must be 1-${MAX_BLOB_NAME} characters` };
  for (const segment of blob.split('/')) {
    if (segment === '.' || segment === '..') return { reason: `blob name "${preview(blob)}" contains a "${segment}" segment` };
    if (!SEGMENT.test(segment)) {
      return { reason: `blob name "${preview(blob)}" may only hold letters, digits, '.', '_', '-' and '/' between non-empty segments` };
    }
  }
  return { container, blob };
}

export function isBlobRef(value: BlobRef | { readonly reason: string }): value is BlobRef {
  return 'container' in value;
}

function preview(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
