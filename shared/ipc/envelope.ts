/**
 * Wire envelopes. Short keys because every proxied connection sends one request; the `ep`
 * marker tells our messages apart from anything else on the same process channel.
 */
export const ENVELOPE_MARK = 'xp1';

export interface RequestEnvelope {
  ep: typeof ENVELOPE_MARK;
  k: 'q';
  i: number;
  m: string;
  p: unknown;
}

export interface ResponseEnvelope {
  ep: typeof ENVELOPE_MARK;
  k: 's';
  i: number;
  ok: boolean;
  r?: unknown;
  e?: { code: string; message: string };
}

export interface NoticeEnvelope {
  ep: typeof ENVELOPE_MARK;
  k: 'n';
  m: string;
  p: unknown;
}

export type Envelope = RequestEnvelope | ResponseEnvelope | NoticeEnvelope;

export function isEnvelope(value: unknown): value is Envelope {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as { ep?: unknown; k?: unknown };
  return v.ep === ENVELOPE_MARK && (v.k === 'q' || v.k === 's' || v.k === 'n');
}
