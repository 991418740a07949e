"""The README and docs/ link to each other, to results under benchmarks/ and to sources. Moving
a section or a file must not leave a link pointing nowhere: every relative link must name a file
that exists and, where it has one, an anchor that a heading of that file makes."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(
    os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
    if name.endswith(".md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchor(heading: str) -> str:
    """The anchor GitHub makes of a heading: lower case, punctuation but '-' and '_' dropped,
    spaces made '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: str) -> set:
    with open(path, encoding="utf-8") as f:
        text = FENCE.sub("", f.read())
    return {anchor(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, re.M)}


def links(path: str):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = FENCE.sub("", f.read())
    return [m.group(1) for m in LINK.finditer(text)
            if not re.match(r"[a-z]+:", m.group(1))]    # http:, https:, mailto: are not checked


def test_anchor_follows_githubs_rule():
    assert anchor("On a GPU: NVIDIA H100 80GB HBM3") == "on-a-gpu-nvidia-h100-80gb-hbm3"
    assert anchor("Signatures: typed packing") == "signatures-typed-packing"
    assert anchor("Checking GPU-only code without a GPU") == "checking-gpu-only-code-without-a-gpu"


def test_a_broken_link_is_found(tmp_path):
    # The check itself can fail: a heading that is not there is not an anchor.
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A section\n\n```\n# not a heading\n```\n")
    assert anchors(str(page)) == {"title", "a-section"}


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    assert links(doc), f"{doc} has no relative links: is the pattern still right?"
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = FENCE.sub("", f.read())
    # A target broken over two lines (a wrapped link) is no link at all to a Markdown reader.
    broken = [f"{m.group(1)!r}: white space in the target"
              for m in re.finditer(r"\]\(([^)]*\s[^)]*)\)", text)]
    for link in links(doc):
        path, _, name = link.partition("#")
        target = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), path)) if path \
            else os.path.join(ROOT, doc)
        if not os.path.exists(target):
            broken.append(f"{link}: no such file")
        elif name and target.endswith(".md") and name not in anchors(target):
            broken.append(f"{link}: no heading makes #{name}")
    assert not broken, f"{doc}: " + "; ".join(broken)
