/**
 * Registers the job orchestration (see shared/jobs/run/jobOrchestration.ts for what it guarantees).
 * One instance per start of a job, id `job-<jobId>` (`job-<jobId>.<n>` when a start is made again),
 * started by the leader's coordination pass; small jobs started together share one (`batch-<uuid>`).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 4.
 */
import * as df from 'durable-functions';

import { JOB_BATCH_ORCHESTRATOR, JOB_BATCH_PLAN, jobBatchOrchestration } from '../shared/jobs/run/batchOrchestration';
import { JOB_ACTIVITIES, JOB_ORCHESTRATOR, jobOrchestration } from '../shared/jobs/run/jobOrchestration';
import { requiringActivities } from '../shared/jobs/run/registeredActivities';

// A deployment without the activities fails each run at once with ACTIVITY_MISSING (registeredActivities.ts says why).
const activities = Object.values(JOB_ACTIVITIES);

df.app.orchestration(JOB_ORCHESTRATOR, requiringActivities(activities, jobOrchestration));
// A shared run of several small jobs started together (shared/jobs/run/batchOrchestration.ts), id `batch-<uuid>`.
df.app.orchestration(JOB_BATCH_ORCHESTRATOR, requiringActivities([...activities, JOB_BATCH_PLAN], jobBatchOrchestration));
