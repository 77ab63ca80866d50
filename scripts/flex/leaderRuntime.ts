/**
 * Builds the app's leader runtime as the app loads, in every scale group's instance: on Azure every
 * instance loads every function file, and functions/health.ts builds it there, so each instance runs
 * its lease watch and campaigns once an invocation hands it a Durable client (AppRoot.offer). An
 * instance of `npm start -- --flex` loads only its group's files, so its entry does what health.ts
 * would have done.
 */
import { appRoot } from '../../shared/app/appRoot';

appRoot().leader();
