import { expect } from 'chai';
import { curlHttp, curlSocks } from '../support/curl.js';
import { TEST_PROXY_TOKEN, startService, type RunningService } from '../support/service-fixture.js';

describe('bin/exitpool on the private network (smoke)', function () {
  this.timeout(240_000);
  let svc: RunningService;
  before(async () => {
    svc = await startService({ POOL_SIZE: '2' });
    await svc.waitReady(2);
  });
  after(async () => {
    const code = await svc?.stop();
    expect(code).to.equal(0);
  });

  it('serves one session through both listeners with the same exit', async () => {
    const a = await curlSocks(svc.socksPort, 'smoke', TEST_PROXY_TOKEN, svc.whoamiUrl);
    expect(a.code, a.stderr).to.equal(0);
    expect(a.stdout.trim()).to.match(/^127\.0\.0\.\d+$/);
    const b = await curlHttp(svc.httpPort, 'smoke', TEST_PROXY_TOKEN, svc.whoamiUrl);
    expect(b.code, b.stderr).to.equal(0);
    expect(b.stdout.trim()).to.equal(a.stdout.trim());
  });
});
