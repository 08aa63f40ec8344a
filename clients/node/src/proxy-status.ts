/**
 * The HTTP proxy's `Proxy-Status` (RFC 9209), read as the RFC 8941 structured field it is: a
 * List of Items, one per intermediary, each a proxy name with parameters (`error`, `details`,
 * …). `details` is an sf-string and may hold `;` or `,` (the bad-username message does), so
 * only a structured-field parser reads it right: structured-headers, a maintained one.
 */
import { DisplayString, isInnerList, parseList, ParseError, Token, type BareItem } from 'structured-headers';

/** One intermediary's member of Proxy-Status. */
export interface ProxyStatus {
  /** The intermediary's name (`exitpool` for exitpool's proxies). */
  proxy: string;
  /** The RFC 9209 error type ('' when the member has none). */
  error: string;
  /** The free text the proxy gave ('' when none). */
  details: string;
}

/** The name exitpool's proxies give themselves in Proxy-Status. */
export const EXITPOOL_PROXY_NAME = 'exitpool';

/** A String, Token or Display String as text; '' for anything else (a number, a byte sequence). */
function text(value: BareItem | undefined): string {
  if (typeof value === 'string') return value;
  return value instanceof Token || value instanceof DisplayString ? value.toString() : '';
}

/**
 * Every member of a Proxy-Status field value, the intermediary closest to the origin first;
 * [] when the field is absent or not a valid structured field.
 */
export function parseProxyStatusList(value: string | null | undefined): ProxyStatus[] {
  if (value === null || value === undefined || value.trim() === '') return [];
  let list;
  try {
    list = parseList(value);
  } catch (e) {
    if (e instanceof ParseError) return [];
    throw e;
  }
  const out: ProxyStatus[] = [];
  for (const member of list) {
    // A member is an Item (a String or Token naming the intermediary), never an Inner List.
    if (isInnerList(member)) continue;
    const [item, params] = member;
    out.push({ proxy: text(item), error: text(params.get('error')), details: text(params.get('details')) });
  }
  return out;
}

/** The member that proxy `proxy` (exitpool's by default) wrote, or null. */
export function parseProxyStatus(value: string | null | undefined, proxy = EXITPOOL_PROXY_NAME): ProxyStatus | null {
  return parseProxyStatusList(value).find((m) => m.proxy === proxy) ?? null;
}
