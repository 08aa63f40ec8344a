import type { NextFunction, Request, Response } from 'express';

/**
 * What a browser may do with anything this worker serves. The dashboard is one same-origin
 * bundle: no inline script, no third-party origin, an inline SVG favicon (img-src data:). The
 * policy goes on every response, API answers included, so no page of ours can be framed
 * (clickjacking the Rotate and Revoke buttons) and nothing is MIME-sniffed into a script.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
].join('; ');

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  // frame-ancestors for browsers that predate it.
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  // Stream tickets travel in the query string: never hand a URL of ours to another site.
  'Referrer-Policy': 'no-referrer',
};

export function securityHeaders(_req: Request, res: Response, next: NextFunction): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
  next();
}
