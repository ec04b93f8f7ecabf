"""The templates as a library: no template past 400 lines, no block of code written twice (shared
code lives in the underscore-prefixed macro files), and the retired CLUSTER_M of wgmma_tf32 still
read from stored configs."""

import re

import pytest

from autotune.core.types import UserError
from autotune.kernels.family import TEMPLATE_DIR, Family
from autotune.kernels.render import render

# Lines that carry no code of their own: a block of them is spelling, not a repeated piece.
_TRIVIA = re.compile(r"^([{}();]*|#pragma unroll( \d+)?|\{%-? *(else|endif|endfor|endcall|endmacro) *-?%\})$")
_BLOCK = 6


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, stripped line) of the code: a family's declaration (YAML in its leading
    comment, which cannot include another file) and trivia left out."""
    lines = text.splitlines()
    start = 0
    if text.startswith("{#- autotune"):
        start = next(i for i, line in enumerate(lines) if line.strip() == "-#}") + 1
    return [
        (i + 1, line.strip())
        for i, line in enumerate(lines)
        if i >= start and line.strip() and not _TRIVIA.match(line.strip())
    ]


def test_no_template_is_longer_than_400_lines():
    long = {p.name: n for p in TEMPLATE_DIR.glob("*.j2") if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_no_block_of_code_is_written_twice():
    seen: dict[tuple[str, ...], str] = {}
    twice = []
    for path in sorted(TEMPLATE_DIR.glob("*.j2")):
        lines = _code_lines(path.read_text())
        for i in range(len(lines) - _BLOCK + 1):
            block = tuple(line for _, line in lines[i : i + _BLOCK])
            here = f"{path.name}:{lines[i][0]}"
            if block in seen:
                twice.append(f"{here} repeats {seen[block]}")
            else:
                seen[block] = here
    assert not twice, "\n".join(twice[:10])


def test_the_check_finds_a_repeated_block(tmp_path):
    """The rule above is not vacuous: a template's own block pasted again is found."""
    text = (TEMPLATE_DIR / "_tile.cuh.j2").read_text()
    lines = _code_lines(text + "\n" + text)
    blocks = [tuple(line for _, line in lines[i : i + _BLOCK]) for i in range(len(lines) - _BLOCK + 1)]
    assert len(set(blocks)) < len(blocks)


def test_a_stored_wgmma_config_naming_the_retired_cluster_m_still_resolves():
    fam = Family.load("wgmma_tf32")
    params = {"BM": 128, "BN": 128, "STAGES": 3, "GROUP_M": 8, "PRECISION": "high", "ACC": "fp32"}
    with_it = fam.resolve({**params, "CLUSTER_M": 1})
    assert with_it.config == fam.resolve(params).config
    src = render(with_it)
    assert "__cluster_dims__" not in src and "multicast" not in src
    with pytest.raises(UserError, match="CLUSTER_M"):
        fam.resolve({**params, "CLUSTER_M": 2})
