# Hyperparameter optimisation (lcflow.tune.tuning): hpo.workers jobs per tuned model share one Optuna study
# under results/hpo/{model}/; each job is a training job like train (the same launcher, the same
# multi-node resources under profiles/slurm) running trials until the study's budget is spent.
# The study's journal is not an output: a rerun (a bigger budget, a killed job) continues it.


# the studies head the DAG's longest chain (every product of a tuned model waits on them): started
# before the other ready jobs, whose untuned models' jobs then fill the cores beside them
STUDY_PRIORITY = 10


rule hpo_rf:
    input:
        ALL_SAMPLES,
    output:
        f"{R}/hpo/rf/workers/{{worker}}.json",
    log:
        f"{R}/logs/hpo/rf_{{worker}}.log",
    benchmark:
        f"{R}/benchmarks/hpo/rf_{{worker}}.tsv"
    wildcard_constraints:
        worker=r"\d+",
    params:
        study=subpath(output[0], ancestor=2),
        model_params=model_params("rf"),
        settings=HPO_SETTINGS.worker_json("rf"),
    threads: max(1, CORES // HPO.get("workers", 1))
    priority: STUDY_PRIORITY
    conda:
        ENV
    shell:
        "lcflow -v tune --model rf --samples {input:q} --study {params.study:q} --worker {wildcards.worker}"
        " --settings {params.settings:q} --params {params.model_params:q} --set n_jobs={threads} --out {output:q} > {log:q} 2>&1"


rule hpo:
    input:
        ALL_SAMPLES,
    output:
        f"{R}/hpo/{{model}}/workers/{{worker}}.json",
    log:
        f"{R}/logs/hpo/{{model}}_{{worker}}.log",
    benchmark:
        f"{R}/benchmarks/hpo/{{model}}_{{worker}}.tsv"
    wildcard_constraints:
        model="|".join(m for m in TUNED if m != "rf") or "none",
        worker=r"\d+",
    params:
        study=subpath(output[0], ancestor=2),
        model_params=lambda wc: model_params(wc.model),
        settings=lambda wc: HPO_SETTINGS.worker_json(wc.model),
        # started as train is (lcflow.launch): the same launcher, nodes and tasks
        launcher=ranks_launcher("hpo", f"{R}/benchmarks/hpo/{{model}}_{{worker}}.tsv"),
        backend=BACKEND,
        rendezvous=RENDEZVOUS,
        threads=lambda wc, resources: launch.threads_per_rank(resources),
    # locally the workers share the machine's cores, so they run at the same time
    threads: max(1, CORES // HPO.get("workers", 1))
    resources:
        ranks=1,
        threads_per_rank=max(1, CORES // HPO.get("workers", 1)),
    priority: STUDY_PRIORITY
    conda:
        ENV
    shell:
        "{params.launcher} lcflow -v tune --model {wildcards.model} --samples {input:q} --study {params.study:q}"
        " --worker {wildcards.worker} --settings {params.settings:q} --params {params.model_params:q} --set threads={params.threads}"
        " --backend {params.backend} {params.rendezvous} --out {output:q} > {log:q} 2>&1"


rule hpo_summary:
    input:
        lambda wc: expand(f"{R}/hpo/{wc.model}/workers/{{worker}}.json", worker=range(HPO["workers"])),
    output:
        best=f"{R}/hpo/{{model}}/best_params.yaml",
        trials=f"{R}/hpo/{{model}}/trials.csv",
        history=report(
            f"{R}/hpo/{{model}}/optimisation_history.png",
            caption="../report/hpo_history.rst",
            category="Hyperparameter optimisation",
            subcategory="{model}",
        ),
        importances=report(
            f"{R}/hpo/{{model}}/param_importances.png",
            caption="../report/hpo_importances.rst",
            category="Hyperparameter optimisation",
            subcategory="{model}",
        ),
        intermediate=report(
            f"{R}/hpo/{{model}}/intermediate_values.png",
            caption="../report/hpo_intermediate.rst",
            category="Hyperparameter optimisation",
            subcategory="{model}",
        ),
    log:
        f"{R}/logs/hpo/{{model}}_summary.log",
    benchmark:
        f"{R}/benchmarks/hpo/{{model}}_summary.tsv"
    wildcard_constraints:
        model="|".join(TUNED) or "none",
    params:
        study=subpath(output.best, parent=True),
        storage=f"--storage {shlex.quote(HPO['storage'])}" if HPO.get("storage") else "",
    priority: STUDY_PRIORITY
    conda:
        ENV
    shell:
        "lcflow -v tune-summary --model {wildcards.model} --study {params.study:q} {params.storage}"
        " --out {output.best:q} > {log:q} 2>&1"
