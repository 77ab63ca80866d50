/**
 * The job activities this app registered, and an orchestration that refuses to run without them.
 *
 * Why: a deployment that lost a function (functions/jobActivities.js not shipped, or
 * `AzureWebJobs.jobStep.Disabled` set) makes the two hosts disagree. The real Durable extension's
 * out-of-process shim drops a call of an activity that does not exist and the instance stays
 * `Running` for ever, with only `ExecutionStarted` in its history (exthost/README.md, "The
 * development host checked against the real extension"); the development host fails it. The job
 * orchestrations therefore check, at every episode and before any call, that each activity they
 * may call is registered and not disabled, and fail at once with `ACTIVITY_MISSING` naming what is
 * missing: the same on both hosts, on Azure, and in the job's status (`jobViews`).
 *
 * Deterministic for replay: the registry is filled when the function files load, before any
 * orchestration runs, and the settings are read once per process.
 */
import * as df from 'durable-functions';
import { type ActivityHandler, type OrchestrationContext, type OrchestrationHandler } from 'durable-functions';

/** The stable code a job's status shows for it (JobError.ts), at the start of the orchestration's failure text. */
export const ACTIVITY_MISSING = 'ACTIVITY_MISSING';

const registered = new Set<string>();

/** Registers an activity with the host (df.app.activity) and here, where the orchestrations look. */
export function registerJobActivity(name: string, handler: ActivityHandler): void {
  registered.add(name);
  df.app.activity(name, { handler });
}

/**
 * Whether the Functions host disables the function by app setting: `AzureWebJobs.<name>.Disabled`
 * (on Linux, where a setting name cannot hold a dot, `AzureWebJobs__<name>__Disabled`) set to
 * `true` or `1`.
 */
export function disabledBySetting(name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env[`AzureWebJobs.${name}.Disabled`] ?? env[`AzureWebJobs__${name}__Disabled`];
  return value !== undefined && /^(true|1)$/i.test(value.trim());
}

/** The names of `names` this process cannot run: not registered, or disabled. */
export function missingActivities(names: readonly string[], env: NodeJS.ProcessEnv = process.env): string[] {
  return names.filter((name) => !registered.has(name) || disabledBySetting(name, env));
}

/**
 * `handler`, failing at once (before it yields anything) when an activity of `names` is missing,
 * with a message that starts with ACTIVITY_MISSING and names each one.
 */
export function requiringActivities(names: readonly string[], handler: OrchestrationHandler): OrchestrationHandler {
  return function* (context: OrchestrationContext) {
    const missing = missingActivities(names);
    if (missing.length > 0) {
      const names = missing.map((n) => `'${n}'`).join(', ');
      // No path in the text: the job's status shows it, and public messages drop paths (errors.ts publicMessage).
      throw new Error(
        `${ACTIVITY_MISSING}: this deployment has no ${names} activity (not registered, or disabled by an ` +
          'AzureWebJobs.<name>.Disabled setting); deploy the app with its jobActivities functions enabled, then submit the job again.',
      );
    }
    return yield* handler(context);
  };
}
