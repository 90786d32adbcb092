"""``lcflow summarize-changes``'s table: every pair of years of every consistent map series, the change between
its raw and its consistent maps and, where truth was given, their scores."""

import json
from pathlib import Path

import numpy as np


def summary_table(paths: list[str | Path]) -> str:
    """TSV of every pair of years of every series: change between the raw and the consistent maps and,
    where truth was given, their scores (overall accuracy: mean of the pair's two years)."""
    lines = [
        "series\tmodel\tyears\tchanged_raw\tchanged\tagreement_raw\tagreement\tstable_kept_raw\tstable_kept"
        "\tchange_f1_raw\tchange_f1\ttruth_OA_raw\ttruth_OA"
    ]

    def fmt(v: float | None) -> str:
        return "" if v is None else f"{v:.4f}"

    for path in paths:
        s = json.loads(Path(path).read_text())
        oa = s.get("truth_overall_accuracy")
        for i, p in enumerate(s["pairs"]):
            r, c = p["raw"], p["consistent"]
            rt, ct = r.get("truth", {}), c.get("truth", {})
            pair_oa = (
                [float(np.mean(oa[k][i : i + 2])) for k in ("raw", "consistent")]
                if oa
                else [None, None]
            )
            lines.append(
                "\t".join(
                    [
                        Path(path).stem,
                        str(s["model"]),
                        f"{p['years'][0]}-{p['years'][1]}",
                        fmt(r["changed_fraction"]),
                        fmt(c["changed_fraction"]),
                        fmt(r["agreement"]),
                        fmt(c["agreement"]),
                        fmt(rt.get("stable_kept")),
                        fmt(ct.get("stable_kept")),
                        fmt(rt.get("change_f1")),
                        fmt(ct.get("change_f1")),
                        fmt(pair_oa[0]),
                        fmt(pair_oa[1]),
                    ]
                )
            )
    return "\n".join(lines) + "\n"
