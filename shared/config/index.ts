export * from './config.js';
export * from './duration.js';
export * from './errors.js';
export * from './load.js';
export { VARIABLES, type VariableDefinition } from './variables.js';
export type { RateLimit } from './values.js';
export * from './secret-environment.js';
