/**
 * What the test run provides: the connection string of the Azurite the runner started for this
 * run, and names unique to one test so parallel test files never share a queue, blob or task hub.
 */
import { randomBytes } from 'node:crypto';

export function azuriteConnectionString(): string {
  const value = process.env.AZURITE_CONNECTION_STRING;
  if (value === undefined || value === '') {
    throw new Error('AZURITE_CONNECTION_STRING is not set: run the tests with `npm test` (the runner starts Azurite).');
  }
  return value;
}

/** A name valid as a container or queue name: `prefix-<random>`, lowercase, at most 63 characters. */
export function uniqueName(prefix: string): string {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/-+/g, '-').replace(/^-|-$/g, '').slice(0, 40) || 't';
  return `${clean}-${randomBytes(6).toString('hex')}`;
}
