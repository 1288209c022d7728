"""Which transformers release a model is counted as.

The family table (families.py) is read from transformers 5.24's modelling code. One difference between releases
changes what the memory model counts: transformers 5.0 fused each layer's routed experts into one ``*Experts``
module of 3-D parameters, where 4.x builds an ``nn.ModuleList`` of per-expert MLPs of ``nn.Linear``. That decides
what bitsandbytes quantizes (it replaces ``nn.Linear`` only), what peft's ``all-linear`` adapts and what ZeRO-3
gathers per module (families.py ``MoeV4``). A request is a release ("4.41.2"), a release line ("4.41") or a PEP 440
range (">=4.41.2,<=4.45"): pip installs the newest release a range admits, so that is the one counted.
"""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

MODELLED = "5.24"  # the release families.py was read from
FUSED_EXPERTS_FROM = Version("5.0.0")  # the first release with one fused *Experts module per MoE layer
# The release lines a range is tried against besides the versions it names: every 4.x and 5.x minor up to the
# modelled one (what matters is only whether the newest release admitted is a 4.x or a 5.x).
_LINES = tuple(f"4.{minor}.0" for minor in range(58)) + tuple(f"5.{minor}.0" for minor in range(25))
_RELEASE = re.compile(r"\d+(\.\d+){0,2}")
_NEWER = "9999"  # a release above every one read: a range open above them admits it


class ReleaseError(ValueError):
    """A transformers request that names no release (the message says why, in one line)."""


def resolve(request: str) -> str:
    """The release a request counts as: itself for a release or release line, else the newest release the range
    admits (pip's choice); ReleaseError for text that is neither."""
    text = request.strip()
    if _RELEASE.fullmatch(text):
        return text
    try:
        allowed = SpecifierSet(text)
        if not len(allowed):  # "" or ",": an empty set admits every release, which names none
            raise InvalidSpecifier(text)
    except InvalidSpecifier:
        raise ReleaseError(f"{_shown(request)} is not a transformers release (4.41.2), release line (4.41) or PEP "
                           f"440 range (>=4.41,<4.46)") from None
    named = [spec.version.rstrip(".*") for spec in allowed]
    candidates = {Version(v) for v in (*named, *_LINES, _NEWER) if _version(v) is not None}
    admitted = sorted(v for v in candidates if v in allowed)
    if not admitted:
        raise ReleaseError(f"{_shown(request)} admits no transformers release")
    # a range open above the release read (">5.24", ">=6"): pip installs a newer one, counted as the newest read
    return MODELLED if admitted[-1] > Version(MODELLED) else str(admitted[-1])


def _shown(request: str, limit: int = 60) -> str:
    """The request quoted for a one-line message, a long one cut (a flag or pin of any length)."""
    return repr(request) if len(request) <= limit else f"{request[:limit]!r}... ({len(request):,} characters)"


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


# The first release whose sdpa_attention_forward hands GQA to SDPA (enable_gqa, use_gqa_in_sdpa) instead of
# repeat_kv (integrations/sdpa_attention.py @ v4.54.1; v4.53.3 repeats K/V to every query head)
SDPA_GQA_FROM = Version("4.54.0")


def sdpa_repeats_kv(release: str | None) -> bool:
    """Whether ``release`` (None: the modelled one) expands K/V to every query head before SDPA."""
    version = _version(release) if release is not None else None
    return version is not None and version < SDPA_GQA_FROM


def fused_experts(release: str | None) -> bool:
    """Whether ``release`` (None: the modelled one) builds each MoE layer's routed experts as one fused module."""
    version = _version(release) if release is not None else None
    return version is None or version >= FUSED_EXPERTS_FROM


__all__ = ["FUSED_EXPERTS_FROM", "MODELLED", "SDPA_GQA_FROM", "ReleaseError", "fused_experts", "resolve",
           "sdpa_repeats_kv"]
