import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { createHmac, generateKeyPairSync, randomBytes } from 'node:crypto';
import { SignInCredentials, TICKET_TTL_MS } from '../../workers/api/auth/sign-in-credentials.js';
import { deriveSigningKey } from '../../supervisor/auth/signing-key.js';

const KEY = randomBytes(32);
const KEY_B64 = KEY.toString('base64');
const TTL = 3_600_000;
const START = Date.UTC(2026, 0, 1);

function b64url(value: object | string): string {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

function claims(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const iat = Math.floor(START / 1000);
  return { type: 'session', sub: 'admin', iss: 'exitpool', iat, exp: iat + 3600, ...overrides };
}

describe('sign-in credentials (JWT)', () => {
  let now = START;
  const clock = (): number => now;
  const credentials = new SignInCredentials(KEY_B64, 'admin', TTL, clock);
  beforeEach(() => {
    now = START;
  });

  it('issues a session credential that verifies until it expires', () => {
    const login = credentials.issueSession();
    expect(login.user).to.equal('admin');
    expect(login.expires).to.equal(Math.floor((START + TTL) / 1000));
    expect(credentials.verifySessionCredential(login.token)).to.deep.equal({
      ok: true,
      principal: { kind: 'session', user: 'admin', expires: login.expires },
      expires: login.expires,
    });
    now = START + TTL - 1000;
    expect(credentials.verifySessionCredential(login.token).ok).to.equal(true);
    now = START + TTL;
    expect(credentials.verifySessionCredential(login.token)).to.deep.equal({ ok: false, reason: 'expired' });
  });

  it('puts the expiry of the sign-in behind a ticket into it, and never lets the ticket outlive it', () => {
    const ticket = credentials.issueTicket({ kind: 'session', user: 'admin', expires: Math.floor(START / 1000) + 30 });
    const check = credentials.verifyTicket(ticket.ticket);
    expect(check).to.deep.include({ ok: true, principal: { kind: 'ticket', user: 'admin', sessionExpires: Math.floor(START / 1000) + 30 } });
    expect(check.ok && check.expires).to.equal(Math.floor(START / 1000) + 30);
  });

  it('issues a ticket that lasts TICKET_TTL_MS (60 s)', () => {
    const ticket = credentials.issueTicket({ kind: 'session', user: 'admin' });
    expect(ticket.expires_in).to.equal(60);
    expect(credentials.verifyTicket(ticket.ticket)).to.deep.include({ ok: true, principal: { kind: 'ticket', user: 'admin' } });
    now = START + TICKET_TTL_MS - 1000;
    expect(credentials.verifyTicket(ticket.ticket).ok).to.equal(true);
    now = START + TICKET_TTL_MS;
    expect(credentials.verifyTicket(ticket.ticket)).to.deep.equal({ ok: false, reason: 'expired' });
  });

  it('keeps the two kinds apart: a ticket is no session credential and vice versa', () => {
    const ticket = credentials.issueTicket({ kind: 'session', user: 'admin' }).ticket;
    const session = credentials.issueSession().token;
    expect(credentials.verifySessionCredential(ticket)).to.deep.equal({ ok: false, reason: 'invalid' });
    expect(credentials.verifyTicket(session)).to.deep.equal({ ok: false, reason: 'invalid' });
  });

  it('refuses a ticket minted from anything but a session principal (type-level and at run time)', () => {
    const notSession = { kind: 'ticket', user: 'admin' } as unknown as { kind: 'session'; user: string };
    expect(() => credentials.issueTicket(notSession)).to.throw(TypeError);
  });

  it('refuses tampered credentials', () => {
    const [header, payload, signature] = credentials.issueTicket({ kind: 'session', user: 'admin' }).ticket.split('.') as [string, string, string];
    const upgraded = b64url({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), type: 'session', exp: 9_999_999_999 });
    expect(credentials.verifySessionCredential(`${header}.${upgraded}.${signature}`)).to.deep.equal({ ok: false, reason: 'invalid' });
    const flipped = signature.slice(0, 5) + (signature[5] === 'A' ? 'B' : 'A') + signature.slice(6);
    expect(credentials.verifyTicket(`${header}.${payload}.${flipped}`)).to.deep.equal({ ok: false, reason: 'invalid' });
  });

  it("refuses alg 'none'", () => {
    const unsigned = `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims())}.`;
    expect(credentials.verifySessionCredential(unsigned)).to.deep.equal({ ok: false, reason: 'invalid' });
    const unsignedWithDot = `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims())}.x`;
    expect(credentials.verifySessionCredential(unsignedWithDot)).to.deep.equal({ ok: false, reason: 'invalid' });
  });

  it('refuses other algorithms, even with the right key (HS512) or an RSA key (RS/HS confusion)', () => {
    const hs512 = jwt.sign(claims(), KEY, { algorithm: 'HS512' });
    expect(credentials.verifySessionCredential(hs512)).to.deep.equal({ ok: false, reason: 'invalid' });
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rs256 = jwt.sign(claims(), privateKey, { algorithm: 'RS256' });
    expect(credentials.verifySessionCredential(rs256)).to.deep.equal({ ok: false, reason: 'invalid' });
    // The classic confusion: an HS256 signature made with a public key as the HMAC secret.
    const pem = publicKey.export({ type: 'spki', format: 'pem' });
    const forged = `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url(claims())}`;
    const signature = createHmac('sha256', pem).update(forged).digest('base64url');
    expect(credentials.verifySessionCredential(`${forged}.${signature}`)).to.deep.equal({ ok: false, reason: 'invalid' });
  });

  it('refuses a credential signed with another key, without exp, from another issuer or for another user', () => {
    const other = new SignInCredentials(randomBytes(32).toString('base64'), 'admin', TTL, clock);
    expect(credentials.verifySessionCredential(other.issueSession().token)).to.deep.equal({ ok: false, reason: 'invalid' });
    const noExp = claims();
    delete noExp.exp;
    expect(credentials.verifySessionCredential(jwt.sign(noExp, KEY, { algorithm: 'HS256' }))).to.deep.equal({ ok: false, reason: 'invalid' });
    expect(credentials.verifySessionCredential(jwt.sign(claims({ iss: 'elsewhere' }), KEY, { algorithm: 'HS256' })).ok).to.equal(false);
    expect(credentials.verifySessionCredential(jwt.sign(claims({ sub: 'root' }), KEY, { algorithm: 'HS256' })).ok).to.equal(false);
    expect(credentials.verifySessionCredential(jwt.sign(claims({ type: 'refresh' }), KEY, { algorithm: 'HS256' })).ok).to.equal(false);
    // A well-formed credential of ours with every claim right does verify (the negative cases are not vacuous).
    expect(credentials.verifySessionCredential(jwt.sign(claims(), KEY, { algorithm: 'HS256' })).ok).to.equal(true);
  });

  it('calls non-JWT text malformed', () => {
    expect(credentials.verifySessionCredential('tp_abc')).to.deep.equal({ ok: false, reason: 'malformed' });
    expect(credentials.verifySessionCredential('a.b')).to.deep.equal({ ok: false, reason: 'malformed' });
    expect(credentials.verifySessionCredential('x'.repeat(5000) + '.a.b')).to.deep.equal({ ok: false, reason: 'malformed' });
  });

  it('derives the key from the stored secret and the admin credentials', () => {
    const secret = randomBytes(32);
    const stored = { kind: 'stored', hash: '$2b$04$abcdefghijklmnopqrstuuK0.yGmTPwwaAjFRGx5n7Du0mfUiZ3q6' } as const;
    const base = deriveSigningKey(secret, 'admin', stored, false);
    expect(base).to.have.length(32);
    expect(deriveSigningKey(secret, 'admin', stored, false)).to.deep.equal(base);
    const variants = [
      deriveSigningKey(randomBytes(32), 'admin', stored, false),
      deriveSigningKey(secret, 'root', stored, false),
      deriveSigningKey(secret, 'admin', { kind: 'stored', hash: stored.hash.replace('u', 'v') }, false),
      deriveSigningKey(secret, 'admin', { kind: 'env', password: 'p' }, false),
      deriveSigningKey(secret, 'admin', stored, true),
    ];
    for (const v of variants) expect(v.equals(base)).to.equal(false);
    expect(deriveSigningKey(secret, 'admin', { kind: 'env', password: 'p' }, false)).to.deep.equal(
      deriveSigningKey(secret, 'admin', { kind: 'env', password: 'p' }, false),
    );
  });
});
