/** Flex Consumption's `function:leaderTimer` group: the leader timer only (scripts/flexShape.ts). */
import '../../functions/leaderTimer';
