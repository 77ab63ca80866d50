/**
 * `npm run chaos [-- --short] [--minutes N] [--seed N] [--instances N] [--separate-apps] [--flex] [--host devhost|extensions] [--quiet]`:
 * runs the chaos harness (test/chaos/) against this build and prints its summary. Exit code 0
 * when the checker found no violation, 1 when it found one, 2 on bad options or a harness failure.
 * `--host extensions` runs every instance on the extensions host (exthost/, needs the .NET SDK);
 * without `--host`, `E2E_HOST` decides as for the end-to-end tests (the extensions host unless it says devhost).
 * `--flex` runs the instances in Flex Consumption's shape (scripts/flexShape.ts: one per scale group
 * and two workers, as `npm start -- --flex`) instead of N instances that each run every function.
 */
import { randomInt } from 'node:crypto';

import { parseStepFaults, type StepFault } from '../test/chaos/chaosPlan';
import { runChaos } from '../test/chaos/runChaos';
import { type E2EHost, e2eHost } from '../test/e2e/support/appHost';
import { flexInstances } from './flexShape';

export class ChaosArgsError extends Error {
  override readonly name = 'ChaosArgsError';
}

export interface ChaosArgs {
  readonly host: E2EHost;
  readonly mode: 'short' | 'long';
  readonly seed: number;
  readonly instances: number;
  readonly separateApps: boolean;
  /** Flex Consumption's shape: `instances` is then its count (5). */
  readonly flex: boolean;
  readonly minutes: number;
  readonly quiet: boolean;
  readonly stepFaults?: readonly StepFault[];
}

const USAGE =
  'options: --short, --minutes N (long mode: minutes of faults, default 8), --seed N, --instances N (2-8; 3 short, 4 long), --separate-apps, ' +
  "--flex (Flex Consumption's shape: timer-1, durable-1, http-1, worker-1, worker-2), " +
  '--step-faults kill@start-message,pause@start-read,... (the step faults to use), ' +
  '--host devhost|extensions (default: E2E_HOST, else extensions), --quiet';

const HOSTS: readonly E2EHost[] = ['devhost', 'extensions'];

export function parseChaosArgs(
  argv: readonly string[],
  randomSeed: () => number = () => randomInt(1, 1_000_000),
  env: NodeJS.ProcessEnv = process.env,
): ChaosArgs {
  let host: E2EHost | undefined;
  let short = false;
  let seed: number | undefined;
  let instances: number | undefined;
  let separateApps = false;
  let flex = false;
  let minutes: number | undefined;
  let quiet = false;
  let stepFaults: StepFault[] | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const [name, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = (): number => {
      const text = inline ?? argv[++i];
      const n = Number(text);
      if (text === undefined || text === '' || !Number.isFinite(n)) throw new ChaosArgsError(`${name} needs a number`);
      return n;
    };
    if (name === '--short') short = true;
    else if (name === '--long') short = false;
    else if (name === '--seed') seed = value();
    else if (name === '--instances') instances = value();
    else if (name === '--minutes') minutes = value();
    else if (name === '--separate-apps') separateApps = true;
    else if (name === '--flex') flex = true;
    else if (name === '--quiet') quiet = true;
    else if (name === '--host') {
      const choice = inline ?? argv[++i] ?? '';
      if (!(HOSTS as readonly string[]).includes(choice)) throw new ChaosArgsError(`--host must be one of ${HOSTS.join(', ')}`);
      host = choice as E2EHost;
    }
    else if (name === '--step-faults') {
      const parsed = parseStepFaults(inline ?? argv[++i] ?? '');
      if (typeof parsed === 'string') throw new ChaosArgsError(`--step-faults: ${parsed}`);
      stepFaults = parsed;
    }
    else throw new ChaosArgsError(`unknown option ${arg}; ${USAGE}`);
  }
  if (seed !== undefined && (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffffffff)) throw new ChaosArgsError('--seed must be an integer from 0 to 4294967295');
  if (instances !== undefined && (!Number.isInteger(instances) || instances < 2 || instances > 8)) throw new ChaosArgsError('--instances must be an integer from 2 to 8');
  if (flex && (instances !== undefined || separateApps)) throw new ChaosArgsError('--flex runs its own instances (one per scale group, two workers, one app): leave out --instances and --separate-apps');
  if (minutes !== undefined && (short || !(minutes >= 1 && minutes <= 24 * 60))) throw new ChaosArgsError('--minutes (long mode only) must be from 1 to 1440');
  if (host === undefined) {
    try {
      host = e2eHost(env);
    } catch (err) {
      throw new ChaosArgsError(err instanceof Error ? err.message : String(err));
    }
  }
  return {
    host,
    mode: short ? 'short' : 'long',
    seed: seed ?? randomSeed(),
    instances: flex ? flexInstances().length : (instances ?? (short ? 3 : 4)),
    separateApps,
    flex,
    minutes: minutes ?? 8,
    quiet,
    ...(stepFaults === undefined ? {} : { stepFaults }),
  };
}

async function main(): Promise<number> {
  let args: ChaosArgs;
  try {
    args = parseChaosArgs(process.argv.slice(2));
  } catch (err) {
    console.error(`npm run chaos: ${err instanceof Error ? err.message : String(err)}`);
    return 2;
  }
  const started = Date.now();
  const stamp = (): string => `[chaos +${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s]`;
  const hostName = args.host === 'extensions' ? 'extensions host' : 'development host';
  const apps = args.flex ? "one app in Flex Consumption's shape" : args.separateApps ? 'separate apps' : 'one app';
  console.log(`${stamp()} ${args.mode} mode, seed ${args.seed}, ${args.instances} instances, ${apps}, on the ${hostName}`);
  const report = await runChaos({
    host: args.host,
    mode: args.mode,
    seed: args.seed,
    instances: args.instances,
    separateApps: args.separateApps,
    flex: args.flex,
    faultPhaseMs: args.minutes * 60_000,
    ...(args.stepFaults === undefined ? {} : { stepFaults: args.stepFaults }),
    ...(args.quiet ? {} : { progress: (line: string) => console.log(`${stamp()} ${line}`) }),
  });
  console.log(`\n${report.summary}`);
  return report.violations.length === 0 ? 0 : 1;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`npm run chaos: the harness failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exit(2);
    },
  );
}
