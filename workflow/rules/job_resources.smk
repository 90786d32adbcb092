# What each job took (Snakemake's benchmark files): users size their Slurm requests from it. It runs after
# every product of the run (PRODUCTS), so every job's benchmark file is there.
rule job_resources:
    input:
        PRODUCTS,
    output:
        table=report(f"{R}/job_resources.tsv", caption="../report/job_resources.rst", category="Resources"),
        figure=report(f"{R}/job_resources.png", caption="../report/job_resources.rst", category="Resources"),
    log:
        f"{R}/logs/job_resources.log",
    params:
        benchmarks=f"{R}/benchmarks",
    conda:
        ENV
    shell:
        "lcflow -v job-resources --benchmarks {params.benchmarks:q} --out {output.table:q} --figure {output.figure:q}"
        " > {log:q} 2>&1"
