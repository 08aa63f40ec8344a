import { expect } from 'chai';
import { ControlCommandError } from '../../supervisor/tor/errors.js';
import { RelayDirectory } from '../../supervisor/tor/relay-directory.js';

const FP = '0123456789ABCDEF0123456789ABCDEF01234567';
const IDENTITY = Buffer.from(FP, 'hex').toString('base64').replace(/=+$/, '');

function fakeTor(country: string | Error): { calls: string[]; getInfo: (keys: readonly string[]) => Promise<Map<string, string>> } {
  const calls: string[] = [];
  return {
    calls,
    getInfo: async (keys) => {
      const key = keys[0]!;
      calls.push(key);
      if (key === `ns/id/${FP}`) return new Map([[key, `r exit1 ${IDENTITY} 2026-11-22 05:00:00 127.0.0.11 5011 0\ns Exit Running`]]);
      if (key === 'ip-to-country/127.0.0.11') {
        if (country instanceof Error) throw country;
        return new Map([[key, country]]);
      }
      throw new ControlCommandError('GETINFO', 552, `Unrecognized key "${key}"`);
    },
  };
}

describe('tor relay directory', () => {
  it('resolves address, nickname and country once per fingerprint', async () => {
    const tor = fakeTor('DE');
    const dir = new RelayDirectory(tor.getInfo);
    const [a, b] = await Promise.all([dir.resolve(FP), dir.resolve(FP)]);
    expect(a).to.deep.equal({ fingerprint: FP, nickname: 'exit1', address: '127.0.0.11', country: 'de' });
    expect(b).to.equal(a);
    expect(await dir.resolve(FP)).to.equal(a);
    expect(dir.cached(FP)).to.equal(a);
    expect(tor.calls).to.deep.equal([`ns/id/${FP}`, 'ip-to-country/127.0.0.11']);
  });

  it('maps ?? and missing GeoIP data to an empty country', async () => {
    expect((await new RelayDirectory(fakeTor('??').getInfo).resolve(FP)).country).to.equal('');
    const noGeo = new ControlCommandError('GETINFO', 551, 'GeoIP data not loaded');
    expect((await new RelayDirectory(fakeTor(noGeo).getInfo).resolve(FP)).country).to.equal('');
  });

  it('does not cache failures, and clear() forgets everything', async () => {
    const dir = new RelayDirectory(fakeTor('us').getInfo);
    const unknown = 'F'.repeat(40);
    let failed: unknown;
    await dir.resolve(unknown).catch((e: unknown) => (failed = e));
    expect(failed).to.be.instanceOf(ControlCommandError);
    expect(dir.cached(unknown)).to.equal(undefined);
    await dir.resolve(FP);
    dir.clear();
    expect(dir.cached(FP)).to.equal(undefined);
  });

  it('refuses something that is not a fingerprint', async () => {
    let failed: unknown;
    await new RelayDirectory(fakeTor('us').getInfo).resolve('nick').catch((e: unknown) => (failed = e));
    expect(failed).to.be.instanceOf(RangeError);
  });
});
