/**
 * What the test run provides: the connection string of the Azurite that scripts/runTests started
 * for this run, and names unique to one test so parallel test files never share a queue or blob.
 */
import { randomBytes } from 'node:crypto';

export function azuriteConnectionString(): string {
  const value = process.env.AZURITE_CONNECTION_STRING;
  if (value === undefined || value === '') {
    throw new Error('AZURITE_CONNECTION_STRING is not set: run the tests with `npm test` (scripts/runTests starts Azurite).');
  }
  return value;
}

/** A name valid as a container or queue name: `prefix-<random>`, lowercase, at most 63 characters. */
export function uniqueName(prefix: string): string {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/-+/g, '-').replace(/^-|-$/g, '').slice(0, 40) || 't';
  return `${clean}-${randomBytes(6).toString('hex')}`;
}

/** A name valid as a table name (letters and digits, starting with a letter): `<prefix><random>`, at most 63 characters. */
export function uniqueTableName(prefix: string): string {
  const clean = prefix.replace(/[^A-Za-z0-9]/g, '').slice(0, 40);
  return `${/^[A-Za-z]/.test(clean) ? clean : `t${clean}`}${randomBytes(6).toString('hex')}`;
}
