/**
 * Registers the job orchestration's activities; the logic and its guarantees are in
 * shared/jobs/JobActivities.ts. Inputs arrive as the JSON the orchestration passed.
 */
import * as df from 'durable-functions';

import { type StepInput } from '../shared/jobs/dispatch/ChunkDispatcher';
import { type AggregateInput, type PlanInput } from '../shared/jobs/JobActivities';
import { jobComponents } from '../shared/jobs/jobComponents';
import { JOB_ACTIVITIES } from '../shared/jobs/jobOrchestration';
import { type JobSummary } from '../shared/jobs/JobRun';

df.app.activity(JOB_ACTIVITIES.plan, { handler: (input: PlanInput) => jobComponents().activities.plan(input) });
df.app.activity(JOB_ACTIVITIES.step, { handler: (input: StepInput) => jobComponents().activities.step(input) });
df.app.activity(JOB_ACTIVITIES.aggregate, { handler: (input: AggregateInput) => jobComponents().activities.aggregate(input) });
df.app.activity(JOB_ACTIVITIES.finish, { handler: (summary: JobSummary) => jobComponents().activities.finish(summary) });
