/** Flex Consumption's `function:workItemsWorker` group: the work-items worker only (scripts/flexShape.ts). */
import './leaderRuntime';
import '../../functions/workItemsWorker';
