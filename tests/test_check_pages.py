"""tools/check_pages.py: what a built page must not show a reader (its HTML checks; the browser's are not run here)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("check_pages", ROOT / "tools" / "check_pages.py")
assert _spec is not None and _spec.loader is not None
check_pages = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_pages)

CITATIONS = check_pages.bibliography_citations((ROOT / "references.bib").read_text(encoding="utf-8"))
CAPTIONED = ('<figure><img src="data:image/png;base64,AA"><figcaption><span class="caption-number">Fig. 1 </span>'
             "<p>Look.</p></figcaption></figure>")


def _output(html: str) -> str:
    return f'<article><div class="cell_output">{html}</div></article>'


@pytest.mark.parametrize("page, fault", [
    (_output("<p>$\\sigma = 6.08$</p>"), "raw maths in an output: $\\sigma = 6.08$"),
    (_output("<p>\\textsc{Encode}</p>"), "raw maths in an output: \\textsc"),
    (_output('<div class="output stderr"><pre>INSECURE: shared seed</pre></div>'), "stderr in an output: INSECURE"),
    (_output("<pre>results in /work/wt/x/results</pre>"), "a local path: /work/wt"),
    (_output("<table><tr><td>nan</td></tr></table>"), "a raw value in a table: nan"),
    (_output("<table><tr><td>5.7e+11</td></tr></table>"), "a raw value in a table: 5.7e+11"),
    (_output('<img src="a.png">'), "a figure without a numbered caption: a.png"),
    ("<article><p>as Mironov 2017, Proposition 2 shows</p></article>", "a plain-text citation: Mironov 2017"),
    ("<article><p>see Balle and Wang (2018)</p></article>", "a plain-text citation: Balle and Wang (2018"),
])
def test_each_leak_is_a_fault(page: str, fault: str) -> None:
    assert any(found.startswith(fault) for found in check_pages.page_faults(page, CITATIONS)), fault


def test_a_clean_page_has_no_fault() -> None:
    page = ('<article><p>By <a href="bibliography.html#id1">Mironov [2017]</a>, with '
            '<span class="math notranslate nohighlight">\\(\\sigma\\)</span>.</p>'
            '<div class="cell_input"><pre>path = "/tmp/x"  # code a reader opens</pre></div>'
            f'<div class="cell_output">{CAPTIONED}<table><tr><td>0.912 ± 0.004</td><td>-</td></tr></table>'
            "<pre>q=1.0: epsilon = 10.726</pre></div></article>")
    assert check_pages.page_faults(page, CITATIONS) == []
