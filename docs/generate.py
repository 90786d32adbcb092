"""Write the documentation's references from their sources: the configuration from the schema
(docs/reference/config.md), the commands from their parsers (docs/reference/cli.md).

Run by `make docs`; tests/package/test_docs.py checks that the files in the repository are what this writes.
Usage: python docs/generate.py [--check]
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"


def _accepted(node: dict) -> str:
    """What a key takes: its type, range or choices, as the checks before any job hold it to."""
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    kinds = node.get("type", "")
    kinds = [k for k in (kinds if isinstance(kinds, list) else [kinds]) if k]
    text = " or ".join(k for k in kinds if k != "null") or "any"
    if any(b in node for b in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")):
        low = (f"({node['exclusiveMinimum']}" if "exclusiveMinimum" in node else
               f"[{node['minimum']}" if "minimum" in node else "(-inf")
        high = (f"{node['exclusiveMaximum']})" if "exclusiveMaximum" in node else
                f"{node['maximum']}]" if "maximum" in node else "inf)")
        text += f" in {low}, {high}"
    if "items" in node and isinstance(node["items"], dict):
        text += " of " + _accepted(node["items"])
    if "null" in kinds:
        text += " or null"
    return text


def _default(node: dict, required: bool) -> str:
    if required:
        return "required"
    if "default" not in node or node.get("type") == "object" and node["default"] == {}:
        return ""
    return f"`{json.dumps(node['default'])}`"


def _rows(node: dict, path: str = "", required: tuple = ()) -> list[tuple[str, str, str, str]]:
    rows = []
    for key, sub in (node.get("properties") or {}).items():
        name = f"{path}.{key}" if path else key
        rows.append((name, _default(sub, key in required), _accepted(sub), " ".join(sub.get("description", "").split())))
        rows += _rows(sub, name, tuple(sub.get("required", ())))
        extra = sub.get("additionalProperties")
        if isinstance(extra, dict):
            rows.append((f"{name}.KEY", "", _accepted(extra), " ".join(extra.get("description", "").split())))
    return rows


def config_reference() -> str:
    sys.path.insert(0, str(ROOT / "workflow"))
    from lcflow.defaults import schema

    s = schema()
    lines = ["# Configuration reference", "",
             "Every key of the workflow's configuration, made from its schema (`workflow/schemas/config.schema.yaml`) "
             "by `docs/generate.py`. A config is checked against it before any job runs (`lcflow check-config`); a "
             "value outside what a key accepts is refused in one line naming the key, the value and the file.", "",
             "| key | default | accepts | meaning |", "| --- | --- | --- | --- |"]
    for key, default, accepted, meaning in _rows(s, required=tuple(s.get("required", ()))):
        cell = meaning.replace("|", "\\|")
        lines.append(f"| `{key}` | {default.replace('|', chr(92) + '|')} | {accepted.replace('|', chr(92) + '|')} | {cell} |")
    return "\n".join(lines) + "\n"


def cli_reference() -> str:
    sys.path.insert(0, str(ROOT / "workflow"))
    from lcflow.cli import _Help, parser

    top = parser()
    lines = ["# Command reference", "",
             "Every `lcflow` command with its options, as `lcflow COMMAND --help` prints them (made by "
             "`docs/generate.py`). Each ends with one line naming what failed and exit 2 for bad input, 1 for "
             "anything else; `-v` puts debug messages and the traceback in the log.", ""]
    for name, command in top.parse_args(["check-config"]).commands.items():
        command.formatter_class = lambda prog: _Help(prog, width=100)
        lines += [f"## {name}", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


PAGES = {"config.md": config_reference, "cli.md": cli_reference}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only say whether the files are up to date")
    a = ap.parse_args(argv)
    stale = []
    for name, make in PAGES.items():
        text, path = make(), REFERENCE / name
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not a.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if a.check and stale:
        print("out of date (run python docs/generate.py): " + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
