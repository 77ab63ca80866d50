/**
 * Registers the job orchestration's activities; the logic and its guarantees are in
 * shared/jobs/JobActivities.ts. Inputs arrive as the JSON the orchestration passed.
 */
import * as df from 'durable-functions';

import { type AggregateInput, type ProgressInput, type RedispatchInput } from '../shared/jobs/JobActivities';
import { jobComponents } from '../shared/jobs/jobComponents';
import { JOB_ACTIVITIES } from '../shared/jobs/jobOrchestration';
import { type JobRun, type JobSummary } from '../shared/jobs/JobRun';

df.app.activity(JOB_ACTIVITIES.plan, { handler: (run: JobRun) => jobComponents().activities.plan(run) });
df.app.activity(JOB_ACTIVITIES.progress, { handler: (input: ProgressInput) => jobComponents().activities.progress(input) });
df.app.activity(JOB_ACTIVITIES.redispatch, { handler: (input: RedispatchInput) => jobComponents().activities.redispatch(input) });
df.app.activity(JOB_ACTIVITIES.aggregate, { handler: (input: AggregateInput) => jobComponents().activities.aggregate(input) });
df.app.activity(JOB_ACTIVITIES.finish, { handler: (summary: JobSummary) => jobComponents().activities.finish(summary) });
