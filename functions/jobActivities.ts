/**
 * Registers the job orchestration's activities; the logic and its guarantees are in
 * shared/jobs/run/JobActivities.ts. Inputs arrive as the JSON the orchestration passed. Registered
 * through registeredActivities.ts, so the orchestrations can tell a deployment that lost them.
 * Route: docs/architecture.md, "A submission from POST to result blob", steps 5, 7 and 8.
 */
import { appRoot } from '../shared/app/appRoot';
import { type StepInput } from '../shared/jobs/dispatch/ChunkDispatcher';
import { type JobSummary } from '../shared/jobs/JobSummary';
import { type AggregateInput } from '../shared/jobs/run/aggregation';
import { JOB_BATCH_PLAN } from '../shared/jobs/run/batchOrchestration';
import { type DeliverInput, type PlanInput } from '../shared/jobs/run/JobActivities';
import { JOB_ACTIVITIES } from '../shared/jobs/run/jobOrchestration';
import { registerJobActivity } from '../shared/jobs/run/registeredActivities';

registerJobActivity(JOB_ACTIVITIES.plan, (input: PlanInput) => appRoot().jobs.activities.plan(input));
registerJobActivity(JOB_BATCH_PLAN, (inputs: PlanInput[]) => appRoot().jobs.activities.planShared(inputs));
registerJobActivity(JOB_ACTIVITIES.step, (input: StepInput) => appRoot().jobs.activities.step(input));
registerJobActivity(JOB_ACTIVITIES.aggregate, (input: AggregateInput) => appRoot().jobs.activities.aggregate(input));
registerJobActivity(JOB_ACTIVITIES.finish, (summary: JobSummary) => appRoot().jobs.activities.finish(summary));
registerJobActivity(JOB_ACTIVITIES.deliver, (input: DeliverInput) => appRoot().jobs.activities.deliver(input));
