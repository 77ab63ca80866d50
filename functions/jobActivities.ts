/**
 * Registers the job orchestration's activities; the logic and its guarantees are in
 * shared/jobs/run/JobActivities.ts. Inputs arrive as the JSON the orchestration passed.
 * Route: docs/architecture.md, "A submission from POST to result blob", steps 5, 7 and 8.
 */
import * as df from 'durable-functions';

import { appRoot } from '../shared/app/appRoot';
import { type JobSummary } from '../shared/jobs/api/JobSummary';
import { type StepInput } from '../shared/jobs/dispatch/ChunkDispatcher';
import { type AggregateInput } from '../shared/jobs/run/aggregation';
import { JOB_BATCH_PLAN } from '../shared/jobs/run/batchOrchestration';
import { type DeliverInput, type PlanInput } from '../shared/jobs/run/JobActivities';
import { JOB_ACTIVITIES } from '../shared/jobs/run/jobOrchestration';

df.app.activity(JOB_ACTIVITIES.plan, { handler: (input: PlanInput) => appRoot().jobs.activities.plan(input) });
df.app.activity(JOB_BATCH_PLAN, { handler: (inputs: PlanInput[]) => appRoot().jobs.activities.planShared(inputs) });
df.app.activity(JOB_ACTIVITIES.step, { handler: (input: StepInput) => appRoot().jobs.activities.step(input) });
df.app.activity(JOB_ACTIVITIES.aggregate, { handler: (input: AggregateInput) => appRoot().jobs.activities.aggregate(input) });
df.app.activity(JOB_ACTIVITIES.finish, { handler: (summary: JobSummary) => appRoot().jobs.activities.finish(summary) });
df.app.activity(JOB_ACTIVITIES.deliver, { handler: (input: DeliverInput) => appRoot().jobs.activities.deliver(input) });
