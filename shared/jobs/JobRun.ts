/**
 * A job run: the orchestration's input, built by the coordination pass from an accepted submission
 * and stamped with the leader's epoch and the start's id. Plain JSON. What a run reports is in
 * JobSummary.ts, its instance ids in jobIds.ts, the messages its chunks travel in in messageCodec.ts.
 */
import { type JobReply } from './delivery/DeliveryTargets';
import { type JobOptions } from './jobLimits';
import { type ItemSource } from './JobSubmission';

export interface JobRun {
  readonly jobId: string;
  readonly workType: string;
  readonly fingerprint: string;
  readonly options: JobOptions;
  readonly source: ItemSource;
  /** The leader epoch that started the job (fencing: every side effect carries it). */
  readonly epoch: number;
  readonly holder: string;
  readonly submittedAt: string;
  readonly via: 'http' | 'queue';
  /** This start's id, named by the job's start record (JobStore `start.json`): the run does work only while the record names it. */
  readonly startId: string;
  /** Where the outcome goes when the job ends (the submission's `replyTo`, `correlationId`, `callbackUrl`). */
  readonly reply?: JobReply;
  /** Set by the intake when the outcome is to be delivered (a reply, or the outcome stream): the run ends with the deliver activity. */
  readonly deliver?: true;
}
