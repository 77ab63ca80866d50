/** Flex Consumption's `http` scale group: the app's HTTP functions only (scripts/flexShape.ts). */
import '../../functions/dashboard';
import '../../functions/health';
import '../../functions/jobsApi';
import '../../functions/leaderApi';
import '../../functions/openapi';
import '../../functions/queuesApi';
