/**
 * Which host the end-to-end tests run the app on: the development host (default), or with
 * `E2E_HOST=extensions` the extensions host (exthost/: the real Durable, queue and timer
 * extensions, the app in a Node.js worker), so the same scenarios can be run on both
 * (`E2E_HOST=extensions npm test -- e2e/`). Both answer with devhost/testing's HostProcess.
 */
import { type HostProcess, startHostProcess } from 'devhost/testing';

import { startExtHostProcess } from '../../../scripts/extHostProcess';

export type E2EHost = 'devhost' | 'extensions';

export function e2eHost(env: NodeJS.ProcessEnv = process.env): E2EHost {
  const value = (env.E2E_HOST ?? 'devhost').trim().toLowerCase();
  if (value === 'devhost' || value === '') return 'devhost';
  if (value === 'extensions') return 'extensions';
  throw new Error(`E2E_HOST must be devhost or extensions, not "${value}"`);
}

export async function startAppHost(options: { appRoot: string; hostId: string; instanceId: string; env: Record<string, string>; timeoutMs?: number }): Promise<HostProcess> {
  if (e2eHost() === 'extensions') {
    // The .NET host starts slower (JIT, the extensions' own listeners) than a Node.js process.
    return startExtHostProcess({ ...options, timeoutMs: Math.max(options.timeoutMs ?? 0, 120_000) });
  }
  return startHostProcess(options);
}
