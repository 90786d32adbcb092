"""Shared fixtures: real catalogue responses and CORINE, and a small synthetic demo built once."""

import contextlib
import dataclasses
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, TypeVar

# Before anything loads OpenMP (torch, numba), and inherited by every process the tests start, Slurm jobs
# too: threads that wait for work sleep instead of spinning. The tests run in three processes on CI's two
# cores (Makefile), and a spinning thread takes the core that the thread it waits for needs: beside two
# busy processes an LSTM training took 22.5 CPU-s spinning against 14.2 sleeping (medians of 3)
# (benchmarks/openmp_wait_policy.py, docs/slurm.md)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pystac
import pytest
import yaml
from hypothesis import settings

from lcflow.labels import alignment as labels
from lcflow.labels import nomenclature, sampling
from lcflow.labels.sample_settings import SampleSettings
from lcflow.retrieve import cube, search
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.synth.demo import make_demo

# Property tests draw the same examples in CI, every run (a red CI is then the code's, not the draw's);
# locally they draw new and more examples each run. No deadline: an example's time says nothing of its
# result, and it varies with what runs beside it (the tests run in three processes: Makefile)
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parents[1]
SMALL_AOI = {"31UFT": [640000, 5760000, 641280, 5761280], "32ULC": [330000, 5700000, 331280, 5701280]}
BANDS = ["B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"]
#: the session's samples: drawn as the small demo needs them, no label checks (tests of the checks add them)
UNCHECKED_SAMPLES = SampleSettings(per_class=300, min_valid_fraction=0.4, boundary_px=1, block_px=16, min_per_class=0,
                                   clean={"min_label_probability": 0})
#: tools a run requires (.ci/run installs them and sets LCFLOW_TESTS_REQUIRE=slurm,gdal,chromium): a test
#: that needs one of them fails where it is missing instead of skipping
REQUIRED = frozenset(filter(None, os.environ.get("LCFLOW_TESTS_REQUIRE", "").split(",")))


#: test files run by one pytest-xdist worker: those that share the demo DAG run once (local_demo_run, a
#: session fixture each worker would build again) and the Slurm tests (one test cluster on this host)
DEMO_FILES = frozenset({"tests/workflow/test_workflow.py", "tests/slurm/test_slurm.py"})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``-n N``: DEMO_FILES' tests as one unit of work, the longest (a worker starts it at once), every other
    test a unit of its own that the other workers take beside it. A scheduler rather than ``xdist_group``
    marks: with pytest 9.2 xdist 3.8 no longer sees a mark's group (pytest-dev/pytest-xdist#1386)."""
    from xdist.scheduler import LoadScopeScheduling

    class DemoGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "demo-dag" if nodeid.split("::", 1)[0] in DEMO_FILES else nodeid

    return DemoGroupScheduling(config, log)


def missing(tool: str, why: str) -> None:
    """Skip a test whose ``tool`` (slurm, gdal, chromium) cannot be had here, with ``why``; fail it instead
    where the run requires the tool, so that CI never passes with those tests unrun."""
    if tool in REQUIRED:
        pytest.fail(f"{why}: LCFLOW_TESTS_REQUIRE names {tool}, so this test must run", pytrace=False)
    pytest.skip(why)


def corine_polygons(raster: Path, column: str = "Code_18"):
    """A CORINE raster vectorised (rasterio.features.shapes) into a GeoDataFrame with its CLC codes as text
    in ``column``, as CORINE ships its vectors."""
    import geopandas as gpd
    import numpy as np
    import rasterio
    import rasterio.features
    import shapely

    with rasterio.open(raster) as ds:
        codes = nomenclature.clc_codes_from_raster(ds.read(1), ds.nodata).astype(np.int32)
        shapes = list(rasterio.features.shapes(codes, mask=codes > 0, transform=ds.transform))
        crs = ds.crs.to_wkt()
    return gpd.GeoDataFrame({"ID": np.arange(len(shapes)), column: [str(int(v)) for _, v in shapes]},
                            geometry=[shapely.geometry.shape(g) for g, _ in shapes], crs=crs)


@pytest.fixture(scope="session")
def earth_search_items() -> list[pystac.Item]:
    d = json.loads((DATA / "stac_earth_search_v1_s2l2a_13TDE_20231008.json").read_text())
    return [pystac.Item.from_dict(f) for f in d["features"]]


@pytest.fixture(scope="session")
def planetary_items() -> list[pystac.Item]:
    d = json.loads((DATA / "stac_planetary_computer_s2l2a_35MNM_2020.geojson").read_text())
    return [pystac.Item.from_dict(f) for f in d["features"]]


T = TypeVar("T")


def built_once(tmp_path_factory, name: str, build: Callable[[Path], T]) -> T:
    """``build(directory)``'s value, built by the first pytest-xdist worker that asks, in a directory every
    worker shares, and read by the others: a slow session fixture is then built once per session, not once
    per worker. A worker whose build failed leaves no value, and the next that asks builds again."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # one directory per session
    directory, value = shared / name, shared / f"{name}.pickle"
    with FileLock(str(shared / f"{name}.lock")):
        if value.exists():
            return pickle.loads(value.read_bytes())
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir()
        built = build(directory)
        value.write_bytes(pickle.dumps(built))
        return built


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> Path:
    """A small demo (128 x 128 px per tile, 2018-2019) written once per session."""
    def build(out: Path) -> Path:
        make_demo(out, SMALL_AOI, [2018, 2019])
        return out

    return built_once(tmp_path_factory, "demo", build)


@pytest.fixture(scope="session")
def stages(demo, tmp_path_factory) -> dict[str, Path]:
    """search -> cube -> labels -> sample for 31UFT 2018 and 2019 on the small demo, once per session."""
    def build(r: Path) -> dict[str, Path]:
        paths = {}
        for year in (2018, 2019):
            d = r / "31UFT" / str(year)
            search.run("31UFT", year, d / "items.json", catalog=str(demo / "catalog" / "catalog.json"))
            cube.run(d / "items.json", "31UFT", year, d / "cube.tif", d / "cube_valid.tif",
                     CubeSettings(bands=BANDS, block_px=64), bounds=SMALL_AOI["31UFT"])
            paths[f"cube{year}"], paths[f"valid{year}"], paths[f"items{year}"] = d / "cube.tif", d / "cube_valid.tif", d / "items.json"
        labels.run(demo / "corine" / "clc_demo_3035.tif", paths["cube2018"], r / "31UFT" / "labels.tif", nomenclature.clc_level(2))
        paths["labels"] = r / "31UFT" / "labels.tif"
        for year in (2018, 2019):
            out = r / "31UFT" / str(year) / "samples.parquet"
            sampling.run(paths[f"cube{year}"], paths[f"valid{year}"], paths["labels"], out, UNCHECKED_SAMPLES,
                         tile="31UFT", year=year)
            paths[f"samples{year}"] = out
        paths["root"] = r
        return paths

    return built_once(tmp_path_factory, "results", build)


@pytest.fixture(scope="session")
def patch_samples(stages, tmp_path_factory) -> dict[int, Path]:
    """The patch variant (11 x 11 px) of the 31UFT samples, per year, once per session."""
    def build(directory: Path) -> dict[int, Path]:
        out = {}
        for year in (2018, 2019):
            path = directory / str(year) / "patches.parquet"
            sampling.run(stages[f"cube{year}"], stages[f"valid{year}"], stages["labels"], path,
                         dataclasses.replace(UNCHECKED_SAMPLES, patch_px=11), tile="31UFT", year=year)
            out[year] = path
        return out

    return built_once(tmp_path_factory, "patches", build)


def snakemake_command(workdir: Path, *args: str, profile: str = "local", env: dict | None = None,
                      configfile: Path | list[Path] | None = None,
                      program: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(command, environment) of the workflow in ``workdir`` under a profile (the demo config unless other
    files are given, merged in order), with this interpreter's tools on PATH; ``program`` runs instead of
    ``snakemake``."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    # ARGS (targets among them) before --configfile, whose list of files would swallow a target after it
    cmd = [*(program or ["snakemake"]), "-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--profile", str(ROOT / "profiles" / profile),
           *args,
           "--configfile", *map(str, configfile if isinstance(configfile, list) else [configfile or ROOT / "config" / "config.yaml"]),
           *(["--cores", "2"] if profile == "local" else [])]
    return cmd, env


def snakemake(workdir: Path, *args: str, timeout: int = 1500, **how) -> subprocess.CompletedProcess:
    """:func:`snakemake_command` run to its end (``how``: its keywords), output captured."""
    cmd, env = snakemake_command(workdir, *args, **how)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)



@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A file system of ``size`` (tmpfs: ``64k``, ``4m``) of its own at ``path`` for the block, to fill;
    the test is skipped where this process may not mount (not root)."""
    path.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                      capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)

#: directory names that a shell would split or run if a rule did not quote them
HOSTILE_RESULTS = "rés ults'$(touch FILE);x"
HOSTILE_RESOURCES = "resources ü'x"


def demo_config(path: Path, results: str = HOSTILE_RESULTS, resources: str = HOSTILE_RESOURCES) -> Path:
    """The demo config with its results and demo-data directories renamed; written to ``path``."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["results"] = results
    cfg["demo"]["out"] = resources
    cfg["stac"]["catalog"] = f"{resources}/catalog/catalog.json"
    cfg["stage"]["dir"] = f"{resources}/scenes"
    cfg["labels"]["corine"] = f"{resources}/corine/clc_demo_3035.tif"
    cfg["assess"]["truth"] = f"{resources}/truth/{{tile}}_{{year}}.tif"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return path


def job_counts(output: str) -> dict[str, int]:
    """Jobs per rule from Snakemake's "Job stats" table (none where it says there is nothing to be done)."""
    if "Job stats:" not in output and "Nothing to be done" in output:
        return {}
    table = output.split("Job stats:", 1)[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


#: how far the other pytest-xdist workers step back (nice) once a worker starts the demo DAG: on CI's two
#: cores a nice-0 process then gets about 83 % of a core both want (CFS weights 1024 : 215), not 50 %. At 4
#: (70 %) the other workers ended 200 s before the demo group, which then ran on one core alone
YIELD_NICENESS = 7


def others_yield() -> None:
    """Lower the other pytest-xdist workers' CPU priority by YIELD_NICENESS (their later processes inherit
    it). This worker's demo group heads the suite's longest chain (the local demo DAG's first part, then
    the Slurm DAG beside its rest, then the Slurm tests): the other workers' tests fill the cores it
    leaves, instead of slowing it and then leaving the cores idle at the end. Workers are this process's
    siblings (Linux /proc); a worker that has ended or cannot be reniced is left as it is."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    me, parent = os.getpid(), os.getppid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            pid = int(stat.parent.name)
            if ppid == parent and pid != me:
                os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, pid) + YIELD_NICENESS))
        except (OSError, ValueError, IndexError):
            continue


class LocalDemo:
    """The demo DAG run once locally (profiles/local) in ``workdir``, with results and demo data in
    directories whose names hold a space, a quote, a non-ASCII letter, ``$(...)`` and ``;``.

    A DAG that builds on some of its products (the Slurm run: the demo's scenes, a tile's samples, the
    studies' parameters) asks for those first (:meth:`made`): the rest of the DAG then runs in the
    background beside that DAG, instead of before it, and :meth:`results` waits for it. Both are the
    same rules on the same files as one run of the whole DAG (the rerun tests see nothing left to do)."""

    TIMEOUT = 1500  # seconds, each of the (at most) two snakemake runs

    def __init__(self, workdir: Path, log: Path):
        self.workdir, self.log = workdir, log
        self.config = demo_config(workdir / "demo.yaml")
        self.results_dir = workdir / HOSTILE_RESULTS
        self._rest: subprocess.Popen | None = None
        self._deadline = 0.0
        self._finished = False

    def made(self, *targets: str) -> Path:
        """``targets`` (paths in the results directory) made, the rest of the DAG running in the background
        (unless it ran already); the results directory."""
        if self._rest is None and not self._finished:
            done = snakemake(self.workdir, *(f"{HOSTILE_RESULTS}/{t}" for t in targets), configfile=self.config,
                             timeout=self.TIMEOUT)
            assert done.returncode == 0, done.stderr[-4000:]
            cmd, env = snakemake_command(self.workdir, configfile=self.config)
            with self.log.open("w") as out:
                self._rest = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True)
            self._deadline = time.monotonic() + self.TIMEOUT
        absent = [t for t in targets if not (self.results_dir / t).exists()]
        assert not absent, f"the local demo run has not made {absent}"
        return self.results_dir

    def results(self) -> Path:
        """The whole DAG made (waiting for the background run, if one runs); the results directory."""
        if not self._finished:
            if self._rest is None:
                done = snakemake(self.workdir, configfile=self.config, timeout=self.TIMEOUT)
                assert done.returncode == 0, done.stderr[-4000:]
            else:
                try:
                    code = self._rest.wait(timeout=max(1.0, self._deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.stop()
                    raise
                assert code == 0, self.log.read_text(errors="replace")[-4000:]
            self._finished = True
        return self.results_dir

    def stop(self) -> None:
        """End a background run that is still running (a failed test left it), with the jobs it started."""
        if self._rest is not None and self._rest.poll() is None:
            os.killpg(self._rest.pid, signal.SIGTERM)
            try:
                self._rest.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self._rest.pid, signal.SIGKILL)
                self._rest.wait()


@pytest.fixture(scope="session")
def local_demo(tmp_path_factory) -> Iterator[LocalDemo]:
    """The demo DAG's local run (:class:`LocalDemo`), not started yet: ask :meth:`LocalDemo.made` for the
    products another DAG needs first, or take ``local_demo_run``."""
    others_yield()
    demo = LocalDemo(tmp_path_factory.mktemp("demo-run"), tmp_path_factory.mktemp("demo-run-log") / "snakemake.log")
    yield demo
    demo.stop()


@pytest.fixture(scope="session")
def local_demo_run(local_demo: LocalDemo) -> Path:
    """The demo DAG run once locally, to its end (:class:`LocalDemo`); its results directory."""
    return local_demo.results()
