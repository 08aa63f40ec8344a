"""exitpool sessions for requests, httpx (sync and async) and Scrapy.

The username grammar (docs/api.md, "Session parameters in the username"), block detection that
reads challenge pages rather than words (an overridable ban policy), reports to the pool, honest
moves to a new exit and retries within a bound, and the proxy's refusals as typed errors.
"""

from .blocks import DEFAULT_BLOCK_RULES, BanPolicy, Block, BlockRules, ResponseFacts, ban_policy_of, default_ban_policy, detect_block, retry_after_seconds
from .challenges import CHALLENGE_SIGNATURES, CHALLENGE_URLS, ChallengeEvidence, ChallengeMatch, ChallengeUrl, has_fillable_field
from .errors import ExitpoolApiError, NoFreshExitError, ProxyRefusedError, SocksReplyError, StillBlockedError
from .proxy_status import EXITPOOL_PROXY_NAME, ProxyStatus, parse_proxy_status, parse_proxy_status_list
from .report_domain import report_domain
from .session import ExitpoolSession
from .username import PARAMETER_NAMES, UNSUPPORTED_PARAMETER_NAMES, InvalidSessionChoice, build_username

#: The one version source (pyproject.toml reads it): the service's.
__version__ = "0.2.0"

__all__ = [
    "BanPolicy",
    "Block",
    "BlockRules",
    "CHALLENGE_SIGNATURES",
    "CHALLENGE_URLS",
    "ChallengeEvidence",
    "ChallengeMatch",
    "ChallengeUrl",
    "DEFAULT_BLOCK_RULES",
    "EXITPOOL_PROXY_NAME",
    "ExitpoolApiError",
    "ExitpoolSession",
    "InvalidSessionChoice",
    "NoFreshExitError",
    "PARAMETER_NAMES",
    "ProxyRefusedError",
    "ProxyStatus",
    "ResponseFacts",
    "SocksReplyError",
    "StillBlockedError",
    "UNSUPPORTED_PARAMETER_NAMES",
    "ban_policy_of",
    "build_username",
    "default_ban_policy",
    "detect_block",
    "has_fillable_field",
    "parse_proxy_status",
    "parse_proxy_status_list",
    "report_domain",
    "retry_after_seconds",
]
