/**
 * A package README's first example, made to run against a service on the private network: the
 * example's code as written, with the default addresses it names (the proxy on 9250/9251, the
 * API on 8080) pointed at the test service's ports and the placeholder site at the network's
 * whoami server. What the example does is untouched.
 */

export class ExampleNotFoundError extends Error {
  constructor(what: string) {
    super(`the README has no ${what}: the release check runs the README's first example as a user would copy it`);
    this.name = 'ExampleNotFoundError';
  }
}

/** The code of the first fenced block in `lang` (```js, ```python). */
export function firstExample(readme: string, lang: string): string {
  const m = new RegExp('^```' + lang + '[^\\n]*\\n([\\s\\S]*?)^```', 'm').exec(readme);
  if (!m) throw new ExampleNotFoundError(`\`\`\`${lang} example`);
  return m[1] as string;
}

export interface TestServiceAddresses {
  readonly socksPort: number;
  readonly httpPort: number;
  readonly apiPort: number;
  /** An http:// URL on the private network that answers with the exit's address. */
  readonly siteUrl: string;
}

/** The shipped defaults the README examples use. */
const DEFAULT_ADDRESSES = { socks: '127.0.0.1:9250', http: '127.0.0.1:9251', api: '127.0.0.1:8080' } as const;

/** Placeholder sites (RFC 2606 `.example` names), with their paths. */
const PLACEHOLDER_SITE = /https?:\/\/[a-z0-9.-]+\.example(?::\d+)?(\/[^\s'"`)]*)?/g;

/** `code` with the default addresses and the placeholder sites replaced by the test service's. */
export function pointAtTestService(code: string, to: TestServiceAddresses): string {
  if (!new RegExp(PLACEHOLDER_SITE.source).test(code)) throw new ExampleNotFoundError('request to a placeholder site (https://….example/) in its first example');
  const site = new URL(to.siteUrl);
  return code
    .replaceAll(DEFAULT_ADDRESSES.socks, `127.0.0.1:${to.socksPort}`)
    .replaceAll(DEFAULT_ADDRESSES.http, `127.0.0.1:${to.httpPort}`)
    .replaceAll(DEFAULT_ADDRESSES.api, `127.0.0.1:${to.apiPort}`)
    .replace(PLACEHOLDER_SITE, (_all, pathname: string | undefined) => `${site.origin}${pathname ?? '/'}`);
}
