"""Check in a headless browser that every page of the built book renders its maths offline.

For each page of ``_build/html`` (after ``make book`` or ``tools/build_book.py``), Chromium loads the file with
background networking off, runs its scripts, and dumps the resulting DOM; the page passes when every maths element
that Sphinx wrote (``class="math ..."``) became a MathJax container and MathJax reported no error. Not part of
``make test``: it needs Chromium (``chromium`` or ``chromium-browser`` on the PATH, or ``--browser``).

Usage: ``python tools/check_pages.py [--html _build/html] [--browser PATH]``; exit status 1 when a page fails.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--virtual-time-budget=20000", "--dump-dom")


def rendered_maths(dom: str) -> dict[str, int]:
    """Counts in a page's DOM after its scripts ran: Sphinx's maths elements, MathJax containers, MathJax errors.

    Example:
        >>> rendered_maths('<span class="math notranslate nohighlight"><mjx-container></mjx-container></span>')
        {'maths': 1, 'rendered': 1, 'errors': 0}
    """
    return {"maths": len(re.findall(r'class="math notranslate nohighlight"', dom)),
            "rendered": len(re.findall(r"<mjx-container", dom)),
            "errors": len(re.findall(r"<mjx-merror", dom))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--browser", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = parser.parse_args()
    if not args.browser:
        raise SystemExit("no Chromium found: install it (e.g. apt-get install chromium) or pass --browser")
    pages = sorted(page for page in args.html.rglob("*.html")
                   if "_static" not in page.parts and page.name not in ("genindex.html", "search.html"))
    if not pages:
        raise SystemExit(f"no pages under {args.html}: build the book first")
    failed = []
    for page in pages:
        dom = subprocess.run([args.browser, *BROWSER_FLAGS, page.resolve().as_uri()], capture_output=True,
                             text=True, timeout=180).stdout
        counts = rendered_maths(dom)
        ok = bool(dom) and counts["rendered"] == counts["maths"] and not counts["errors"]
        print(f"{'ok    ' if ok else 'FAILED'} {page.relative_to(args.html)}: {counts['maths']} maths, "
              f"{counts['rendered']} rendered by MathJax, {counts['errors']} MathJax errors")
        if not ok:
            failed.append(page)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
