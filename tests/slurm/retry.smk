# A small workflow for the Slurm profile's failure handling and its controller job (tests/slurm/test_slurm.py).
# fails_once: attempt 1 gets the profile's default mem_mb (2000 * attempt) and exits 1; attempt 2
# gets twice that and succeeds. slow: writes its output early, then sleeps until it is cancelled.
# controlled: one short job, submitted by a controller that is itself a Slurm job.


rule all:
    input:
        "retried.txt",


rule fails_once:
    output:
        "retried.txt",
    log:
        "logs/fails_once.log",
    shell:
        "echo attempt {resources.mem_mb} >> attempts.txt;"
        " test {resources.mem_mb} -ge 4000 && echo done > {output} 2> {log}"


rule slow:
    output:
        "slow.txt",
    log:
        "logs/slow.log",
    shell:
        "echo partial > {output}; sleep 600 2> {log}"


rule controlled:
    output:
        "controlled.txt",
    log:
        "logs/controlled.log",
    shell:
        "hostname > {output} 2> {log}"
