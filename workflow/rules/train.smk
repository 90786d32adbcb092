ALL_SAMPLES = expand(f"{R}/{{tile}}/{{year}}/samples.parquet", tile=TILES, year=YEARS)


rule train_rf:
    input:
        ALL_SAMPLES,
    output:
        meta=f"{R}/models/rf/model.json",
        weights=f"{R}/models/rf/model.joblib",
        metrics=f"{R}/models/rf/metrics.json",
        history=f"{R}/models/rf/history.csv",
    log:
        f"{R}/logs/train/rf.log",
    params:
        sets=model_sets("rf"),
        out=subpath(output.meta, parent=True),
    threads: workflow.cores
    conda:
        ENV
    shell:
        "lcflow train --model rf --samples {input} --out {params.out} {params.sets} --set n_jobs={threads} > {log} 2>&1"


rule train:
    input:
        ALL_SAMPLES,
    output:
        meta=f"{R}/models/{{model}}/model.json",
        weights=f"{R}/models/{{model}}/model.pt",
        metrics=f"{R}/models/{{model}}/metrics.json",
        history=f"{R}/models/{{model}}/history.csv",
    log:
        f"{R}/logs/train/{{model}}.log",
    wildcard_constraints:
        model="|".join(DEEP_MODELS) or "none",
    params:
        sets=lambda wc: model_sets(wc.model),
        out=subpath(output.meta, parent=True),
    threads: workflow.cores
    resources:
        # how the training processes start, and CPU threads each: the profile sets them
        # (horovodrun -np N, srun --mpi=pmix ...); bare, it is one process using every core
        launcher="env",
        threads_per_rank=workflow.cores,
    conda:
        ENV
    shell:
        "{resources.launcher} lcflow train --model {wildcards.model} --samples {input} --out {params.out}"
        " {params.sets} --set threads={resources.threads_per_rank} > {log} 2>&1"
