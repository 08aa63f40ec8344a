import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { KeyGenerationError } from './errors.js';
import { runProgram } from './run-program.js';
import { fingerprintProbeLines, nodeDataDirectory, renderTorrc } from './torrc.js';
import type { NodePlan } from './topology.js';

const KEYGEN_TIMEOUT_MS = 60_000;

export interface KeygenTools {
  readonly torBinary: string;
  readonly gencertBinary: string;
  readonly defaultsTorrc: string;
  /** Environment of every tor (carries the LD_PRELOAD shim). */
  readonly torEnv: NodeJS.ProcessEnv;
}

/**
 * Creates the authority identity key, signing key and certificate in the authority's
 * DataDirectory/keys and returns the v3 identity (the certificate's `fingerprint`).
 * The identity key's passphrase is random and discarded: nobody needs to re-sign.
 */
export async function generateAuthorityKeys(node: NodePlan, tools: KeygenTools): Promise<string> {
  const keysDir = path.join(nodeDataDirectory(node), 'keys');
  await mkdir(keysDir, { recursive: true, mode: 0o700 });
  const certificate = path.join(keysDir, 'authority_certificate');
  const result = await runProgram(
    tools.gencertBinary,
    [
      '--create-identity-key',
      '-m', '12',
      '-a', `${node.address}:${node.dirPort}`,
      '-i', path.join(keysDir, 'authority_identity_key'),
      '-s', path.join(keysDir, 'authority_signing_key'),
      '-c', certificate,
      '--passphrase-fd', '0',
    ],
    { input: `${randomBytes(16).toString('hex')}\n`, cwd: keysDir, timeoutMs: KEYGEN_TIMEOUT_MS },
  );
  if (result.code !== 0) throw new KeyGenerationError(node.nickname, `tor-gencert exited ${String(result.code)}: ${result.stderr}`);
  const text = await readFile(certificate, 'utf8');
  const match = /^fingerprint ([0-9A-F]{40})$/m.exec(text);
  if (!match?.[1]) throw new KeyGenerationError(node.nickname, 'authority certificate has no fingerprint line');
  return match[1];
}

/**
 * Creates the relay identity keys in the node's DataDirectory with `tor --list-fingerprint`
 * (no network: DisableNetwork 1) and returns the RSA identity fingerprint in hex.
 */
export async function generateRelayIdentity(node: NodePlan, tools: KeygenTools): Promise<string> {
  const dataDir = nodeDataDirectory(node);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const probe = path.join(node.dir, 'torrc.keygen');
  await writeFile(probe, renderTorrc(fingerprintProbeLines(node)));
  const result = await runProgram(
    tools.torBinary,
    ['--defaults-torrc', tools.defaultsTorrc, '-f', probe, '--list-fingerprint'],
    { env: tools.torEnv, cwd: node.dir, timeoutMs: KEYGEN_TIMEOUT_MS },
  );
  if (result.code !== 0) throw new KeyGenerationError(node.nickname, `tor --list-fingerprint exited ${String(result.code)}: ${result.stderr}${result.stdout}`);
  const text = await readFile(path.join(dataDir, 'fingerprint'), 'utf8');
  const match = /^\S+ ([0-9A-F]{40})\s*$/m.exec(text);
  if (!match?.[1]) throw new KeyGenerationError(node.nickname, `unexpected fingerprint file: ${text}`);
  return match[1];
}
