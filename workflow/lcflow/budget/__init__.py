"""``lcflow budget``: what a config will cost on a cluster (core hours, GPU hours, wall time, disk) per
stage, projected from rates measured by ``benchmarks/seed_study.py`` and shipped as ``rates.json``."""
