"""ms-swift's own DeepSpeed configs: ``swift sft|rlhf --deepspeed zero3`` names a file ms-swift ships, not one of
the user's, and ms-swift replaces the name with that file's path before the Trainer reads it.

Which names map to which file, by release (read at the tags):

- 2.x (``swift/llm/utils/argument.py`` ``SftArguments.__post_init__``): ``default-zero2``, ``default-zero3``,
  ``zero2-offload``, ``zero3-offload`` -> ``swift/llm/ds_config/zero2.json`` ... ``zero3_offload.json``;
- 3.x (``swift/llm/argument/train_args.py`` ``_init_deepspeed``, v3.0.0 to v3.12.6): ``zero0``, ``zero1``,
  ``zero2``, ``zero3``, ``zero2_offload``, ``zero3_offload`` -> ``swift/llm/ds_config/<name>.json`` (zero0 and
  zero1 from v3.0.1, where their files appear);
- 4.x (``swift/arguments/sft_args.py``, v4.0.0 to v4.5.2): the same names -> ``swift/config/<name>.json``.

The files' contents are shipped in ``zeroadvisor/schemas/ms_swift/<stem>@<release>.json``, copied verbatim from the
ms-swift tag where each content first appears (v2.4.1 to v4.5.2; 3.2.2 set ``overlap_comm`` false, which the
buckets' memory depends on). A release older than v2.4.1 has none shipped here.
"""

from __future__ import annotations

from packaging.version import Version

from zeroadvisor.config.shipped_copies import ShippedConfig, content_at, contents, read_copy, release_for

V2_NAMES = {"default-zero2": "zero2", "default-zero3": "zero3", "zero2-offload": "zero2_offload",
            "zero3-offload": "zero3_offload"}
V3_NAMES = ("zero0", "zero1", "zero2", "zero3", "zero2_offload", "zero3_offload")
NAMES = frozenset((*V2_NAMES, *V3_NAMES))
V3, V4 = Version("3.0.0"), Version("4.0.0")
_FOLDER = "ms_swift"


def stem_of(name: str, release: Version | None) -> str | None:
    """The file ``--deepspeed name`` picks at ``release`` (None: not known), without .json; None where that release
    maps no such name (a 3.x name under 2.x, or the reverse)."""
    if name in V2_NAMES:
        return V2_NAMES[name] if release is None or release < V3 else None
    return name if name in V3_NAMES and (release is None or release >= V3) else None


def shipped(name: str, requirement: str | None) -> tuple[ShippedConfig | None, bool]:
    """``--deepspeed name`` as ms-swift ``requirement`` (a release or a PEP 440 range; None: not known) reads it, and
    whether that release decided it (False: the newest shipped content, an assumption). None: no such name at that
    release, or a release older than any shipped copy."""
    base = stem_of(name, None)
    if base is None:
        return None, True
    releases = contents(_FOLDER, base)
    chosen, known = release_for(requirement, releases)
    stem = stem_of(name, chosen)
    since = content_at(releases, chosen)
    if stem is None or since is None:
        return None, True
    folder = "swift/config" if chosen is None or chosen >= V4 else "swift/llm/ds_config"
    shown = str(chosen) if chosen is not None else f"{since} or later"
    return ShippedConfig("ms-swift", f"{folder}/{stem}.json", str(since), shown, read_copy(_FOLDER, stem, since)), known
