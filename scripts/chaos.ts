/**
 * `npm run chaos [-- --short] [--minutes N] [--seed N] [--instances N] [--separate-apps] [--quiet]`:
 * runs the chaos harness (test/chaos/) against this build and prints its summary. Exit code 0
 * when the checker found no violation, 1 when it found one, 2 on bad options or a harness failure.
 */
import { randomInt } from 'node:crypto';

import { parseStepFaults, type StepFault } from '../test/chaos/chaosPlan';
import { runChaos } from '../test/chaos/runChaos';

export class ChaosArgsError extends Error {
  override readonly name = 'ChaosArgsError';
}

export interface ChaosArgs {
  readonly mode: 'short' | 'long';
  readonly seed: number;
  readonly instances: number;
  readonly separateApps: boolean;
  readonly minutes: number;
  readonly quiet: boolean;
  readonly stepFaults?: readonly StepFault[];
}

const USAGE =
  'options: --short, --minutes N (long mode: minutes of faults, default 8), --seed N, --instances N (2-8; 3 short, 4 long), --separate-apps, ' +
  '--step-faults kill@start-message,pause@start-read,... (the step faults to use), --quiet';

export function parseChaosArgs(argv: readonly string[], randomSeed: () => number = () => randomInt(1, 1_000_000)): ChaosArgs {
  let short = false;
  let seed: number | undefined;
  let instances: number | undefined;
  let separateApps = false;
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
    else if (name === '--quiet') quiet = true;
    else if (name === '--step-faults') {
      const parsed = parseStepFaults(inline ?? argv[++i] ?? '');
      if (typeof parsed === 'string') throw new ChaosArgsError(`--step-faults: ${parsed}`);
      stepFaults = parsed;
    }
    else throw new ChaosArgsError(`unknown option ${arg}; ${USAGE}`);
  }
  if (seed !== undefined && (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffffffff)) throw new ChaosArgsError('--seed must be an integer from 0 to 4294967295');
  if (instances !== undefined && (!Number.isInteger(instances) || instances < 2 || instances > 8)) throw new ChaosArgsError('--instances must be an integer from 2 to 8');
  if (minutes !== undefined && (short || !(minutes >= 1 && minutes <= 24 * 60))) throw new ChaosArgsError('--minutes (long mode only) must be from 1 to 1440');
  return {
    mode: short ? 'short' : 'long',
    seed: seed ?? randomSeed(),
    instances: instances ?? (short ? 3 : 4),
    separateApps,
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
  console.log(`${stamp()} ${args.mode} mode, seed ${args.seed}, ${args.instances} instances, ${args.separateApps ? 'separate apps' : 'one app'}`);
  const report = await runChaos({
    mode: args.mode,
    seed: args.seed,
    instances: args.instances,
    separateApps: args.separateApps,
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
