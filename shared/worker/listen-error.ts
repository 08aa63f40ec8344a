import { errorMessage } from '../errors/error-message.js';

/**
 * A listener of this worker could not be opened at start. Carries the setting to change, so the
 * supervisor can end the service with one clear line instead of re-forking the worker forever.
 */
export class ListenError extends Error {
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(message);
    this.name = 'ListenError';
  }
}

/**
 * Opens a listener and turns the errors an operator can cause (a port in use, a BIND_HOST that
 * does not resolve or is not an address of this machine, a privileged port) into a ListenError
 * naming the setting.
 */
export async function listenNamed<T>(portSetting: string, port: number, host: string, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const where = `${host}:${port}`;
    switch (code) {
      case 'EADDRINUSE':
        throw new ListenError(portSetting, `${portSetting}=${port}: ${where} is already in use by another process`);
      case 'EACCES':
        throw new ListenError(portSetting, `${portSetting}=${port}: not allowed to listen on ${where} (ports below 1024 need privileges)`);
      case 'ENOTFOUND':
      case 'EAI_AGAIN':
      case 'EAI_FAIL':
        throw new ListenError('BIND_HOST', `BIND_HOST=${host}: the name does not resolve (${code})`);
      case 'EADDRNOTAVAIL':
        throw new ListenError('BIND_HOST', `BIND_HOST=${host}: not an address of this machine`);
      default:
        throw new ListenError(portSetting, `${portSetting}=${port}: cannot listen on ${where}: ${errorMessage(e)}`);
    }
  }
}
