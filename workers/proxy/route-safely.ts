import type { RouteDecision, Router, RouteRequest } from './proxy-types.js';

/**
 * Asks the router and turns a rejection into a refusal: a broken or stalled supervisor link must
 * reach the client as an immediate failure, never as an exception in a socket handler.
 */
export async function routeSafely(router: Router, request: RouteRequest): Promise<RouteDecision> {
  try {
    return await router.route(request);
  } catch {
    return { ok: false, reason: 'supervisor_unavailable' };
  }
}
