"""Reading the YAML (or JSON) files users write: configs, search spaces, nomenclatures. A file that is not
a mapping, that gives a key twice (YAML keeps the last silently), or that asks Snakemake to run it as a
template, is refused in one line naming it."""

from pathlib import Path
from typing import Any

import yaml

from lcflow.errors import LcflowError

#: the key that makes Snakemake evaluate a config file as a yte template, running the code in it
TEMPLATE_KEY = "__use_yte__"


class DuplicateKey(yaml.YAMLError):
    """A mapping that gives one key twice."""

    def __init__(self, key: Any, line: int):
        super().__init__(f"key {key!r} is given twice (again on line {line})")
        self.key, self.line = key, line


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep)


def strict_load(text: str) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys (:class:`DuplicateKey`)."""
    return yaml.load(text, Loader=_StrictLoader)


def load_file(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """One YAML (or JSON) config file as a mapping, or one line saying why it is not one."""
    path = Path(path)
    try:
        data = strict_load(path.read_text())
    except OSError as exc:
        raise LcflowError(f"{what} {path}: cannot be read ({exc.strerror})") from exc
    except UnicodeDecodeError:
        raise LcflowError(
            f"{what} {path}: is not a text file (a YAML or JSON mapping of keys)"
        ) from None
    except DuplicateKey as exc:
        raise LcflowError(
            f"{what} {path}: {exc}: YAML would keep the last one silently; give each key once"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise LcflowError(
            f"{what} {path}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise LcflowError(f"{what} {path}: expected a mapping of keys, found {type(data).__name__}")
    if TEMPLATE_KEY in data:
        raise LcflowError(
            f"{what} {path} sets {TEMPLATE_KEY}, which makes Snakemake run the code in it as a template "
            "when it reads the file, before lcflow can check it; lcflow configs are data: remove the "
            "key (check a config from others with lcflow check-config, which never runs it)"
        )
    return data
