/**
 * Registers the job orchestration (see shared/jobs/run/jobOrchestration.ts for what it guarantees).
 * One instance per start of a job, id `job-<jobId>` (`job-<jobId>.<n>` when a start is made again),
 * started by the leader's coordination pass; small jobs started together share one (`batch-<uuid>`).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 4.
 */
import * as df from 'durable-functions';

import { JOB_BATCH_ORCHESTRATOR, jobBatchOrchestration } from '../shared/jobs/run/batchOrchestration';
import { JOB_ORCHESTRATOR, jobOrchestration } from '../shared/jobs/run/jobOrchestration';

df.app.orchestration(JOB_ORCHESTRATOR, jobOrchestration);
// A shared run of several small jobs started together (shared/jobs/run/batchOrchestration.ts), id `batch-<uuid>`.
df.app.orchestration(JOB_BATCH_ORCHESTRATOR, jobBatchOrchestration);
