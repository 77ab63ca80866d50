/**
 * The coordination pass the leader runs (on acquiring, on each of its timer ticks, and on the
 * runtime's own interval while it leads). For now it only records that epoch E coordinated; the
 * job pipeline replaces this body with its own pass. A pass must be idempotent and carry its epoch.
 */
import { type DurableClient } from 'durable-functions';

import { type CoordinationPass } from '../shared/leader/CoordinatorRuntime';
import { createLogger } from '../shared/observability/log';

export interface CoordinatorServices {
  durableClient?: DurableClient;
}

const log = createLogger('coordinator');

export const coordinationPass: CoordinationPass<CoordinatorServices> = (ctx) => {
  log.debug('leader.pass', { epoch: ctx.epoch, holder: ctx.holder, hasDurableClient: ctx.services.durableClient !== undefined });
  return Promise.resolve();
};
