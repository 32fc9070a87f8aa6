"""Help that reads like kubectl's: what a command does, its options, no
Python docstring machinery.

Typer shows a command function's whole docstring as its help and a type placeholder for
every option. :func:`tidy` rewrites a click command tree once, before it runs: docstring
sections for readers of the code (``Args:``, ``Raises:``, ``Returns:`` ...) are dropped,
Sphinx roles (``:mod:`x```, ``:data:`x```) and double backticks become plain ``x``, and
flags (options that take no value) lose their ``<bool>`` placeholder.
"""

from __future__ import annotations

import re

#: Google-style docstring sections (the Napoleon names) that are for code readers only.
SECTIONS = ("Args", "Arguments", "Parameters", "Raises", "Returns", "Return", "Yields",
            "Example", "Examples", "Attributes", "Note", "Notes")
_SECTION = re.compile(rf"^({'|'.join(SECTIONS)}):\s*$")
_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`~?([^`]+)`")
_DOUBLE = re.compile(r"``([^`]+)``")


def clean(text: str | None) -> str | None:
    """``text`` without docstring sections and Sphinx markup (see the module docstring);
    None stays None."""
    if not text:
        return text
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        if _SECTION.match(line):  # a section header at the left margin
            skipping = True
            continue
        if skipping and (not line.strip() or line.startswith((" ", "\t"))):
            continue
        skipping = False
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    body = "\n\n".join(_joined(p) for p in "\n".join(out).split("\n\n"))
    return _DOUBLE.sub(r"`\1`", _ROLE.sub(r"`\1`", body))


def _joined(paragraph: str) -> str:
    """A prose paragraph on one line (the terminal wraps it; rich help keeps a docstring's
    line breaks otherwise); list items, indented lines and ``\\b`` blocks as they are."""
    lines = paragraph.splitlines()
    if any(ln.lstrip().startswith(("- ", "* ", "\b")) or ln.startswith((" ", "\t"))
           for ln in lines):
        return paragraph
    return " ".join(ln.strip() for ln in lines)


def _dedented(text: str) -> str:
    import inspect

    return inspect.cleandoc(text)


def tidy(command) -> None:
    """Rewrite ``command`` (a click command or group) and its subcommands in place: help
    texts through :func:`clean`, no placeholder on flags. Idempotent."""
    if getattr(command, "_kfp_gpu_tidy", False):
        return
    command._kfp_gpu_tidy = True
    if command.help:
        command.help = clean(_dedented(command.help))
    for param in getattr(command, "params", ()):
        if getattr(param, "is_flag", False) and not getattr(param, "count", False):
            param.metavar = ""
        if getattr(param, "help", None):
            param.help = clean(param.help)
    make_help_option = command.get_help_option

    def get_help_option(ctx):  # --help is made per context: a flag too
        option = make_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        tidy(sub)
