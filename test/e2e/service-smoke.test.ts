import { expect } from 'chai';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { TEST_PROXY_TOKEN, withService } from '../support/fixtures/service.js';

describe('bin/exitpool on the private network (smoke)', function () {
  this.timeout(240_000);
  const suite = withService({ POOL_SIZE: '2' }, { ready: 2 });

  it('serves one session through both listeners with the same exit', async () => {
    const a = await curlSocks(suite.svc.socksPort, 'smoke', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(a.code, a.stderr).to.equal(0);
    expect(a.stdout.trim()).to.match(/^127\.\d+\.\d+\.\d+$/);
    const b = await curlHttp(suite.svc.httpPort, 'smoke', TEST_PROXY_TOKEN, suite.svc.whoamiUrl);
    expect(b.code, b.stderr).to.equal(0);
    expect(b.stdout.trim()).to.equal(a.stdout.trim());
  });
});
