import { expect } from 'chai';
import type { HealApi } from './api-client.js';
import { exitIpOf } from './session-fetch.js';
import type { RunningService } from '../fixtures/service.js';

/**
 * What the destination sees through each instance: requests under fresh session keys (each new
 * key is placed on the least loaded instance) until every one of `size` instances served one;
 * instance → the source address whoami answered. An instance seen from two addresses fails.
 */
export async function whoamiByInstance(svc: RunningService, api: HealApi, size: number, prefix: string): Promise<Map<number, string>> {
  const seen = new Map<number, string>();
  for (let i = 0; i < 8 * size && seen.size < size; i++) {
    const key = `${prefix}-${i}`;
    const ip = await exitIpOf(svc, key);
    const { instance, exit_ip } = await api.session(key);
    expect(exit_ip, `session ${key}: the exit_ip the API names is what the destination saw`).to.equal(ip);
    const before = seen.get(instance);
    if (before !== undefined) expect(ip, `instance ${instance} left through two addresses`).to.equal(before);
    seen.set(instance, ip);
  }
  expect(seen.size, 'every instance served a request').to.equal(size);
  return seen;
}
