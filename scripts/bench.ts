/**
 * `npm run bench [-- <bench name>... [--trials N]]`: starts its own Azurite (free ports, temporary
 * data), runs the benchmarks listed in bench/index.ts (all, or those named), prints their figures,
 * and stops Azurite. Figures go to stdout, progress to stderr.
 */
import { startAzurite } from 'devhost/testing';

import { type BenchContext, benches } from '../bench/index';

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
  const selected = names.length === 0 ? benches : benches.filter((b) => names.includes(b.name));
  const azurite = await startAzurite();
  const ctx: BenchContext = {
    connectionString: azurite.connectionString,
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
      console.log(`\n(${bench.name} took ${((Date.now() - started) / 1000).toFixed(0)} s; node ${process.version}, Azurite on this machine)`);
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
