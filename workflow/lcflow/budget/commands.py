"""``lcflow budget``: core hours, GPU hours, wall time and disk per stage of a config, on the Slurm
profile's nodes or on this machine, for a compute-time proposal (docs/slurm.md, "Budget")."""

from __future__ import annotations

from pathlib import Path

from lcflow.common import path_guard
from lcflow.common.cli_args import number_in


def cmd_budget(a) -> None:
    from lcflow.budget import cluster, footprint, memory, projection, rates, work
    from lcflow.config.loading import Origins, merge, unset_nulls
    from lcflow.config.validation import check
    from lcflow.defaults import SCHEMA
    from lcflow.retrieve.stage_settings import StageSettings

    config = merge(a.configfile)
    unset_nulls(config)
    # not fetched yet
    check(config, SCHEMA, base=a.directory, origins=Origins(a.configfile), files=False)
    measured = rates.load(Path(a.rates) if a.rates else None)
    if a.rates_from:
        from lcflow.budget import from_run

        measured = from_run.rates(Path(a.rates_from), measured)
    assumed = measured["assumed"] = {
        **measured["assumed"],
        **{
            k: v
            for k, v in {
                "scenes": a.scenes,
                "classes": a.classes,
                "stage_gbit": a.stage_gbit,
                "scaling": a.scaling,
            }.items()
            if v is not None
        },
    }
    results = Path(a.directory) / (a.results or config.get("results") or "results")
    todo = work.from_config(config, results, assumed["scenes"], int(assumed["classes"]))
    where = (
        cluster.this_machine()
        if a.profile == "local"
        else cluster.from_profile(Path(a.profile), a.cpu_nodes, a.gpu_nodes)
    )
    if a.profile != "local":
        measured = rates.for_gpu_type(measured, where.gpu_type, a.gpu_speed)
    rows = projection.project(todo, measured, where)
    needs = memory.needs(
        todo, measured, where.node_cores, where.cpu_job_cores, int(assumed["classes"])
    )
    _print_budget(a, todo, where, measured, rows)
    print()
    spread = footprint.of(rows, todo)
    stage_dir = StageSettings.from_config(config.get("stage")).dir
    for line in spread.lines(str(Path(a.directory) / stage_dir), str(results), where.login_node):
        print(line)
    _print_memory(needs, where)
    if a.json:
        _write_json(a.json, rows, needs, spread)


def _print_budget(a, todo, where, measured: dict, rows: list) -> None:
    """What the budget is of, on what, from which rates; then its table."""
    from lcflow.budget import projection

    assumed = measured["assumed"]
    print(
        f"budget of {', '.join(str(f) for f in a.configfile)}: {len(todo.tiles)} tile(s) x {todo.years} year(s) = "
        f"{len(todo.tile_years)} tile-years of {sum(todo.px.values()) / len(todo.px) / 1e6:.2f} Mpx on average, "
        f"models {', '.join(todo.models)}; {todo.n_train:,} training rows"
    )
    print(
        f"on {where.name}: CPU jobs of {where.cpu_job_cores} cores, nodes of {where.node_cores}; "
        + (
            f"{where.gpus_per_node} GPUs a GPU node, training on {where.train_nodes} node(s)"
            if where.gpus_per_node
            else f"deep models on {where.train_nodes * where.ranks_per_node} CPU ranks"
        )
    )
    print(f"rates: {measured['measured']}")
    for line in todo.said:
        print(f"  {line}")
    print(
        f"  assumed: {assumed['scaling']} multi-node efficiency; core h are "
        + (
            "whole nodes x their cores x wall (BILLING node)"
            if where.billing == "node"
            else "cores held x wall (BILLING core)"
        )
        + "; "
        "disk is uncompressed (an upper bound)\n"
    )
    print(projection.table(rows))


def _print_memory(needs: list, where) -> None:
    """The forest's jobs' peak memory, each with a WARNING where it is more than a CPU node holds."""
    if not needs:
        return
    print(
        f"\nmemory a job holds at its peak (benchmarks/forest_fit_memory.py); a CPU node {where.node_mem_mb / 1000:.0f} GB:"
    )
    for need in needs:
        print(f"{need.stage:22s} {need.mb / 1000:8.2f} GB  {need.parts}")
    for need in needs:
        if need.mb > where.node_mem_mb:
            print(
                f"WARNING: {need.stage} needs about {need.mb / 1000:.1f} GB, more than a CPU node's "
                f"{where.node_mem_mb / 1000:.0f} GB (NODE_MEM_MB): Slurm would end it out of memory; fewer "
                "training rows (sample.per_class, sample.fractions), a larger "
                "model_params.rf.min_samples_leaf, or a partition of larger nodes"
            )


def _write_json(out: str, rows: list, needs: list, spread) -> None:
    """Every row and total, as JSON."""
    import dataclasses
    import json

    from lcflow.budget import projection
    from lcflow.common.atomic import write_text

    total, path = projection.critical_path(rows)
    write_text(
        out,
        json.dumps(
            {
                "rows": [
                    {
                        **dataclasses.asdict(r),
                        "wall_h": r.wall_h,
                        "core_h": r.core_h,
                        "gpu_h": r.gpu_h,
                    }
                    for r in rows
                ],
                "critical_path_h": total,
                "critical_path": path,
                "core_h": sum(r.core_h for r in rows),
                "gpu_h": sum(r.gpu_h for r in rows),
                "cpu_s_by_stage": projection.by_stage(rows),
                "memory_mb": {n.stage: n.mb for n in needs},
                "footprint": dataclasses.asdict(spread),
            },
            indent=1,
        )
        + "\n",
    )


def register(command) -> None:
    """Add ``lcflow budget``; ``command(name, help, **kw)`` makes one sub-parser."""
    p = command(
        "budget",
        "core hours, GPU hours, wall time and disk per stage of a config, from measured rates",
    )
    p.add_argument(
        "--configfile",
        nargs="+",
        required=True,
        type=path_guard.input_file,
        help="the config, then any files layered over it (as snakemake --configfile)",
    )
    p.add_argument(
        "--directory", default=".", help="directory the config's relative paths start from"
    )
    p.add_argument(
        "--profile",
        default="profiles/slurm",
        help="the Slurm profile whose SITE VALUES (LCFLOW_SLURM_* where exported) size the jobs; local: "
        "this machine as profiles/local runs it",
    )
    p.add_argument(
        "--cpu-nodes",
        type=number_in(1, 100_000, integer=True),
        default=8,
        help="CPU-partition nodes the run holds at once",
    )
    p.add_argument(
        "--gpu-nodes",
        type=number_in(1, 100_000, integer=True),
        default=4,
        help="GPU-partition nodes the run holds at once",
    )
    p.add_argument(
        "--results",
        help="the run's results folder, whose items and sample tables are counted where "
        "they exist (default: the config's results)",
    )
    _rates_options(p)
    p.add_argument(
        "--json", type=path_guard.output_file, help="also write every row and total to this file"
    )
    p.add_argument(
        "--gpu-speed",
        type=number_in(0, 100, low_open=True),
        help="the site's GPU (GPU_TYPE) against the measured one, as a ratio of their training and map "
        "rates: needed where GPU_TYPE names another type than the rates measured",
    )
    g = p.add_argument_group("assumptions (the rates file's unless given)")
    g.add_argument(
        "--scenes",
        type=number_in(0, 100_000, low_open=True),
        help="L2A scenes a tile-year, where no search has counted them",
    )
    g.add_argument(
        "--classes",
        type=number_in(2, 1000, integer=True),
        help="classes a tile-year's table holds, where no table exists yet",
    )
    g.add_argument(
        "--stage-gbit",
        type=number_in(0, 10_000, low_open=True),
        help="the stage-in's link to the archive, Gbit/s",
    )
    g.add_argument(
        "--scaling",
        type=number_in(0, 1, low_open=True),
        help="data-parallel efficiency of a multi-node training",
    )
    p.set_defaults(func=cmd_budget)


def _rates_options(p) -> None:
    """Where the rates come from: a rates file, a finished run on the site."""
    p.add_argument(
        "--rates",
        type=path_guard.input_file,
        help="rates written by benchmarks/seed_study.py --rates (default: the "
        "package's, measured as docs/benchmarks.md says)",
    )
    p.add_argument(
        "--rates-from",
        type=path_guard.input_dir,
        metavar="RESULTS",
        help="the results folder of a finished run on the site (the demo, or one whole tile-year): "
        "each stage it made priced as its jobs spent (lcflow.budget.from_run), the rest as --rates",
    )
