import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The packages a fresh process has loaded (CommonJS ones, which is what these are) after
 * importing `entry`: each costs every such process its memory whether or not it is used
 * (docs/performance.md, "Next to the peers", RSS).
 */
function packagesLoadedBy(entry: string): string[] {
  const script = `
    import { createRequire } from 'node:module';
    await import(${JSON.stringify(path.join(dist, entry))});
    const names = Object.keys(createRequire(import.meta.url).cache).map((f) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(f)?.[1]).filter(Boolean);
    console.log(JSON.stringify([...new Set(names)]));`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as string[];
}

describe('what each process loads', function () {
  this.timeout(30_000);

  it('the supervisor loads the Redis client only for a node configured with Redis', () => {
    const loaded = packagesLoadedBy('supervisor/service.js');
    expect(loaded).to.include('prom-client');
    expect(loaded).not.to.include('ioredis');
    // The check sees a CommonJS package loaded through an ES import, such as the fleet's.
    expect(packagesLoadedBy('supervisor/fleet/fleet-member.js')).to.include('ioredis');
  });

  it('a proxy worker loads neither the API’s HTTP framework nor the metrics library nor Redis', () => {
    const loaded = packagesLoadedBy('workers/proxy-worker/proxy-worker.js');
    for (const name of ['express', 'prom-client', 'ioredis']) expect(loaded).not.to.include(name);
  });
});
