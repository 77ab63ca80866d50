/**
 * A development-host process with only the Durable backend and the reference app, for the crash
 * test: it serves the Durable HTTP API on a free loopback port, dispatches the task hub named by
 * DURABLE_TASK_HUB against the Azurite in AZURITE_CONNECTION_STRING, prints `READY <baseUrl>` and
 * runs until killed.
 */
import { startDurableTestHost } from './durableTestHost';

async function main(): Promise<void> {
  const taskHub = process.env.DURABLE_TASK_HUB;
  if (taskHub === undefined || taskHub === '') throw new Error('DURABLE_TASK_HUB is not set.');
  const workVisibilitySeconds = Number(process.env.DURABLE_WORK_VISIBILITY_SECONDS ?? '30');
  const host = await startDurableTestHost({ taskHub, tuning: { workVisibilitySeconds } });
  console.log(`READY ${host.baseUrl}`);
  const stop = (): void => {
    void host.stop().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
