"""Structured Field Values for HTTP (RFC 8941): the parser.

exitpool's HTTP proxy names its refusals in ``Proxy-Status`` (RFC 9209), a structured field:
a List of Items with Parameters, whose ``details`` string may hold ``;``, ``,`` and escaped
quotes. No parser is installable where this package is built and tested (Debian's packages only),
so this is one, written from the RFC's parsing algorithms (section 4.2) and tested with its
examples (tests/test_structured_fields.py).
"""

from __future__ import annotations

import base64
import binascii
from decimal import Decimal
from typing import Dict, List, Tuple, Union

BareItem = Union[int, Decimal, str, "Token", bytes, bool]
Parameters = Dict[str, BareItem]
Item = Tuple[BareItem, Parameters]
InnerList = Tuple[List[Item], Parameters]
Member = Union[Item, InnerList]

_DIGITS = "0123456789"
_LCALPHA = "abcdefghijklmnopqrstuvwxyz"
_ALPHA = _LCALPHA + _LCALPHA.upper()
_TCHAR = _ALPHA + _DIGITS + "!#$%&'*+-.^_`|~"
_KEY_CHARS = _LCALPHA + _DIGITS + "_-.*"
_BASE64 = _ALPHA + _DIGITS + "+/="


class Token(str):
    """An sf-token (``foo``, ``text/html``): a string that was not quoted."""

    def __repr__(self) -> str:
        return f"Token({str(self)!r})"


class StructuredFieldError(ValueError):
    """The text is not a valid structured field of the kind asked for."""


class _Parser:
    def __init__(self, text: str) -> None:
        try:
            text.encode("ascii")
        except UnicodeEncodeError:
            raise StructuredFieldError("not ASCII") from None
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self) -> str:
        c = self.peek()
        self.pos += 1
        return c

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def skip_sp(self) -> None:
        while self.peek() == " ":
            self.pos += 1

    def skip_ows(self) -> None:
        while self.peek() in (" ", "\t") and not self.at_end():
            self.pos += 1

    def fail(self, why: str) -> StructuredFieldError:
        return StructuredFieldError(f"{why} at {self.pos}")

    # 4.2.1 and 4.2.2: lists and dictionaries
    def list_members(self) -> List[Member]:
        members: List[Member] = []
        while not self.at_end():
            members.append(self.item_or_inner_list())
            self.skip_ows()
            if self.at_end():
                return members
            if self.take() != ",":
                raise self.fail("expected a comma")
            self.skip_ows()
            if self.at_end():
                raise self.fail("trailing comma")
        return members

    def dictionary(self) -> Dict[str, Member]:
        out: Dict[str, Member] = {}
        while not self.at_end():
            key = self.key()
            if self.peek() == "=":
                self.pos += 1
                member = self.item_or_inner_list()
            else:
                member = (True, self.parameters())
            out.pop(key, None)
            out[key] = member
            self.skip_ows()
            if self.at_end():
                return out
            if self.take() != ",":
                raise self.fail("expected a comma")
            self.skip_ows()
            if self.at_end():
                raise self.fail("trailing comma")
        return out

    def item_or_inner_list(self) -> Member:
        if self.peek() == "(":
            return self.inner_list()
        return self.item()

    # 4.2.1.2
    def inner_list(self) -> InnerList:
        self.pos += 1
        items: List[Item] = []
        while not self.at_end():
            self.skip_sp()
            if self.peek() == ")":
                self.pos += 1
                return items, self.parameters()
            items.append(self.item())
            if self.peek() not in (" ", ")"):
                raise self.fail("expected a space or )")
        raise self.fail("unterminated inner list")

    # 4.2.3
    def item(self) -> Item:
        return self.bare_item(), self.parameters()

    def bare_item(self) -> BareItem:
        c = self.peek()
        if c == "-" or c in _DIGITS and c != "":
            return self.number()
        if c == '"':
            return self.string()
        if c == ":":
            return self.byte_sequence()
        if c == "?":
            return self.boolean()
        if c != "" and (c in _ALPHA or c == "*"):
            return self.token()
        raise self.fail("expected an item")

    # 4.2.3.2
    def parameters(self) -> Parameters:
        params: Parameters = {}
        while self.peek() == ";":
            self.pos += 1
            self.skip_sp()
            key = self.key()
            value: BareItem = True
            if self.peek() == "=":
                self.pos += 1
                value = self.bare_item()
            params.pop(key, None)
            params[key] = value
        return params

    # 4.2.3.3
    def key(self) -> str:
        c = self.peek()
        if c == "" or not (c in _LCALPHA or c == "*"):
            raise self.fail("expected a key")
        start = self.pos
        while self.peek() != "" and self.peek() in _KEY_CHARS:
            self.pos += 1
        return self.text[start:self.pos]

    # 4.2.4
    def number(self) -> Union[int, Decimal]:
        sign = 1
        if self.peek() == "-":
            self.pos += 1
            sign = -1
        if self.peek() == "" or self.peek() not in _DIGITS:
            raise self.fail("expected a digit")
        start = self.pos
        decimal = False
        while not self.at_end():
            c = self.peek()
            if c in _DIGITS:
                self.pos += 1
            elif c == "." and not decimal:
                if self.pos - start > 12:
                    raise self.fail("too many integer digits in a decimal")
                decimal = True
                self.pos += 1
            else:
                break
            if not decimal and self.pos - start > 15:
                raise self.fail("integer too long")
            if decimal and self.pos - start > 16:
                raise self.fail("decimal too long")
        text = self.text[start:self.pos]
        if not decimal:
            return sign * int(text)
        if text.endswith("."):
            raise self.fail("a decimal ends in a dot")
        if len(text) - text.index(".") - 1 > 3:
            raise self.fail("more than three fraction digits")
        return sign * Decimal(text)

    # 4.2.5
    def string(self) -> str:
        self.pos += 1
        out: List[str] = []
        while not self.at_end():
            c = self.take()
            if c == "\\":
                if self.at_end():
                    raise self.fail("escape at the end")
                nxt = self.take()
                if nxt not in ('"', "\\"):
                    raise self.fail("bad escape")
                out.append(nxt)
            elif c == '"':
                return "".join(out)
            elif ord(c) < 0x20 or ord(c) > 0x7E:
                raise self.fail("a character a string may not hold")
            else:
                out.append(c)
        raise self.fail("unterminated string")

    # 4.2.6
    def token(self) -> Token:
        start = self.pos
        self.pos += 1
        while self.peek() != "" and (self.peek() in _TCHAR or self.peek() in ":/"):
            self.pos += 1
        return Token(self.text[start:self.pos])

    # 4.2.7
    def byte_sequence(self) -> bytes:
        self.pos += 1
        end = self.text.find(":", self.pos)
        if end < 0:
            raise self.fail("unterminated byte sequence")
        b64 = self.text[self.pos:end]
        if any(c not in _BASE64 for c in b64):
            raise self.fail("not base64")
        self.pos = end + 1
        try:
            return base64.b64decode(b64 + "=" * (-len(b64) % 4))
        except binascii.Error:
            raise self.fail("not base64") from None

    # 4.2.8
    def boolean(self) -> bool:
        self.pos += 1
        c = self.take()
        if c == "1":
            return True
        if c == "0":
            return False
        raise self.fail("a boolean is ?0 or ?1")


def _whole(text: str) -> _Parser:
    p = _Parser(text)
    p.skip_sp()
    return p


def _done(p: _Parser) -> None:
    p.skip_sp()
    if not p.at_end():
        raise p.fail("text after the value")


def parse_list(text: str) -> List[Member]:
    """An sf-list: members, each an Item ``(value, params)`` or an Inner List ``([items], params)``."""
    p = _whole(text)
    members = p.list_members()
    _done(p)
    return members


def parse_dictionary(text: str) -> Dict[str, Member]:
    """An sf-dictionary: key to member; a key without a value is ``True``."""
    p = _whole(text)
    out = p.dictionary()
    _done(p)
    return out


def parse_item(text: str) -> Item:
    """An sf-item: ``(value, params)``."""
    p = _whole(text)
    item = p.item()
    _done(p)
    return item


def is_inner_list(member: Member) -> bool:
    """Whether a list or dictionary member is an Inner List (its first element a list of items)."""
    return isinstance(member[0], list)
