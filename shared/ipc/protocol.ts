import type { IpcEndpoint, MethodMap, NoticeMap } from './endpoint.js';

/**
 * exitpool's IPC protocol: the only place where the supervisor and the workers meet.
 * Requests are typed per direction; notices are one-way (broadcasts, accounting batches).
 */
export type WorkerRole = 'proxy' | 'api';

/** Requests a worker sends to the supervisor. */
export interface WorkerRequests extends MethodMap {
  ping: { params: { sentAt: number }; result: { receivedAt: number } };
}

/** Requests the supervisor sends to a worker. */
export interface SupervisorRequests extends MethodMap {
  ping: { params: { sentAt: number }; result: { receivedAt: number } };
}

/** Notices from a worker. */
export interface WorkerNotices extends NoticeMap {
  /** The worker's listeners are up (or, for a worker without listeners, it is initialised). */
  ready: { role: WorkerRole; pid: number };
}

/** Notices from the supervisor (sent to one worker, or to all as a broadcast). */
export interface SupervisorNotices extends NoticeMap {
  /** Stop accepting, finish or drop what is in flight within graceMs, then exit 0. */
  shutdown: { graceMs: number };
}

export type SupervisorEndpoint = IpcEndpoint<SupervisorRequests, WorkerRequests, SupervisorNotices, WorkerNotices>;
export type WorkerEndpoint = IpcEndpoint<WorkerRequests, SupervisorRequests, WorkerNotices, SupervisorNotices>;

/** Environment variables through which the supervisor tells a forked worker what it is. */
export const ROLE_ENV = 'EXITPOOL_PROCESS_ROLE';
export const SLOT_ENV = 'EXITPOOL_WORKER_SLOT';
