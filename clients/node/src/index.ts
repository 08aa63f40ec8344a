/**
 * @exitpool/client: exitpool sessions for Node's fetch (undici). This entry needs undici only;
 * the integrations with other clients are subpaths of their own (`@exitpool/client/got`,
 * `/axios`, `/crawlee`, `/agents`), so a project that uses none of them needs none of their types.
 */
import './node-version.js';

export { SUPPORTED_NODE } from './node-version.js';
export { buildUsername, InvalidSessionChoice, PARAMETER_NAMES, UNSUPPORTED_PARAMETER_NAMES, type SessionChoices, type SessionMode } from './username.js';
export { banPolicyOf, DEFAULT_BLOCK_RULES, defaultBanPolicy, detectBlock, retryAfterSeconds, type BanPolicy, type Block, type BlockRules, type FailureKind, type JudgedHead, type ResponseFacts } from './block-detection.js';
export { CHALLENGE_SIGNATURES, CHALLENGE_URLS, hasFillableField, type ChallengeEvidence, type ChallengeMatch, type ChallengeSignature, type ChallengeUrl } from './challenge-signatures.js';
export { EXITPOOL_PROXY_NAME, parseProxyStatus, parseProxyStatusList, type ProxyStatus } from './proxy-status.js';
export { ExitpoolApiError, NoFreshExitError, ProxyRefusedError, SOCKS_REPLY_REASONS, SocksReplyError, StillBlockedError, type RefusalReason, type RefusalSource } from './errors.js';
export { reportDomain } from './report-domain.js';
export { API_TIMEOUT_MS, type FailureAnswer, type RefusalAnswer, type RotateAnswer } from './exitpool-api.js';
export { ExitpoolSession, type Destroyable, type ExitpoolSessionOptions, type JudgedResponse, type Listener } from './exitpool-session.js';
