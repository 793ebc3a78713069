#!/usr/bin/env python3
"""Broken links in the built book and in the README.

    python3 .ci/links.py BOOK_HTML_DIR README.md

Every relative `href` and `src` of every page of the built book must name a file that exists
there and, with a `#fragment`, an element of that page with that id. Every relative link
and image of the README must name a file of the repository and, with a `#fragment` on a
Markdown file, one of its headings (GitHub's anchors: lower case, punctuation dropped,
spaces as hyphens). Prints each broken link with the page it is on and exits 1 if any.
"""

import html.parser
import pathlib
import re
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    """The links and the ids of one HTML page."""

    def __init__(self):
        super().__init__()
        self.links = []
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "src") and value is not None:
                self.links.append(value)


def relative(url):
    """The URL's path and fragment when it is relative, else None (another site, or the
    site's root, which 404.html links to)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith("/"):
        return None
    return urllib.parse.unquote(parts.path), urllib.parse.unquote(parts.fragment)


def check_book(root):
    pages = {}
    for path in sorted(root.rglob("*.html")):
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path.resolve()] = page
    broken = []
    for path, page in pages.items():
        for url in page.links:
            target = relative(url)
            if target is None:
                continue
            link_path, fragment = target
            dest = (path.parent / link_path).resolve() if link_path else path
            if dest.is_dir():
                dest = dest / "index.html"
            where = path.relative_to(root.resolve())
            if not dest.exists():
                broken.append(f"{where}: {url}: no such file")
            elif fragment and dest.suffix == ".html" and fragment not in pages[dest].ids:
                broken.append(f"{where}: {url}: no element with id {fragment!r}")
    return len(pages), broken


def github_anchor(heading):
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def markdown_anchors(path):
    anchors, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            anchors.add(github_anchor(line.lstrip("#")))
    return anchors


def check_readme(readme):
    text = re.sub(r"```.*?```", "", readme.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for url in re.findall(r"\]\(([^)\s]+)\)", text):
        target = relative(url)
        if target is None:
            continue
        link_path, fragment = target
        dest = (readme.parent / link_path) if link_path else readme
        if not dest.exists():
            broken.append(f"{readme.name}: {url}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in markdown_anchors(dest):
            broken.append(f"{readme.name}: {url}: no heading with anchor {fragment!r}")
    return broken


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    book, readme = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    pages, broken = check_book(book)
    if pages == 0:
        sys.exit(f"links.py: no HTML page in {book}")
    broken += check_readme(readme)
    for line in broken:
        print(f"broken link: {line}")
    print(f"links: {pages} pages and {readme.name} checked, {len(broken)} broken")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
