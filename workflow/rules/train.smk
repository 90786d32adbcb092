
rule train_rf:
    input:
        unpack(tuned_input),
        samples=ALL_SAMPLES,
    output:
        meta=f"{R}/models/rf/model.json",
        weights=f"{R}/models/rf/model.skops",
        metrics=f"{R}/models/rf/metrics.json",
        history=f"{R}/models/rf/history.csv",
    log:
        f"{R}/logs/train/rf.log",
    benchmark:
        f"{R}/benchmarks/train/rf.tsv"
    params:
        model_params=model_params("rf"),
        out=subpath(output.meta, parent=True),
        tuned=tuned_option,
    threads: CORES
    conda:
        ENV
    shell:
        "lcflow -v train --model rf --samples {input.samples:q} --out {params.out:q} --params {params.model_params:q}"
        " --set n_jobs={threads} {params.tuned} > {log:q} 2>&1"


rule train:
    input:
        unpack(tuned_input),
        samples=ALL_SAMPLES,
    output:
        meta=f"{R}/models/{{model}}/model.json",
        weights=f"{R}/models/{{model}}/model.pt",
        metrics=f"{R}/models/{{model}}/metrics.json",
        history=f"{R}/models/{{model}}/history.csv",
    log:
        f"{R}/logs/train/{{model}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{model}}.tsv"
    wildcard_constraints:
        model="|".join(DEEP_MODELS) or "none",
    params:
        model_params=lambda wc: model_params(wc.model),
        out=subpath(output.meta, parent=True),
        tuned=tuned_option,
        # how the training processes start, from the resources the profile sets (lcflow.launch):
        # ranks=N locally (the backend's horovodrun or torchrun), or a launcher command line;
        # mpi="srun --mpi=pmix" with nodes, tasks_per_node and cpus_per_task under Slurm; bare, one
        # process using every core
        launcher=ranks_launcher("train", f"{R}/benchmarks/train/{{model}}.tsv"),
        backend=BACKEND,
        rendezvous=RENDEZVOUS,
        threads=lambda wc, resources: launch.threads_per_rank(resources),
    threads: CORES
    resources:
        ranks=1,
        threads_per_rank=CORES,
    conda:
        ENV
    shell:
        "{params.launcher} lcflow -v train --model {wildcards.model} --samples {input.samples:q} --out {params.out:q}"
        " --params {params.model_params:q} --set threads={params.threads} {params.tuned} --backend {params.backend} {params.rendezvous}"
        " > {log:q} 2>&1"


# A blend's directory (lcflow.train.model_dirs.blend): its members named and checksummed, scored together on the val and
# test rows. It reads the members' weights (a forest can be gigabytes), so it is a job like a training.
rule blend:
    input:
        members=expand(f"{R}/models/{{member}}/model.json", member=BLEND_MEMBERS),
        samples=ALL_SAMPLES,
    output:
        meta=f"{R}/models/blend/model.json",
        members=f"{R}/models/blend/members.json",
        metrics=f"{R}/models/blend/metrics.json",
    log:
        f"{R}/logs/train/blend.log",
    benchmark:
        f"{R}/benchmarks/train/blend.tsv"
    params:
        members=lambda wc, input: [str(Path(m).parent) for m in input.members],
        out=subpath(output.meta, parent=True),
    conda:
        ENV
    shell:
        "lcflow -v blend --members {params.members:q} --samples {input.samples:q} --out {params.out:q} > {log:q} 2>&1"


rule learning_curve:
    input:
        f"{R}/models/{{model}}/model.json",
    output:
        report(
            f"{R}/models/{{model}}/learning_curve.png",
            caption="../report/learning_curve.rst",
            category="Training",
            labels={"model": "{model}"},
        ),
    log:
        f"{R}/logs/learning_curve/{{model}}.log",
    benchmark:
        f"{R}/benchmarks/learning_curve/{{model}}.tsv"
    params:
        history=lambda wildcards, input: str(Path(input[0]).parent / "history.csv"),
    conda:
        ENV
    shell:
        "lcflow -v learning-curve --history {params.history:q} --title {wildcards.model:q} --out {output:q} > {log:q} 2>&1"
