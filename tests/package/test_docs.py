"""The documentation: README a front door, the references made from their sources, the site built with
warnings as errors."""

import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

from ..conftest import ROOT


def test_readme_is_a_front_door_whose_config_skeleton_is_a_valid_config():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    skeleton = text.split("## Your own tiles", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    from lcflow.defaults import schema

    jsonschema.validate(yaml.safe_load(skeleton), schema())
    for page in ("getting-started", "own-data", "stages", "models", "hpo", "slurm", "outputs", "benchmarks",
                 "development", "reference/config", "reference/cli"):
        assert f"docs/{page}.md" in text and (ROOT / "docs" / f"{page}.md").exists(), page


def test_the_references_are_made_from_the_schema_and_the_parsers():
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "generate.py"), "--check"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    config = (ROOT / "docs" / "reference" / "config.md").read_text()
    assert "| `labels.unlabelled_max` | `0.75` | number in [0, 1] |" in config


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    done = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-q", "-f",
                           str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")], capture_output=True, text=True,
                          timeout=600, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").exists()


def test_every_site_value_of_the_slurm_profile_is_in_the_docs_table():
    """docs/slurm.md's table of SITE VALUES names each value the profile's block defines, and no other."""
    import re

    profile = (ROOT / "profiles" / "slurm" / "config.yaml").read_text()
    block = profile.split("SITE VALUES", 1)[1].split("# ====", 1)[0]
    defined = set(re.findall(r"^  - (\w+) = (?:int\()?site\(", block, re.M))
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", (ROOT / "docs" / "slurm.md").read_text(), re.M))
    assert len(defined) > 15 and defined == documented, (defined - documented, documented - defined)
