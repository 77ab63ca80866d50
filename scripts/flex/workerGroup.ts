/** Flex Consumption's `function:workItemsWorker` group: the work-items worker only (scripts/flexShape.ts). */
import '../../functions/workItemsWorker';
