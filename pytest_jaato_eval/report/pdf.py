"""The same report as PDF, rendered by weasyprint (P4).

weasyprint is the optional `pdf` extra. A PDF asked for without it is an error naming
the install line, checked before any arm runs, never a silent fallback to HTML: an
unattended sweep that asked for a PDF must not quietly produce something else.
"""
from __future__ import annotations

from pathlib import Path

INSTALL = "pip install 'pytest-jaato-eval[pdf]'"
# weasyprint imports but cannot draw text without pango (Debian's package names).
SYSTEM_LIBS = "apt-get install libpango-1.0-0 libpangoft2-1.0-0"


class PdfUnavailable(Exception):
    """The PDF renderer is missing or cannot load: one line saying how to install it."""


def load_weasyprint():
    try:
        import weasyprint  # optional, and heavy: only for a PDF
    except ImportError:
        raise PdfUnavailable(f"a PDF report needs weasyprint, which is not installed: "
                             f"{INSTALL}") from None
    except OSError as exc:  # installed, but its system libraries are missing
        raise PdfUnavailable(f"weasyprint is installed but cannot load its libraries "
                             f"({' '.join(str(exc).split())[:200]}); on Debian: {SYSTEM_LIBS}"
                             ) from None
    return weasyprint


def write(path: Path, html_text: str) -> Path:
    weasyprint = load_weasyprint()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The document names no URL (html.py), so there is nothing for weasyprint to fetch.
    weasyprint.HTML(string=html_text).write_pdf(str(path))
    return path
