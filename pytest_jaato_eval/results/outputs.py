"""An output a run or a command writes (`--html`, `--junitxml`, `--jaato-pdf`, ...) never
overwrites the store or an input: refused in one line before anything is written.

Standard library only: the options read it in every run that asks for an output.
"""
from __future__ import annotations

from pathlib import Path


def check_output(option: str, target: Path | str | None, *protected: tuple[str, Path | None]
                 ) -> str | None:
    """A one-line refusal when an output file (`--html`, `--junitxml`, ...) names the
    store or an input; None when it is fine. Paths compare after resolving links."""
    if not target:
        return None
    out = Path(target).expanduser().resolve()
    for what, path in protected:
        if path is not None and Path(path).expanduser().resolve() == out:
            return f"{option} {target}: is the {what}; writing it would destroy it"
    return None


def refuse_outputs(config, store: Path, html: Path | None, pdf: Path | None) -> str | None:
    """A run's outputs must not overwrite its store: the first refusal, as one line."""
    outputs = (("--jaato-html", html), ("--jaato-pdf", pdf),
               ("--junitxml", getattr(config.option, "xmlpath", None)),
               ("--html", getattr(config.option, "htmlpath", None)))
    for option, target in outputs:
        refusal = check_output(option, target, ("result store (--jaato-out)", store))
        if refusal:
            return refusal
    if html and pdf and Path(html).resolve() == Path(pdf).resolve():
        return f"--jaato-pdf {pdf}: is also the --jaato-html output"
    return None
