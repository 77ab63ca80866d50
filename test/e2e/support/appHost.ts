/**
 * Which host the end-to-end tests (and the short chaos run) run the app on: the extensions host by
 * default (exthost/: the real Durable, queue and timer extensions, the app in a Node.js worker: what
 * users run, on Azure and with `func start`), or with `E2E_HOST=devhost` the development host, so
 * the same scenarios run on both (`E2E_HOST=devhost npm test -- e2e/`). Both answer with
 * devhost/testing's HostProcess. Without a .NET SDK the default fails each file with
 * ExtHostUnavailable, saying so and naming the switch; nothing is skipped.
 */
import { type HostProcess, startHostProcess } from 'devhost/testing';

import { ExtHostUnavailable, startExtHostProcess } from '../../../scripts/extHostProcess';

export type E2EHost = 'devhost' | 'extensions';

export function e2eHost(env: NodeJS.ProcessEnv = process.env): E2EHost {
  const value = (env.E2E_HOST ?? 'extensions').trim().toLowerCase();
  if (value === 'extensions' || value === '') return 'extensions';
  if (value === 'devhost') return 'devhost';
  throw new Error(`E2E_HOST must be devhost or extensions, not "${value}"`);
}

/** Both hosts, for the files that hold them to the same behaviour in one run whatever E2E_HOST says. */
export const BOTH_HOSTS: readonly E2EHost[] = ['devhost', 'extensions'];

/** One host process of the app on `host` (E2E_HOST's by default). */
export async function startAppHost(
  options: { appRoot: string; hostId: string; instanceId: string; env: Record<string, string>; timeoutMs?: number },
  host: E2EHost = e2eHost(),
): Promise<HostProcess> {
  if (host === 'extensions') {
    // The .NET host starts slower (JIT, the extensions' own listeners) than a Node.js process.
    return startExtHostProcess({ ...options, timeoutMs: Math.max(options.timeoutMs ?? 0, 120_000) }).catch((err: unknown) => {
      if (err instanceof ExtHostUnavailable) throw new ExtHostUnavailable(`${err.message} (E2E_HOST=devhost runs the end-to-end tests on the development host)`);
      throw err;
    });
  }
  return startHostProcess(options);
}

/** How test names say which host ran them: "extensions host" or "development host". */
export function e2eHostName(host: E2EHost = e2eHost()): string {
  return host === 'extensions' ? 'extensions host' : 'development host';
}
