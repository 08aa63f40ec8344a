/**
 * SOCKS5 wire format (RFC 1928) and username/password sub-negotiation (RFC 1929), as pure
 * functions over byte buffers. Parsers never throw on input: they answer need-more, ok (with the
 * number of bytes consumed) or a typed protocol error. Domains are kept as names: this module,
 * like the rest of the proxy, never resolves them.
 */
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from './ip-literal.js';

export const SOCKS5_VERSION = 0x05;
export const USER_PASSWORD_VERSION = 0x01;

export const AuthMethod = {
  NoAuthentication: 0x00,
  UsernamePassword: 0x02,
  NoAcceptableMethods: 0xff,
} as const;

export const CommandCode = {
  Connect: 0x01,
  Bind: 0x02,
  UdpAssociate: 0x03,
} as const;

export const AddressType = {
  IPv4: 0x01,
  DomainName: 0x03,
  IPv6: 0x04,
} as const;

/** RFC 1928 section 6. Tor answers with these too (and may use 0xF0-0xF7 for onion services). */
export const ReplyCode = {
  Succeeded: 0x00,
  GeneralFailure: 0x01,
  NotAllowedByRuleset: 0x02,
  NetworkUnreachable: 0x03,
  HostUnreachable: 0x04,
  ConnectionRefused: 0x05,
  TtlExpired: 0x06,
  CommandNotSupported: 0x07,
  AddressTypeNotSupported: 0x08,
} as const;

export type Socks5Command = 'connect' | 'bind' | 'udp-associate';

export type Socks5Target =
  | { type: 'ipv4'; host: string; port: number }
  | { type: 'ipv6'; host: string; port: number }
  | { type: 'domain'; host: string; port: number };

export interface Socks5Greeting {
  /** Methods in the order the client offered them. */
  methods: number[];
}

export interface UserPasswordRequest {
  username: string;
  password: string;
}

export interface Socks5Request {
  command: Socks5Command;
  target: Socks5Target;
}

export interface Socks5Reply {
  code: number;
  bound: Socks5Target;
}

export type Socks5ProtocolErrorCode =
  | 'unsupported-version'
  | 'unsupported-auth-version'
  | 'unsupported-command'
  | 'unsupported-address-type'
  | 'reserved-not-zero'
  | 'invalid-domain';

export class Socks5ProtocolError extends Error {
  constructor(
    readonly code: Socks5ProtocolErrorCode,
    /** The SOCKS5 reply to send before closing when the error is in a request; null: close without a reply. */
    readonly replyCode: number | null,
    message: string,
  ) {
    super(message);
    this.name = 'Socks5ProtocolError';
  }
}

export type ParseOutcome<T> =
  | { status: 'need-more' }
  | { status: 'ok'; value: T; consumed: number }
  | { status: 'error'; error: Socks5ProtocolError };

const NEED_MORE: { status: 'need-more' } = Object.freeze({ status: 'need-more' }) as { status: 'need-more' };

function fail(code: Socks5ProtocolErrorCode, replyCode: number | null, message: string): { status: 'error'; error: Socks5ProtocolError } {
  return { status: 'error', error: new Socks5ProtocolError(code, replyCode, message) };
}

/** Bytes allowed in a domain name target: visible ASCII. Tor refuses anything else anyway. */
function isDomainByte(byte: number): boolean {
  return byte >= 0x21 && byte <= 0x7e;
}

// ---------------------------------------------------------------------------------------------
// Parsers

/** +----+----------+----------+ | VER | NMETHODS | METHODS | */
export function parseGreeting(buf: Uint8Array, offset = 0): ParseOutcome<Socks5Greeting> {
  const available = buf.length - offset;
  if (available < 1) return NEED_MORE;
  if (buf[offset] !== SOCKS5_VERSION) {
    return fail('unsupported-version', null, `not a SOCKS5 greeting (version byte ${buf[offset]})`);
  }
  if (available < 2) return NEED_MORE;
  const count = buf[offset + 1]!;
  if (available < 2 + count) return NEED_MORE;
  const methods = new Array<number>(count);
  for (let i = 0; i < count; i++) methods[i] = buf[offset + 2 + i]!;
  return { status: 'ok', value: { methods }, consumed: 2 + count };
}

/** +----+------+----------+------+----------+ | VER | ULEN | UNAME | PLEN | PASSWD | */
export function parseUserPasswordRequest(buf: Uint8Array, offset = 0): ParseOutcome<UserPasswordRequest> {
  const available = buf.length - offset;
  if (available < 1) return NEED_MORE;
  if (buf[offset] !== USER_PASSWORD_VERSION) {
    return fail('unsupported-auth-version', null, `unsupported username/password version ${buf[offset]}`);
  }
  if (available < 2) return NEED_MORE;
  const userLength = buf[offset + 1]!;
  if (available < 3 + userLength) return NEED_MORE;
  const passwordLength = buf[offset + 2 + userLength]!;
  const total = 3 + userLength + passwordLength;
  if (available < total) return NEED_MORE;
  const userStart = offset + 2;
  const passwordStart = userStart + userLength + 1;
  return {
    status: 'ok',
    value: {
      username: decodeUtf8(buf, userStart, userStart + userLength),
      password: decodeUtf8(buf, passwordStart, passwordStart + passwordLength),
    },
    consumed: total,
  };
}

/** +----+-----+-------+------+----------+----------+ | VER | CMD | RSV | ATYP | DST.ADDR | DST.PORT | */
export function parseRequest(buf: Uint8Array, offset = 0): ParseOutcome<Socks5Request> {
  const available = buf.length - offset;
  if (available < 1) return NEED_MORE;
  if (buf[offset] !== SOCKS5_VERSION) {
    return fail('unsupported-version', ReplyCode.GeneralFailure, `request version byte ${buf[offset]}`);
  }
  if (available < 2) return NEED_MORE;
  const commandByte = buf[offset + 1]!;
  const command = commandFromByte(commandByte);
  if (command === null) {
    return fail('unsupported-command', ReplyCode.CommandNotSupported, `command ${commandByte} not supported`);
  }
  if (available < 3) return NEED_MORE;
  if (buf[offset + 2] !== 0) {
    return fail('reserved-not-zero', ReplyCode.GeneralFailure, 'reserved request byte is not zero');
  }
  const address = parseAddress(buf, offset + 3);
  if (address.status !== 'ok') return address;
  return { status: 'ok', value: { command, target: address.value }, consumed: 3 + address.consumed };
}

/** Client side: the server's method selection, +----+--------+ | VER | METHOD |. */
export function parseMethodSelection(buf: Uint8Array, offset = 0): ParseOutcome<number> {
  const available = buf.length - offset;
  if (available < 1) return NEED_MORE;
  if (buf[offset] !== SOCKS5_VERSION) {
    return fail('unsupported-version', null, `method selection version byte ${buf[offset]}`);
  }
  if (available < 2) return NEED_MORE;
  return { status: 'ok', value: buf[offset + 1]!, consumed: 2 };
}

/** Client side: RFC 1929 status, +----+--------+ | VER | STATUS |; true = success. */
export function parseUserPasswordReply(buf: Uint8Array, offset = 0): ParseOutcome<boolean> {
  const available = buf.length - offset;
  if (available < 1) return NEED_MORE;
  if (buf[offset] !== USER_PASSWORD_VERSION) {
    return fail('unsupported-auth-version', null, `username/password reply version ${buf[offset]}`);
  }
  if (available < 2) return NEED_MORE;
  return { status: 'ok', value: buf[offset + 1] === 0, consumed: 2 };
}

/** Client side: +----+-----+-------+------+----------+----------+ | VER | REP | RSV | ATYP | BND.ADDR | BND.PORT | */
export function parseReply(buf: Uint8Array, offset = 0): ParseOutcome<Socks5Reply> {
  const available = buf.length - offset;
  if (available < 1) return NEED_MORE;
  if (buf[offset] !== SOCKS5_VERSION) {
    return fail('unsupported-version', null, `reply version byte ${buf[offset]}`);
  }
  if (available < 3) return NEED_MORE;
  // The reserved byte of a reply is ignored: being strict here would only turn a server's
  // cosmetic bug into a failed connection.
  const address = parseAddress(buf, offset + 3);
  if (address.status !== 'ok') return address;
  return { status: 'ok', value: { code: buf[offset + 1]!, bound: address.value }, consumed: 3 + address.consumed };
}

function commandFromByte(byte: number): Socks5Command | null {
  switch (byte) {
    case CommandCode.Connect:
      return 'connect';
    case CommandCode.Bind:
      return 'bind';
    case CommandCode.UdpAssociate:
      return 'udp-associate';
    default:
      return null;
  }
}

function parseAddress(buf: Uint8Array, offset: number): ParseOutcome<Socks5Target> {
  const available = buf.length - offset;
  if (available < 1) return NEED_MORE;
  const type = buf[offset]!;
  switch (type) {
    case AddressType.IPv4: {
      if (available < 7) return NEED_MORE;
      return {
        status: 'ok',
        value: { type: 'ipv4', host: formatIPv4(buf, offset + 1), port: readPort(buf, offset + 5) },
        consumed: 7,
      };
    }
    case AddressType.IPv6: {
      if (available < 19) return NEED_MORE;
      return {
        status: 'ok',
        value: { type: 'ipv6', host: formatIPv6(buf, offset + 1), port: readPort(buf, offset + 17) },
        consumed: 19,
      };
    }
    case AddressType.DomainName: {
      if (available < 2) return NEED_MORE;
      const length = buf[offset + 1]!;
      if (length === 0) return fail('invalid-domain', ReplyCode.GeneralFailure, 'empty domain name');
      // Judge the name bytes as they arrive so that chunked and whole delivery agree.
      const nameStart = offset + 2;
      const nameAvailable = Math.min(length, available - 2);
      for (let i = 0; i < nameAvailable; i++) {
        if (!isDomainByte(buf[nameStart + i]!)) {
          return fail('invalid-domain', ReplyCode.GeneralFailure, 'domain name contains a byte outside visible ASCII');
        }
      }
      if (available < 4 + length) return NEED_MORE;
      return {
        status: 'ok',
        value: { type: 'domain', host: decodeAscii(buf, nameStart, nameStart + length), port: readPort(buf, nameStart + length) },
        consumed: 4 + length,
      };
    }
    default:
      return fail('unsupported-address-type', ReplyCode.AddressTypeNotSupported, `address type ${type} not supported`);
  }
}

function readPort(buf: Uint8Array, offset: number): number {
  return (buf[offset]! << 8) | buf[offset + 1]!;
}

function decodeUtf8(buf: Uint8Array, start: number, end: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString('utf8');
}

function decodeAscii(buf: Uint8Array, start: number, end: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString('latin1');
}

// ---------------------------------------------------------------------------------------------
// Encoders. Inputs come from our own code, so an impossible input is a programming error and
// throws a RangeError.

export function encodeGreeting(methods: readonly number[]): Buffer {
  if (methods.length > 255) throw new RangeError('at most 255 methods');
  const out = Buffer.allocUnsafe(2 + methods.length);
  out[0] = SOCKS5_VERSION;
  out[1] = methods.length;
  for (let i = 0; i < methods.length; i++) out[2 + i] = methods[i]!;
  return out;
}

export function encodeMethodSelection(method: number): Buffer {
  return Buffer.from([SOCKS5_VERSION, method]);
}

export function encodeUserPasswordRequest(username: string, password: string): Buffer {
  const user = Buffer.from(username, 'utf8');
  const pass = Buffer.from(password, 'utf8');
  if (user.length > 255 || pass.length > 255) throw new RangeError('username and password are limited to 255 bytes each');
  return Buffer.concat([Buffer.from([USER_PASSWORD_VERSION, user.length]), user, Buffer.from([pass.length]), pass]);
}

export function encodeUserPasswordReply(success: boolean): Buffer {
  return Buffer.from([USER_PASSWORD_VERSION, success ? 0x00 : 0x01]);
}

export function encodeRequest(command: Socks5Command, target: Socks5Target): Buffer {
  const address = encodeAddress(target);
  const out = Buffer.allocUnsafe(3 + address.length);
  out[0] = SOCKS5_VERSION;
  out[1] = command === 'connect' ? CommandCode.Connect : command === 'bind' ? CommandCode.Bind : CommandCode.UdpAssociate;
  out[2] = 0;
  address.copy(out, 3);
  return out;
}

const UNSPECIFIED_BOUND: Socks5Target = Object.freeze({ type: 'ipv4', host: '0.0.0.0', port: 0 });

/** A full reply (10 bytes for the default IPv4 bound address), never the 2-byte shortcut. */
export function encodeReply(code: number, bound: Socks5Target = UNSPECIFIED_BOUND): Buffer {
  const address = encodeAddress(bound);
  const out = Buffer.allocUnsafe(3 + address.length);
  out[0] = SOCKS5_VERSION;
  out[1] = code;
  out[2] = 0;
  address.copy(out, 3);
  return out;
}

export function encodeAddress(target: Socks5Target): Buffer {
  if (!Number.isInteger(target.port) || target.port < 0 || target.port > 65535) throw new RangeError(`bad port ${target.port}`);
  let out: Buffer;
  switch (target.type) {
    case 'ipv4': {
      const bytes = parseIPv4(target.host);
      if (bytes === null) throw new RangeError(`not an IPv4 address: ${target.host}`);
      out = Buffer.allocUnsafe(7);
      out[0] = AddressType.IPv4;
      out.set(bytes, 1);
      break;
    }
    case 'ipv6': {
      const bytes = parseIPv6(target.host);
      if (bytes === null) throw new RangeError(`not an IPv6 address: ${target.host}`);
      out = Buffer.allocUnsafe(19);
      out[0] = AddressType.IPv6;
      out.set(bytes, 1);
      break;
    }
    case 'domain': {
      const name = Buffer.from(target.host, 'latin1');
      if (name.length === 0 || name.length > 255 || !name.every(isDomainByte)) {
        throw new RangeError('domain must be 1-255 visible ASCII bytes');
      }
      out = Buffer.allocUnsafe(4 + name.length);
      out[0] = AddressType.DomainName;
      out[1] = name.length;
      name.copy(out, 2);
      break;
    }
  }
  out.writeUInt16BE(target.port, out.length - 2);
  return out;
}

/**
 * Builds the target for a host as written in text (HTTP authority, config): IP literals become
 * address types, anything else stays a domain for tor to resolve at the exit.
 */
export function targetFromHost(host: string, port: number): Socks5Target {
  if (parseIPv4(host) !== null) return { type: 'ipv4', host, port };
  const v6 = parseIPv6(host);
  if (v6 !== null) return { type: 'ipv6', host: formatIPv6(v6), port };
  return { type: 'domain', host, port };
}

// Replies sent on hot paths, allocated once.
export const METHOD_NO_AUTHENTICATION = encodeMethodSelection(AuthMethod.NoAuthentication);
export const METHOD_USERNAME_PASSWORD = encodeMethodSelection(AuthMethod.UsernamePassword);
export const METHOD_NONE_ACCEPTABLE = encodeMethodSelection(AuthMethod.NoAcceptableMethods);
export const USER_PASSWORD_ACCEPTED = encodeUserPasswordReply(true);
export const USER_PASSWORD_REFUSED = encodeUserPasswordReply(false);
export const REPLY_SUCCEEDED = encodeReply(ReplyCode.Succeeded);
