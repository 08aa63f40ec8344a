"""exitpool sessions for requests, httpx (sync and async) and Scrapy.

The username grammar (docs/api.md, "Session parameters in the username"), block detection by
configurable rules, reports to the pool, rotation and retries within a bound, and the proxy's
refusals as typed errors.
"""

from .blocks import Block, BlockRules, DEFAULT_BLOCK_RULES, detect_block
from .errors import ExitpoolApiError, ProxyRefusedError, SocksReplyError, StillBlockedError, parse_proxy_status
from .session import ExitpoolSession
from .username import InvalidSessionChoice, build_username

__version__ = "0.1.0"

__all__ = [
    "Block",
    "BlockRules",
    "DEFAULT_BLOCK_RULES",
    "detect_block",
    "ExitpoolApiError",
    "ProxyRefusedError",
    "SocksReplyError",
    "StillBlockedError",
    "parse_proxy_status",
    "ExitpoolSession",
    "InvalidSessionChoice",
    "build_username",
]
