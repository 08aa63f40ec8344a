export { buildUsername, InvalidSessionChoice, type SessionChoices, type SessionMode } from './username.js';
export { DEFAULT_BLOCK_RULES, detectBlock, type Block, type BlockRules, type FailureKind, type JudgedHead } from './block-detection.js';
export { parseProxyStatus, ProxyRefusedError, SOCKS_REPLY_REASONS, SocksReplyError, socksReplyOf, type ProxyStatus } from './proxy-refusal.js';
export { ExitpoolApiError, ExitpoolSession, StillBlockedError, type Destroyable, type ExitpoolSessionOptions } from './exitpool-session.js';
export { axiosThrough, gotThrough, gotThroughHttpProxy, httpProxyAgents, socksAgent } from './other-clients.js';
export type { JudgedResponse } from './exitpool-session.js';
export { ExitpoolCrawlee, type ExitpoolCrawleeOptions } from './crawlee.js';
