"""Render the report of ``topkeval demo`` and screenshot it for the README (docs/report.png).

    pip install -e ".[test]"            # matplotlib and playwright
    python docs/screenshot.py           # needs Chromium (Debian: apt-get install chromium)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from topkeval.cli import main

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


if __name__ == "__main__":
    out = Path(__file__).parent / "report.png"
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        main(["demo", "--report", str(html)])
        shoot(html, out)
    print(f"wrote {out}")
