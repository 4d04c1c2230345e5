"""Screenshots for the README and the docs, taken in headless Chromium with Playwright.

    pip install -e ".[test]"            # matplotlib, playwright, mkdocs-material and mkdocstrings
    python docs/screenshot.py           # docs/report.png: the report of ``topkeval demo``
    python docs/screenshot.py site      # docs/site.png: the front page of the docs site (mkdocs build)
    python docs/screenshot.py all       # both

Each needs Chromium (Debian: apt-get install chromium), found on the PATH or named by
TOPKEVAL_CHROMIUM. ``report`` renders the demo's HTML report and shoots it (1280 x 1500);
``site`` builds the site of mkdocs.yml into a temporary folder (``mkdocs build --strict``) and
shoots its front page, opened from the file (1280 x 1000).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from topkeval.cli import main

DOCS = Path(__file__).resolve().parent
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def shoot(html: Path, png: Path, width: int = 1280, height: int = 1500) -> None:
    browser_path = os.environ.get("TOPKEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        sys.exit("no Chromium found: install it (apt-get install chromium) or set TOPKEVAL_CHROMIUM")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=FLAGS)
        page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
        page.goto(f"file://{html.resolve()}", wait_until="load")
        page.screenshot(path=str(png))
        browser.close()


def report(png: Path = DOCS / "report.png") -> None:
    """The report of ``topkeval demo``, as the README shows it."""
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        main(["demo", "--report", str(html)])
        shoot(html, png)
    print(f"wrote {png}")


def site(png: Path = DOCS / "site.png") -> None:
    """The front page of the documentation site, built from mkdocs.yml by ``mkdocs build --strict``."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", tmp],
                       cwd=DOCS.parent, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        shoot(Path(tmp) / "index.html", png, height=1000)
    print(f"wrote {png}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "report"
    if what not in ("report", "site", "all"):
        sys.exit(__doc__)
    if what in ("report", "all"):
        report()
    if what in ("site", "all"):
        site()
