/** Flex Consumption's `durable` scale group: the orchestrations and activities only (scripts/flexShape.ts). */
import './leaderRuntime';
import '../../functions/jobActivities';
import '../../functions/jobOrchestrator';
