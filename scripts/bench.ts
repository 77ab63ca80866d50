/**
 * `npm run bench [-- <bench name>... [--host extensions|devhost] [--trials N]]`: starts its own
 * Azurite (free ports, temporary data), runs the benchmarks listed in bench/index.ts (all, or those
 * named) with the app on the extensions host (the real Durable, queue and timer extensions; built
 * first) or, with `--host devhost`, on the development host, prints their figures, and stops
 * Azurite. Figures go to stdout, progress to stderr; each bench's footer names the host.
 */
import { startAzurite } from 'devhost/testing';

import { BENCH_HOSTS, type BenchHost, benchHostName } from '../bench/appCluster';
import { type BenchContext, benches } from '../bench/index';
import { buildExtHost } from './extHostProcess';

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const names: string[] = [];
  const options = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg.startsWith('--')) options.set(arg.slice(2), args[++i] ?? '');
    else names.push(arg);
  }
  const unknown = names.filter((n) => !benches.some((b) => b.name === n));
  if (unknown.length > 0) {
    console.error(`Unknown bench ${unknown.join(', ')}; known: ${benches.map((b) => b.name).join(', ')}`);
    return 2;
  }
  const host = (options.get('host') ?? 'extensions') as BenchHost;
  if (!BENCH_HOSTS.includes(host)) {
    console.error(`--host must be one of ${BENCH_HOSTS.join(', ')}`);
    return 2;
  }
  // Built once, before the first bench's clock starts (a first NuGet restore takes a while).
  if (host === 'extensions') buildExtHost({ progress: (line) => console.error(`[bench] dotnet build: ${line}`) });
  const selected = names.length === 0 ? benches : benches.filter((b) => names.includes(b.name));
  const azurite = await startAzurite();
  const ctx: BenchContext = {
    connectionString: azurite.connectionString,
    host,
    note: (message) => console.error(`[bench] ${message}`),
    options,
  };
  try {
    for (const bench of selected) {
      ctx.note(`${bench.name}: ${bench.description}`);
      const started = Date.now();
      const result = await bench.run(ctx);
      console.log(`\n## ${result.title}\n`);
      for (const line of result.lines) console.log(line);
      console.log(`\n(${bench.name} took ${((Date.now() - started) / 1000).toFixed(0)} s; the app on the ${benchHostName(host)}; node ${process.version}, Azurite on this machine)`);
    }
    return 0;
  } finally {
    await azurite.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
