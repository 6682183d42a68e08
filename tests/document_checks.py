"""Reading rendered documents as a reader would: the text and tags of an HTML page, a
real browser's screenshot and print. Shared by the unit and end-to-end report tests."""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest


class Text(HTMLParser):
    """The text a reader sees, and every tag name."""

    def __init__(self):
        super().__init__()
        self.text, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def parse(document: str) -> Text:
    p = Text()
    p.feed(document)
    return p


def png_size_and_ink(path: Path) -> tuple[int, int, int]:
    """(width, height, number of distinct byte values in the pixel data): a blank page has ~2."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def keep(path: Path) -> None:
    where = os.environ.get("JAATO_REPORT_SHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(where) / path.name)


def chromium(*args: str, url: str) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", *args, url],
            capture_output=True, text=True, timeout=120)


def code_blocks(path: Path) -> list[tuple[str, str]]:
    """A Markdown file's fenced blocks, in order: (info string, text). Each fence closes the
    block it opened, so a closing fence is never read as the next block's opening."""
    blocks, info, lines = [], None, []
    for line in Path(path).read_text().splitlines():
        if line.startswith("```"):
            if info is None:
                info, lines = line[3:].strip(), []
            else:
                blocks.append((info, "\n".join(lines) + "\n"))
                info = None
        elif info is not None:
            lines.append(line)
    return blocks


def shape(line: str) -> str:
    """A printed line with what changes from run to run (numbers: seconds, costs,
    percentages) made one mark, and runs of spaces one space."""
    return " ".join(re.sub(r"\d+(?:[.,]\d+)*", "N", line).replace("[ ", "[").split())


def printed_as_documented(doc: Path, command: str, output: str) -> list[str]:
    """The lines a doc shows under `$ <command>`, each checked against what the program
    printed, by shape; returns them. `...` in the doc stands for lines left out."""
    text = doc.read_text(encoding="utf-8")
    start = text.index(f"$ {command}\n") + len(f"$ {command}\n")
    # `...` stands for lines left out; a `===` separator is as wide as the terminal it is in
    shown = [line for line in text[start:text.index("```", start)].splitlines()
             if line.strip() and line.strip() != "..." and not line.startswith("===")]
    printed = {shape(line) for line in output.splitlines()}
    missing = [line for line in shown if shape(line) not in printed]
    assert not missing, f"{doc.name}: `{command}` prints no line like: {missing}"
    return shown
