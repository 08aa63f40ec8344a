export * from './channel.js';
export * from './endpoint.js';
export * from './errors.js';
export * from './protocol.js';
