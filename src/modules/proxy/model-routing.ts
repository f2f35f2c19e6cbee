import type { RegistryService } from '../registry/registry.service.js';
import type { Exchange } from './exchange.js';
import { failExchange } from './exchange-end.js';
import { quotedModel } from './router-error.js';

export { noReplicaMessage } from './router-error.js';

/**
 * contract §4.3: a request naming a model no replica serves (none lists it, and every list is known)
 * gets 404 `model_not_found`, never forwarded. True when it was answered here.
 */
export function refuseUnknownModel(ex: Exchange, registry: RegistryService): boolean {
  const model = ex.session?.model;
  if (model === undefined || registry.mayServe(model)) return false;
  failExchange(ex, 'model_not_found', 'rejected', `the model ${quotedModel(model)} does not exist: no replica of this router serves it`);
  return true;
}
