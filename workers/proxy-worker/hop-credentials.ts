import type { KeyObject } from 'node:crypto';
import { hopKeyObject, verifyHopPassword } from '../../shared/auth/hop-credential.js';
import { parseSessionUsername, SessionUsernameError } from '../../shared/api/session-username.js';
import type { HopKeySnapshot, WorkerEndpoint } from '../../shared/ipc/protocol.js';
import type { CredentialPolicy } from '../proxy/proxy-types.js';
import type { ProxyCredentials } from './proxy-credentials.js';

/**
 * The hop listener's check (HOP_PORT, supervisor/fleet/README.md, "Hop credentials"): a SOCKS5
 * password that is a hop credential this node's keys signed for this node, the session the
 * username names and a current window, carrying a credential this node admits now (a token it
 * holds: a revoked token's hops are refused at once). Never a proxy token: a client's credential
 * opens nothing here, and this check is never asked on the clients' listeners.
 */
export class HopCredentials {
  private snapshot: HopKeySnapshot;
  private keys: ReadonlyMap<string, KeyObject>;

  constructor(
    initial: HopKeySnapshot,
    private readonly tokens: ProxyCredentials,
    /** USERNAME_PARAMS: the username's session key is read as the router reads it. */
    private readonly usernameParams: boolean,
    endpoint: WorkerEndpoint,
    private readonly now: () => number = Date.now,
  ) {
    this.snapshot = initial;
    this.keys = keyMap(initial);
    endpoint.handle('hop.keys.update', (snapshot) => {
      this.install(snapshot);
      return { version: this.snapshot.version };
    });
  }

  install(snapshot: HopKeySnapshot): void {
    if (snapshot.version <= this.snapshot.version) return;
    this.snapshot = snapshot;
    this.keys = keyMap(snapshot);
  }

  policy(): CredentialPolicy {
    return {
      required: true,
      check: (username, password) => {
        if (username === null || password === null) return { ok: false };
        const sessionKey = this.sessionKeyOf(username);
        if (sessionKey === null) return { ok: false };
        const verdict = verifyHopPassword(password, { node: this.snapshot.node, sessionKey, keys: this.keys, now: this.now() });
        if (!verdict.ok || !this.tokens.admits(verdict.credential)) return { ok: false };
        return { ok: true, credential: verdict.credential };
      },
    };
  }

  private sessionKeyOf(username: string): string | null {
    if (!this.usernameParams) return username;
    try {
      return parseSessionUsername(username).key;
    } catch (e) {
      if (e instanceof SessionUsernameError) return null;
      throw e;
    }
  }
}

function keyMap(snapshot: HopKeySnapshot): ReadonlyMap<string, KeyObject> {
  return new Map(snapshot.keys.map((k) => [k.id, hopKeyObject(k.secret)]));
}
