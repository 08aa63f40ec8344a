import type { Channel } from './channel.js';
import { ENVELOPE_MARK, isEnvelope, type Envelope } from './envelope.js';
import { IpcPeerGoneError, IpcRemoteError, IpcTimeoutError, IpcUnknownMethodError } from './errors.js';

/** A set of request methods: each names its params and its result. */
export type MethodMap = { [method: string]: { params: unknown; result: unknown } };
/** A set of one-way notices (broadcasts, accounting batches): each names its payload. */
export type NoticeMap = { [topic: string]: unknown };

export const DEFAULT_IPC_TIMEOUT_MS = 2000;

interface Pending {
  method: string;
  resolve(value: unknown): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

type Handler = (params: unknown) => unknown;

/** One answer per method of a protocol: a missing handler is a type error. */
export type IpcHandlers<In extends MethodMap> = {
  [M in Known<In>]: (params: In[M]['params']) => In[M]['result'] | Promise<In[M]['result']>;
};

/** The protocol's own methods, without the index signature of MethodMap that it extends. */
/** The names a protocol declares, without the index signature of the map type it extends: a stale or misspelt name does not compile. */
export type Known<T> = keyof { [K in keyof T as string extends K ? never : K]: unknown } & string;

/** Deadlines by method, for the methods that need more than the endpoint's default. */
export type IpcTimeouts<Out extends MethodMap> = { readonly [M in keyof Out]?: number };

/**
 * One side of a typed request/response + notice protocol over a Channel. Requests carry ids
 * and deadlines; when the other side goes away every pending request fails with
 * IpcPeerGoneError at once, and so does every later request, so nobody waits forever.
 */
export class IpcEndpoint<
  Out extends MethodMap,
  In extends MethodMap,
  OutNotices extends NoticeMap,
  InNotices extends NoticeMap,
> {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly handlers = new Map<string, Handler>();
  private readonly noticeListeners = new Map<string, ((data: unknown) => void)[]>();
  private gone = false;

  constructor(
    private readonly channel: Channel,
    private readonly defaultTimeoutMs = DEFAULT_IPC_TIMEOUT_MS,
    private readonly timeouts: IpcTimeouts<Out> = {},
  ) {
    channel.onMessage((m) => this.receive(m));
    channel.onGone(() => this.markGone());
  }

  get isGone(): boolean {
    return this.gone || !this.channel.connected();
  }

  request<M extends Known<Out>>(
    method: M,
    params: Out[M]['params'],
    timeoutMs = this.timeouts[method] ?? this.defaultTimeoutMs,
  ): Promise<Out[M]['result']> {
    if (this.isGone) return Promise.reject(new IpcPeerGoneError(method));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new IpcTimeoutError(method, timeoutMs));
      }, timeoutMs);
      this.pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject, timer });
      const envelope: Envelope = { ep: ENVELOPE_MARK, k: 'q', i: id, m: method, p: params };
      try {
        this.channel.send(envelope);
      } catch {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(new IpcPeerGoneError(method));
      }
    });
  }

  /** Registers the answer to every method of the protocol at once (see IpcHandlers). */
  handleAll(handlers: IpcHandlers<In>): void {
    for (const [method, handler] of Object.entries(handlers)) this.handlers.set(method, handler as Handler);
  }

  handle<M extends Known<In>>(
    method: M,
    handler: (params: In[M]['params']) => In[M]['result'] | Promise<In[M]['result']>,
  ): void {
    this.handlers.set(method, handler as Handler);
  }

  notify<T extends Known<OutNotices>>(topic: T, data: OutNotices[T]): void {
    if (this.isGone) return;
    try {
      this.channel.send({ ep: ENVELOPE_MARK, k: 'n', m: topic, p: data } satisfies Envelope);
    } catch {
      // A notice to a process that just went away is dropped; markGone follows from the channel.
    }
  }

  onNotice<T extends Known<InNotices>>(topic: T, listener: (data: InNotices[T]) => void): void {
    const list = this.noticeListeners.get(topic) ?? [];
    list.push(listener as (data: unknown) => void);
    this.noticeListeners.set(topic, list);
  }

  /** Resolves once every message sent so far has left this process. */
  async drain(): Promise<void> {
    await this.channel.drain?.();
  }

  /** Fails everything pending; used on shutdown and when the channel reports the peer gone. */
  close(): void {
    this.markGone();
  }

  private markGone(): void {
    if (this.gone) return;
    this.gone = true;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(new IpcPeerGoneError(p.method));
    }
  }

  private receive(message: unknown): void {
    if (!isEnvelope(message)) return;
    switch (message.k) {
      case 's': {
        const p = this.pending.get(message.i);
        if (!p) return; // answered after its deadline: the caller has already been told
        this.pending.delete(message.i);
        clearTimeout(p.timer);
        if (message.ok) p.resolve(message.r);
        else p.reject(new IpcRemoteError(p.method, message.e?.code ?? 'Error', message.e?.message ?? 'unknown error'));
        return;
      }
      case 'q':
        this.answer(message.i, message.m, message.p);
        return;
      case 'n':
        for (const l of this.noticeListeners.get(message.m) ?? []) l(message.p);
        return;
    }
  }

  private answer(id: number, method: string, params: unknown): void {
    const reply = (ok: boolean, r: unknown, e?: { code: string; message: string }): void => {
      if (this.isGone) return;
      const envelope: Envelope = e ? { ep: ENVELOPE_MARK, k: 's', i: id, ok, e } : { ep: ENVELOPE_MARK, k: 's', i: id, ok, r };
      try {
        this.channel.send(envelope);
      } catch {
        // the requester is gone; nothing to tell
      }
    };
    const handler = this.handlers.get(method);
    if (!handler) {
      const err = new IpcUnknownMethodError(`no handler for IPC method ${method}`);
      reply(false, undefined, { code: err.name, message: err.message });
      return;
    }
    let result: unknown;
    try {
      result = handler(params);
    } catch (e) {
      reply(false, undefined, describe(e));
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (r) => reply(true, r),
        (e: unknown) => reply(false, undefined, describe(e)),
      );
    } else {
      reply(true, result);
    }
  }
}

function describe(e: unknown): { code: string; message: string } {
  if (e instanceof Error) {
    const code = (e as Error & { code?: unknown }).code;
    return { code: typeof code === 'string' ? code : e.name, message: e.message };
  }
  return { code: 'Error', message: String(e) };
}
