/**
 * The app's graceful stop (AppRoot.stop: a leader drains its pass, releases the lease and rings the
 * work-items doorbell), on the host's app-terminate hook: SIGTERM on a scale-in or a restart.
 * Imported by every function file whose instance can lead (the timer, the work-items worker, the
 * jobs API), so it is registered once in each process whichever of them it loads. On Azure every
 * instance loads every function file; `npm start -- --flex` (scripts/flexShape.ts) loads only a
 * scale group's, and there a worker or API instance that leads must release its lease on a
 * scale-in as the timer's does: the app does not depend on which files an instance loads.
 */
import { app } from '@azure/functions';

import { appRoot } from './appRoot';

app.hook.appTerminate(() => appRoot().stop());
