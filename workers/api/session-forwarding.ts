import http from 'node:http';
import type { Request } from 'express';
import { IpcRemoteError } from '../../shared/ipc/errors.js';
import { FLEET_NODE_ENV, type WorkerEndpoint } from '../../shared/ipc/protocol.js';
import { HttpError } from './http-error.js';

/**
 * Set on a request one node's API passes to another's: the receiving node answers it itself,
 * never passing it on again (no loop, whatever the two nodes believe about the session).
 */
export const FORWARDED_BY_HEADER = 'exitpool-forwarded-by';
/** Longer than the owner's own longest session answer (a rotate waits up to WORKER_REQUEST_TIMEOUTS_MS['sessions.rotate']). */
export const SESSION_FORWARD_TIMEOUT_MS = 20_000;
/** An owner's answer about one session is small; a larger one is not an exitpool answer. */
const MAX_FORWARDED_ANSWER_BYTES = 1024 * 1024;

/** The supervisor names its node to its workers only on a node of a fleet: elsewhere nothing is asked. */
const IN_A_FLEET = process.env[FLEET_NODE_ENV] !== undefined;

/** What a session route answers: a JSON body, or none (204). */
export interface ForwardedReply {
  status: number;
  json?: unknown;
}

/**
 * A session route on a node of a fleet (supervisor/fleet/README.md, "Sessions"): `local` is
 * answered here; when this node does not hold the session and another live node owns it, the
 * request goes to that node's API with the caller's own credential (tokens are the fleet's), and
 * its answer is this one. Off a fleet, or for a session nobody owns, `local`'s answer stands.
 */
export async function answeredWhereTheSessionLives<T extends ForwardedReply>(
  req: Request,
  ipc: WorkerEndpoint,
  key: string,
  local: () => Promise<T>,
): Promise<T | ForwardedReply> {
  try {
    return await local();
  } catch (error) {
    if (!IN_A_FLEET || !(error instanceof IpcRemoteError) || error.code !== 'EXITPOOL_NO_SUCH_SESSION' || req.headers[FORWARDED_BY_HEADER] !== undefined) throw error;
    const owner = await ipc.request('sessions.owner', { key });
    if (owner === null) throw error;
    return forwardTo(owner, req);
  }
}

function forwardTo(owner: { node: string; api: string }, req: Request): Promise<ForwardedReply> {
  const colon = owner.api.lastIndexOf(':');
  const host = owner.api.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = Number(owner.api.slice(colon + 1));
  const body = req.method === 'POST' && req.body !== undefined && req.body !== null ? JSON.stringify(req.body) : null;
  const headers: Record<string, string> = {
    // The owner's API answers names it knows: its peers reach it by address, and say localhost.
    host: 'localhost',
    [FORWARDED_BY_HEADER]: owner.node,
    accept: 'application/json',
  };
  if (req.headers.authorization !== undefined) headers.authorization = req.headers.authorization;
  if (body !== null) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(body));
  }
  return new Promise<ForwardedReply>((resolve, reject) => {
    const unreachable = (why: string): HttpError => new HttpError(502, `the session lives on node ${owner.node}, which did not answer (${why})`);
    const outgoing = http.request({ host, port, method: req.method, path: req.originalUrl, headers, timeout: SESSION_FORWARD_TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_FORWARDED_ANSWER_BYTES) {
          res.destroy();
          reject(unreachable('an answer too large to be its own'));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', (e) => reject(unreachable(e.message)));
      res.on('end', () => {
        const status = res.statusCode ?? 502;
        const text = Buffer.concat(chunks).toString('utf8');
        if (status >= 400) {
          reject(new HttpError(status, text.trim() || `node ${owner.node} answered ${status}`));
          return;
        }
        if (status === 204 || text === '') {
          resolve({ status });
          return;
        }
        try {
          resolve({ status, json: JSON.parse(text) as unknown });
        } catch {
          reject(unreachable('an answer that is not JSON'));
        }
      });
    });
    outgoing.on('timeout', () => outgoing.destroy(new Error(`no answer within ${SESSION_FORWARD_TIMEOUT_MS} ms`)));
    outgoing.on('error', (e) => reject(unreachable(e.message)));
    outgoing.end(body ?? undefined);
  });
}
