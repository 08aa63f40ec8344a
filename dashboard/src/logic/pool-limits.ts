/** MAX_POOL_SIZE of shared/config/config.ts (a unit test keeps them equal; the config module needs Node). */
export const MAX_POOL_SIZE = 64;
