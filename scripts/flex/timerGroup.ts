/** Flex Consumption's `function:leaderTimer` group: the leader timer only (scripts/flexShape.ts). */
import './leaderRuntime';
import '../../functions/leaderTimer';
